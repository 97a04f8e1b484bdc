"""torch's arithmetic beyond the operators of ops/elementwise.py: add/sub with alpha, division with
rounding (`//`, div(rounding_mode=)), remainder (`%`) and fmod, the binary maths atan2, hypot and
logaddexp, and the blends lerp, addcmul, addcdiv; with torch's aliases (subtract, multiply, divide,
true_divide, negative).

The remainder of the truncated quotient (fmod) is WGSL's `%` for integers and map.wgsl's exact
fmod_f for floats (WGSL's float `%` rounds a - b trunc(a / b)); remainder moves a nonzero one onto
the divisor's sign, floor division steps the truncated quotient down where they differ in sign, as
torch's CPU kernels do. Integer division by a Python 0
raises torch's RuntimeError("ZeroDivisionError"); by a tensor holding zeros it gives what WGSL
gives, on both devices (no readback to look): x // 0 and div(x, 0, rounding_mode='trunc') are x,
x % 0 and fmod(x, 0) are 0.
"""
import math

from ..amp import autocast_op
from .. import dtypes
from .elementwise import DIV, MapOp, _map, add as _add, div as _divide, mul, neg, sub as _sub, zero_gradient
from .inplace import modify
from .unary import wgsl_atan
from .._tensor import Tensor, tensor_method


def _np_int_quotient(np, a, b, rounding):
    """Integer a / b rounded (np.trunc or np.floor), a where b is 0 (what WGSL's `/` gives)."""
    safe = np.where(b == 0, 1, b)
    return np.where(b == 0, a, rounding(a / safe))   # float64 quotients of int32 round exactly


def _steps_down(r):
    """WGSL: whether the remainder r and the divisor b differ in sign (floor is then trunc - 1)."""
    return f"({r} != T(0) && (({r} < T(0)) != (b < T(0))))"


# The remainder of the truncated quotient: WGSL's % for ints, map.wgsl's exact fmod_f for floats.
_INT_REM, _FLOAT_REM = "(a % b)", "T(fmod_f(f32(a), f32(b)))"
FMOD_INT = MapOp("fmod_int", _INT_REM, lambda np, a, b: np.fmod(a, b))
FMOD = MapOp("fmod", _FLOAT_REM, lambda np, a, b: np.fmod(a, b),
             (lambda g, a, b, o: g, lambda g, a, b, o: -g * div(a, b, rounding_mode="trunc")))
REMAINDER_INT = MapOp("remainder_int", f"select({_INT_REM}, {_INT_REM} + b, {_steps_down(_INT_REM)})",
                      lambda np, a, b: np.remainder(a, b))
REMAINDER = MapOp("remainder", f"select({_FLOAT_REM}, {_FLOAT_REM} + b, {_steps_down(_FLOAT_REM)})",
                  lambda np, a, b: np.remainder(a, b),
                  (lambda g, a, b, o: g, lambda g, a, b, o: -g * div(a, b, rounding_mode="floor")))
DIV_TRUNC_INT = MapOp("div_trunc_int", "a / b", lambda np, a, b: _np_int_quotient(np, a, b, np.trunc))
DIV_TRUNC = MapOp("div_trunc", "trunc(a / b)", lambda np, a, b: np.trunc(a / b), (zero_gradient, zero_gradient))
DIV_FLOOR_INT = MapOp("div_floor_int", f"select(a / b, a / b - T(1), {_steps_down(_INT_REM)})",
                      lambda np, a, b: _np_int_quotient(np, a, b, np.floor))
# torch's (and Python's) float floor division: (a - fmod(a, b)) / b is (nearly) a whole number, then
# stepped down as above and rounded to the nearest whole; not floor(a / b), which 1 // 0.1 rounds to 10
_WHOLE = f"((a - {_FLOAT_REM}) / b - select(T(0), T(1), {_steps_down(_FLOAT_REM)}))"
DIV_FLOOR = MapOp("div_floor", f"select(floor({_WHOLE}) + select(T(0), T(1), {_WHOLE} - floor({_WHOLE}) > T(0.5)), "
                               "a / b, b == T(0))",
                  lambda np, a, b: np.floor_divide(a, b), (zero_gradient, zero_gradient))


def _no_derivative(g, *operands):
    raise RuntimeError("derivative for floor_divide is not implemented (div(rounding_mode='floor') has one: "
                       "zero)")


# `//` and floor_divide: div_floor whose backward raises, as torch's
FLOOR_DIVIDE = MapOp("floor_divide", DIV_FLOOR.wgsl, DIV_FLOOR.numpy, (_no_derivative, _no_derivative))
_ATAN = wgsl_atan("(a / b)")   # (not WGSL's atan2: lavapipe's is off by 1e-4 as its atan is)
ATAN2 = MapOp("atan2", f"select(select({_ATAN}, {_ATAN} + select(-{math.pi!r}, {math.pi!r}, a >= 0.0), b < 0.0), "
                       "0.0, a == 0.0 && b == 0.0)",
              lambda np, a, b: np.arctan2(a, b),
              (lambda g, a, b, o: g * b / (a * a + b * b), lambda g, a, b, o: -g * a / (a * a + b * b)),
              floating=True)
HYPOT = MapOp("hypot", "sqrt(a * a + b * b)", lambda np, a, b: np.hypot(a, b),
              (lambda g, a, b, o: g * a / o, lambda g, a, b, o: g * b / o), floating=True)
# the larger plus log1p(exp(-|a - b|)); equal operands (infinities too) give a + log 2
LOGADDEXP = MapOp("logaddexp", f"select(max(a, b) + log_f(1.0 + exp(-abs(a - b))), a + {math.log(2.0)!r}, a == b)",
                  lambda np, a, b: np.logaddexp(a, b),
                  (lambda g, a, b, o: g * (a - o).exp(), lambda g, a, b, o: g * (b - o).exp()), floating=True)


def _integral(op_name, *operands):
    """Whether the op computes on integers (no float operand); bool-only operands raise, as in torch."""
    kinds = [x.dtype if isinstance(x, Tensor) else dtypes.float32 if isinstance(x, float) else
             dtypes.bool_ if isinstance(x, bool) else dtypes.int32 for x in operands]
    if all(k is dtypes.bool_ for k in kinds):
        raise NotImplementedError(f'"{op_name}" not implemented for \'Bool\'')
    return not any(k.is_floating_point for k in kinds)


def _chosen(op_name, ops, a, b):
    """ops' integer form or its float form, as a and b divide; a Python 0 dividing integers raises
    torch's ZeroDivisionError."""
    integral = _integral(op_name, a, b)
    if integral and not isinstance(b, Tensor) and b == 0:
        raise RuntimeError("ZeroDivisionError")
    return ops[0] if integral else ops[1]


# ---- the public functions ----
@tensor_method
def add(input, other, *, alpha=1):
    return _add(input, _scaled(other, alpha))


@tensor_method
def sub(input, other, *, alpha=1):
    return _sub(input, _scaled(other, alpha))


def _scaled(other, alpha):
    return other if alpha == 1 else mul(other, alpha) if isinstance(other, Tensor) else other * alpha


def _division(rounding_mode, a, b):
    """The MapOp of a / b with div's rounding_mode (None, 'trunc' or 'floor')."""
    if rounding_mode is None:
        return DIV
    if rounding_mode not in ("trunc", "floor"):
        raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
                           f"'{rounding_mode}'")
    ops = {"trunc": (DIV_TRUNC_INT, DIV_TRUNC), "floor": (DIV_FLOOR_INT, DIV_FLOOR)}[rounding_mode]
    return _chosen(f"div_{rounding_mode}", ops, a, b)


@tensor_method
def div(input, other, *, rounding_mode=None):
    """input / other; rounding_mode 'trunc' or 'floor' rounds the quotient (integers stay integers)."""
    return _map(_division(rounding_mode, input, other), input, other)


@tensor_method
def div_(x, other, *, rounding_mode=None):
    return modify(x, _division(rounding_mode, x, other), x, other)


@tensor_method
def floor_divide(input, other):
    """input // other (rounded down, as Python's //). Like torch's it has no derivative: backward
    through it raises (div(rounding_mode='floor')'s gradient is zero)."""
    return _map(_chosen("div_floor", (DIV_FLOOR_INT, FLOOR_DIVIDE), input, other), input, other)


@tensor_method
def remainder(input, other):
    """input % other, with the divisor's sign (Python's %)."""
    return _map(_chosen("remainder", (REMAINDER_INT, REMAINDER), input, other), input, other)


@tensor_method
def fmod(input, other):
    """C's fmod: the remainder of the quotient truncated toward zero, with the dividend's sign."""
    return _map(_chosen("fmod", (FMOD_INT, FMOD), input, other), input, other)


@tensor_method
def remainder_(x, other):
    return modify(x, _chosen("remainder", (REMAINDER_INT, REMAINDER), x, other), x, other)


@tensor_method
def fmod_(x, other):
    return modify(x, _chosen("fmod", (FMOD_INT, FMOD), x, other), x, other)


@tensor_method
def floor_divide_(x, other):
    return modify(x, _chosen("div_floor", (DIV_FLOOR_INT, FLOOR_DIVIDE), x, other), x, other)


@tensor_method
@autocast_op
def atan2(input, other): return _map(ATAN2, input, other)
@tensor_method
def hypot(input, other): return _map(HYPOT, input, other)
@tensor_method
def logaddexp(input, other): return _map(LOGADDEXP, input, other)


@tensor_method
def lerp(input, end, weight):
    """input + weight (end - input)."""
    return input + weight * (end - input)


@tensor_method
@autocast_op
def addcmul(input, tensor1, tensor2, *, value=1):
    return input + value * tensor1 * tensor2


@tensor_method
@autocast_op
def addcdiv(input, tensor1, tensor2, *, value=1):
    if not (tensor1.dtype.is_floating_point or tensor2.dtype.is_floating_point):
        raise RuntimeError("Integer division with addcdiv is no longer supported, and in a future release addcdiv "
                           "will perform a true division of tensor1 and tensor2. The historic addcdiv behavior can "
                           "be implemented as (input + value * webgrad.trunc(tensor1 / tensor2)).to(input.dtype) for "
                           "integer inputs and as (input + value * tensor1 / tensor2) for float inputs. The future "
                           "addcdiv behavior is just the latter implementation: (input + value * tensor1 / tensor2), "
                           "for all dtypes.")
    return input + value * tensor1 / tensor2


# operators and torch's other names
Tensor.__mod__, Tensor.__floordiv__ = remainder, floor_divide
Tensor.__imod__, Tensor.__ifloordiv__, Tensor.__itruediv__ = remainder_, floor_divide_, div_
Tensor.__rmod__ = lambda self, other: remainder(other, self)
Tensor.__rfloordiv__ = lambda self, other: floor_divide(other, self)
subtract, multiply, divide, true_divide, negative, arctan2 = sub, mul, div, _divide, neg, atan2
Tensor.subtract, Tensor.multiply, Tensor.divide, Tensor.true_divide = sub, mul, div, _divide
Tensor.negative, Tensor.arctan2 = neg, atan2
