"""Elementwise ops. Each MapOp carries its WGSL expression (run by shaders/elementwise.wgsl),
its NumPy twin (the cpu device) and its gradient, so one entry says all there is about an op.

In a WGSL expression the operands are a, b, c, already converted to the compute type T;
helpers such as erf_f live in shaders/elementwise.wgsl.
"""
import functools
import math
import numbers

from ..amp import autocast_op
from .. import autograd as _autograd, dtypes
from ..autograd import Function, records
from ..backends import get_backend
from ..backends.base import Elementwise, contiguous_strides, wgsl_is_nan as _nan
from .._tensor import Size, Tensor, tensor_method
from .plans import Plans, plan_key


class MapOp(Elementwise):
    """An elementwise kernel (backends.base.Elementwise: its WGSL and NumPy forms) and what the
    op adds: its gradients, result dtype and promotion rule."""

    def __init__(self, name, wgsl, numpy, grads=(), out=None, floating=False, arg_kinds=None, bools=None,
                 integral=False):
        super().__init__(name, wgsl, numpy, arg_kinds)
        self.grads = grads        # one fn(g, *inputs, out) -> Tensor per input (None: no gradient)
        self.out = out            # result dtype; None means the compute dtype
        self.floating = floating  # integer inputs compute in float32 (exp of an int tensor is float)
        # on bool tensors, as torch: None, a bool counts as 0 or 1 (int32 arithmetic); True, bools stay
        # bool; a MapOp, it runs instead where every operand is bool (add: logical or); a str, torch's
        # refusal of any bool tensor operand (a RuntimeError)
        self.bools = bools
        self.integral = integral  # integer and bool operands only (the bitwise ops): floats raise, as in torch


def _erf(np, x):
    # Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7), the same formula as erf_f in WGSL
    t = 1.0 / (1.0 + 0.3275911 * np.abs(x))
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return np.sign(x) * (1.0 - poly * np.exp(-x * x))


def _sigmoid(np, x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype)


def _pow(np, a, b):
    return np.power(a, b)


def zero_gradient(g, *operands):
    """The gradient of a piecewise-constant op (sign, floor, round, ...): zeros, as PyTorch gives
    (not None: x.grad is then a tensor), whatever g holds."""
    from .creation import zeros_like
    return zeros_like(g)


_SQRT1_2 = 0.7071067811865476
_INV_SQRT_2PI = 0.3989422804014327
_BOOL = "bool"

# ---- the ops ----
LOGICAL_AND = MapOp("logical_and", "select(0u, 1u, a != T(0) && b != T(0))",
                    lambda np, a, b: np.logical_and(a, b), out=_BOOL)
LOGICAL_OR = MapOp("logical_or", "select(0u, 1u, a != T(0) || b != T(0))",
                   lambda np, a, b: np.logical_or(a, b), out=_BOOL)
LOGICAL_XOR = MapOp("logical_xor", "select(0u, 1u, (a != T(0)) != (b != T(0)))",
                    lambda np, a, b: np.logical_xor(a, b), out=_BOOL)
LOGICAL_NOT = MapOp("logical_not", "select(0u, 1u, a == T(0))", lambda np, a: np.logical_not(a), out=_BOOL)
# & | ^ ~: on bools the logical ops (a bool result), on ints bitwise (bytes computed in int32 wrap back)
BITWISE_AND = MapOp("bitwise_and", "a & b", lambda np, a, b: np.bitwise_and(a, b), bools=LOGICAL_AND, integral=True)
BITWISE_OR = MapOp("bitwise_or", "a | b", lambda np, a, b: np.bitwise_or(a, b), bools=LOGICAL_OR, integral=True)
BITWISE_XOR = MapOp("bitwise_xor", "a ^ b", lambda np, a, b: np.bitwise_xor(a, b), bools=LOGICAL_XOR, integral=True)
BITWISE_NOT = MapOp("bitwise_not", "~a", lambda np, a: np.invert(a), bools=LOGICAL_NOT, integral=True)
ADD = MapOp("add", "a + b", lambda np, a, b: a + b, (lambda g, a, b, o: g, lambda g, a, b, o: g), bools=LOGICAL_OR)
SUB = MapOp("sub", "a - b", lambda np, a, b: a - b, (lambda g, a, b, o: g, lambda g, a, b, o: -g),
            bools="Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to invert "
                  "a mask, use the `~` or `logical_not()` operator instead; for two masks, `^` or `logical_xor()`.")
MUL = MapOp("mul", "a * b", lambda np, a, b: a * b, (lambda g, a, b, o: g * b, lambda g, a, b, o: g * a),
            bools=LOGICAL_AND)
DIV = MapOp("div", "a / b", lambda np, a, b: a / b,
            (lambda g, a, b, o: g / b, lambda g, a, b, o: -g * o / b), floating=True)
POW = MapOp("pow", "pow_f(a, b)", _pow,
            (lambda g, a, b, o: g * b * pow(a, b - 1), lambda g, a, b, o: g * o * _log_any(a)), floating=True)
# NaN operands give NaN (a + b is one), as in PyTorch: WGSL's max/min leave them to the driver
MAXIMUM = MapOp("maximum", f"select(max(a, b), a + b, {_nan('a')} || {_nan('b')})",
                lambda np, a, b: np.maximum(a, b),
                (lambda g, a, b, o: _tie_split(g, a, b), lambda g, a, b, o: _tie_split(g, b, a)), bools=LOGICAL_OR)
MINIMUM = MapOp("minimum", f"select(min(a, b), a + b, {_nan('a')} || {_nan('b')})",
                lambda np, a, b: np.minimum(a, b),
                (lambda g, a, b, o: _tie_split(g, b, a), lambda g, a, b, o: _tie_split(g, a, b)), bools=LOGICAL_AND)
NEG = MapOp("neg", "-a", lambda np, a: -a, (lambda g, a, o: -g,),
            bools="Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a "
                  "mask, use the `~` or `logical_not()` operator instead.")
EXP = MapOp("exp", "exp(a)", lambda np, a: np.exp(a), (lambda g, a, o: g * o,), floating=True)
LOG = MapOp("log", "log_f(a)", lambda np, a: np.log(a), (lambda g, a, o: g / a,), floating=True)
SQRT = MapOp("sqrt", "sqrt(a)", lambda np, a: np.sqrt(a), (lambda g, a, o: g / (2 * o),), floating=True)
ABS = MapOp("abs", "abs(a)", lambda np, a: np.abs(a), (lambda g, a, o: g * sign(a),))
SIGN = MapOp("sign", f"select(sign(a), T(0), {_nan('a')})", lambda np, a: np.where(a != a, 0, np.sign(a)),
             (zero_gradient,))   # sign(NaN) is 0 in PyTorch
# relu's gradient as one kernel rather than g * (x > 0), two. As torch's threshold_backward: 0 where
# relu's result is <= 0, else g (a NaN passes g on); by the result, not the input (the same mask), so
# under wg.jit a product whose store runs the ReLU stores the ReLU alone, not its input too (fusion.py).
RELU_BACKWARD = MapOp("relu_backward", f"select(a, T(0), b <= T(0) && !{_nan('b')})",
                      lambda np, g, o: np.where(o <= 0, np.zeros_like(g), g))
RELU = MapOp("relu", f"select(max(a, T(0)), a, {_nan('a')})", lambda np, a: np.maximum(a, 0),
             (lambda g, a, o: _map(RELU_BACKWARD, g, o),))
LEAKY_RELU = MapOp("leaky_relu", "select(a * b, a, a > T(0))", lambda np, a, b: np.where(a > 0, a, a * b),
                   (lambda g, a, slope, o: g * where(a > 0, 1.0, slope), None), floating=True)
TANH = MapOp("tanh", "tanh_f(a)", lambda np, a: np.tanh(a),
             (lambda g, a, o: g * (1 - o * o),), floating=True)
SIGMOID = MapOp("sigmoid", "sigmoid_f(a)", _sigmoid, (lambda g, a, o: g * o * (1 - o),), floating=True)
GELU_GRAD = MapOp("gelu_grad", f"0.5 * (1.0 + erf_f(a * {_SQRT1_2})) + a * exp(-0.5 * a * a) * {_INV_SQRT_2PI}",
                  lambda np, a: (0.5 * (1 + _erf(np, a * _SQRT1_2)) + a * np.exp(-0.5 * a * a) * _INV_SQRT_2PI
                                 ).astype(a.dtype), floating=True)
GELU = MapOp("gelu", f"0.5 * a * (1.0 + erf_f(a * {_SQRT1_2}))",
             lambda np, a: (0.5 * a * (1 + _erf(np, a * _SQRT1_2))).astype(a.dtype),
             (lambda g, a, o: g * _map(GELU_GRAD, a),), floating=True)
# min(max(x, lo), hi), not WGSL's clamp (the median of the three where lo > hi); NaN anywhere gives
# NaN. The gradients are PyTorch's: a bound gets it where it is the result, lo only while lo < hi.
CLAMP = MapOp("clamp", f"select(min(max(a, b), c), a + b + c, {_nan('a')} || {_nan('b')} || {_nan('c')})",
              lambda np, a, lo, hi: np.minimum(np.maximum(a, lo), hi),
              (lambda g, a, lo, hi, o: where((a >= lo) & (a <= hi), g, 0.0),
               lambda g, a, lo, hi, o: where((a < lo) & (lo < hi), g, 0.0),
               lambda g, a, lo, hi, o: where((a > hi) | (hi < lo), g, 0.0)))
WHERE = MapOp("where", "select(c, b, a != 0u)", lambda np, c, a, b: np.where(c, a, b),
              (None, lambda g, c, a, b, o: where(c, g, 0.0), lambda g, c, a, b, o: where(c, 0.0, g)),
              arg_kinds=(_BOOL, None, None), bools=True)
IDENTITY = MapOp("identity", "a", lambda np, a: a.copy(), (lambda g, a, o: g,))
EQ = MapOp("eq", "select(0u, 1u, a == b)", lambda np, a, b: a == b, out=_BOOL)
NE = MapOp("ne", "select(0u, 1u, a != b)", lambda np, a, b: a != b, out=_BOOL)
LT = MapOp("lt", "select(0u, 1u, a < b)", lambda np, a, b: a < b, out=_BOOL)
LE = MapOp("le", "select(0u, 1u, a <= b)", lambda np, a, b: a <= b, out=_BOOL)
GT = MapOp("gt", "select(0u, 1u, a > b)", lambda np, a, b: a > b, out=_BOOL)
GE = MapOp("ge", "select(0u, 1u, a >= b)", lambda np, a, b: a >= b, out=_BOOL)


@functools.lru_cache(maxsize=None)
def cast_op(dtype):
    """The MapOp that converts to dtype: truncation toward zero for ints, nonzero for bool."""
    if dtype is dtypes.bool_:
        return MapOp("to_bool", "select(0u, 1u, a != T(0))", lambda np, a: a != 0, out=_BOOL)
    # to uint8 through i32: floats wrap modulo 256 as in torch (u32 of a negative float would be 0)
    wgsl = "u32(i32(a))" if dtype is dtypes.uint8 else f"{dtype.wgsl}(a)"
    return MapOp(f"to_{dtype.name}", wgsl, lambda np, a: a.astype(dtype.name), out=dtype.name)


def _log_any(a):
    return math.log(a) if isinstance(a, (int, float)) else log(a)


def _tie_split(g, a, b):
    """d max(a, b)/da: 1 where a wins, 1/2 on a tie (as PyTorch does)."""
    return g * where(a == b, 0.5, (a > b).float())


# ---- applying an op ----
class Map(Function):
    def forward(self, op, plan, *args):
        self.op, self.args = op, args
        self.out = plan.run(op, args)
        return self.out

    def backward(self, grad):
        grads = []
        for position, arg in enumerate(self.args):
            if isinstance(arg, Tensor):
                rule = self.op.grads[position] if position < len(self.op.grads) else None
                g = rule(grad, *self.args, self.out) if rule and arg.requires_grad else None
                # an input narrower than the op's type (float16 in float16 + float32) gets its gradient
                # in its own type, as torch's autograd engine casts it
                grads.append(g if g is None or g.dtype is arg.dtype else cast(g, arg.dtype))
        return tuple(grads)


def _map(op, *args):
    """Promote dtypes, check devices, broadcast shapes, then run op elementwise."""
    # All of that follows from the operands' shapes, dtypes, devices and scalar types, not their
    # values: it is worked out once per such signature (a _Plan) and reused by every later call.
    # The strides too, so that a plan keeps its backend's runner for the operands' layout (_Plan.run).
    key = plan_key([op], args)
    plan = _plans.get(key) or _plans.keep(key, _Plan(_on_bools(op, args), args))
    op = plan.op
    if plan.convert:
        args = plan.converted(op, args)
    # A node only where a gradient can flow (a floating result) and the call records one.
    if plan.floating and records(args):
        return Map.apply(op, plan, *args)
    return plan.run(op, args)


class _Plan:
    """_map's checks, dtype promotion and broadcasting for one signature of operands."""
    __slots__ = ("op", "compute", "out_dtype", "floating", "shape", "strides", "device", "convert", "runner")

    def __init__(self, op, args, shape=None):
        """shape: the result's where given (an in-place write's, its target's), else the operands' broadcast."""
        from .movement import broadcast_shapes
        self.op = op
        tensors = [a for a in args if isinstance(a, Tensor)]
        if not tensors:
            raise TypeError(f"{op.name} needs at least one Tensor argument")
        devices = {t.device for t in tensors}
        if len(devices) > 1:
            raise RuntimeError(f"{op.name}: expected all tensors to be on the same device, "
                               f"but found at least two devices, {' and '.join(sorted(devices))}")
        kinds = op.arg_kinds or (None,) * len(args)
        if kinds[0] == _BOOL and not isinstance(args[0], Tensor):
            raise TypeError(f"{op.name}: the condition must be a bool tensor, not {type(args[0]).__name__}")
        plain = [_python_scalar(a, op) for a in args]
        self.compute, self.out_dtype = _result_dtypes(op, [a for a, k in zip(plain, kinds) if k is None])
        if op.integral and self.compute.is_floating_point:
            raise NotImplementedError(f"{op.name} is not implemented for {self.compute.name}: integer and bool "
                                      f"operands only")
        self.floating = self.out_dtype.is_floating_point
        self.shape = Size(broadcast_shapes(*[t.shape for t in tensors], *(() if shape is None else (shape,))))
        self.strides = contiguous_strides(self.shape)   # the result's
        self.device = tensors[0].device
        # whether converted() changes any operand of this signature
        self.convert = any(
            a.shape != self.shape or (kind == _BOOL and a.dtype is not dtypes.bool_) if isinstance(a, Tensor)
            else not isinstance(a, (bool, int, float)) or (type(a) is int and not self.compute.is_floating_point)
            for a, kind in zip(args, kinds))
        self.runner = None   # (the backend, its map_runner for this signature), made by the first run

    def run(self, op, args, into=None):
        """The kernel over args (as converted() gives them): the result, a new Tensor; or, given `into`
        (a tensor of the result's shape and dtype, laid out alike at every call of this plan), into it."""
        if _autograd._unpacking is not None:   # a backward rule reads them: as saved? (Tensor._view's check)
            for a in args:
                if isinstance(a, Tensor):
                    _autograd.check_saved(a)
        storages, offsets, scalars = ([], [], []) if into is None else ([into._storage], [into._offset], [])
        for a in args:
            if isinstance(a, Tensor):
                storages.append(a._storage)
                offsets.append(a._offset)
            else:
                scalars.append(a)
        backend = get_backend(self.device)
        if self.runner is None or self.runner[0] is not backend:   # (a device replaced: tests do)
            self.runner = backend, backend.map_runner(op, [a._view if isinstance(a, Tensor) else a for a in args],
                                                      self.shape, self.compute, self.out_dtype,
                                                      None if into is None else into._view)
        result = self.runner[1](storages, offsets, scalars)
        return into if into is not None else Tensor(result, self.shape, self.out_dtype, self.device, self.strides)

    def converted(self, op, args):
        """The operands as the kernel takes them: Python scalars, wrapped to int32 for an integer
        op, tensors broadcast to the result's shape, where's condition as bool."""
        from .movement import expand
        args = tuple(_python_scalar(a, op) for a in args)
        if not self.compute.is_floating_point:   # an int operand wraps to int32 as in torch (on both devices)
            args = tuple((a + 2**31) % 2**32 - 2**31 if type(a) is int else a for a in args)
        args = tuple(expand(a, self.shape) if isinstance(a, Tensor) and a.shape != self.shape else a for a in args)
        if op.arg_kinds and op.arg_kinds[0] == _BOOL and args[0].dtype is not dtypes.bool_:
            args = (cast(args[0], dtypes.bool_),) + args[1:]
        return args


_plans = Plans()   # _map's plan_key -> _Plan


def _python_scalar(a, op):
    """Tensors pass; numbers (NumPy scalars too) become Python bool/int/float operands."""
    if isinstance(a, (Tensor, bool, int, float)):
        return a
    if isinstance(a, numbers.Number) and not isinstance(a, complex):
        return a.item() if hasattr(a, "item") else float(a)
    raise TypeError(f"{op.name}: unsupported operand type {type(a).__name__}")


def _on_bools(op, args):
    """The op torch runs for op on these operands (op.bools): op, or its bool form where every operand
    is bool (a tensor's dtype or a Python bool); or torch's refusal of a bool tensor operand."""
    if isinstance(op.bools, str) and any(isinstance(a, Tensor) and a.dtype is dtypes.bool_ for a in args):
        raise RuntimeError(op.bools)
    if isinstance(op.bools, MapOp) and all(a.dtype is dtypes.bool_ if isinstance(a, Tensor) else
                                           isinstance(_python_scalar(a, op), bool) for a in args):
        return op.bools
    return op


def _result_dtypes(op, args):
    """(the dtype op computes in, its result's), by torch's promotion: a Python scalar promotes the
    tensors' dtype where its kind is higher (a float: float32; an int with bools: int32). Arithmetic on
    bytes and bools computes in int32; on bytes its results wrap back to uint8, as in torch; an op
    that keeps bools bool (op.bools True) computes in bool."""
    tensor_dtypes = [a.dtype for a in args if isinstance(a, Tensor)]
    dtype = tensor_dtypes[0] if tensor_dtypes else dtypes.float32
    for d in tensor_dtypes[1:]:
        dtype = dtypes.promote(dtype, d)
    if not dtype.is_floating_point and any(isinstance(a, float) for a in args):
        dtype = dtypes.float32
    elif dtype is dtypes.bool_ and any(type(a) is int for a in args):
        dtype = dtypes.int32
    if op.floating and not dtype.is_floating_point:
        dtype = dtypes.float32
    if op.out:
        return dtype, dtypes.as_dtype(op.out)
    if op is IDENTITY or (dtype is dtypes.bool_ and op.bools is True):
        return dtype, dtype
    if dtype in (dtypes.bool_, dtypes.uint8):
        return dtypes.int32, dtype if dtype is dtypes.uint8 else dtypes.int32
    return dtype, dtype


# ---- the public functions (PyTorch names) ----
def add(a, b): return _map(ADD, a, b)
def sub(a, b): return _map(SUB, a, b)
def mul(a, b): return _map(MUL, a, b)
def div(a, b): return _map(DIV, a, b)
@autocast_op
def pow(a, b): return _map(POW, a, b)
def maximum(a, b): return _map(MAXIMUM, a, b)
def minimum(a, b): return _map(MINIMUM, a, b)
def neg(x): return _map(NEG, x)
@autocast_op
def exp(x): return _map(EXP, x)
@autocast_op
def log(x): return _map(LOG, x)
def sqrt(x): return _map(SQRT, x)
def abs(x): return _map(ABS, x)
@tensor_method
def sign(x): return _map(SIGN, x)
def relu(x): return _map(RELU, x)
def leaky_relu(x, negative_slope=0.01): return _map(LEAKY_RELU, x, float(negative_slope))
def tanh(x): return _map(TANH, x)
def sigmoid(x): return _map(SIGMOID, x)
def gelu(x): return _map(GELU, x)
def eq(a, b): return _map(EQ, a, b)
def ne(a, b): return _map(NE, a, b)
def lt(a, b): return _map(LT, a, b)
def le(a, b): return _map(LE, a, b)
def gt(a, b): return _map(GT, a, b)
def ge(a, b): return _map(GE, a, b)
def logical_and(a, b): return _map(LOGICAL_AND, a, b)
def logical_or(a, b): return _map(LOGICAL_OR, a, b)
def logical_xor(a, b): return _map(LOGICAL_XOR, a, b)
def logical_not(x): return _map(LOGICAL_NOT, x)
def bitwise_and(a, b): return _map(BITWISE_AND, a, b)
def bitwise_or(a, b): return _map(BITWISE_OR, a, b)
def bitwise_xor(a, b): return _map(BITWISE_XOR, a, b)
def bitwise_not(x): return _map(BITWISE_NOT, x)
def clone(x): return _map(IDENTITY, x)


def where(condition, input=None, other=None):
    """input where condition holds, else other; where(condition) alone is nonzero(condition, as_tuple=True)."""
    if input is None and other is None:
        from .selection import nonzero
        return nonzero(condition, as_tuple=True)
    if input is None or other is None:
        raise TypeError("where() takes a condition alone, or a condition, input and other")
    if isinstance(condition, Tensor) and condition.dtype is not dtypes.bool_:
        raise RuntimeError(f"where expected condition to be a boolean tensor, but got a tensor with dtype "
                           f"{condition.dtype.name}")
    return _map(WHERE, condition, input, other)


Tensor.where = lambda self, condition, other: where(condition, self, other)


def clamp(x, min=None, max=None):
    """Bounds are numbers or tensors (broadcast with x); a missing one is the dtype's end."""
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    if not x.dtype.is_floating_point and any(isinstance(v, float) or isinstance(v, Tensor) and
                                             v.dtype.is_floating_point for v in (min, max)):
        x = x.float()
    lo, hi = (-math.inf, math.inf) if x.dtype.is_floating_point else (-2**31, 2**31 - 1)
    return _map(CLAMP, x, lo if min is None else min, hi if max is None else max)


def cast(x, dtype):
    if dtype is x.dtype:
        return x
    if x.requires_grad and not dtype.is_floating_point:
        x = x.detach()
    return _Cast.apply(x, dtype)


class _Cast(Function):
    def forward(self, x, dtype):
        self.in_dtype = x.dtype
        storage = x.backend.map(cast_op(dtype), (x._view,), x.shape, x.dtype, dtype)
        return Tensor(storage, x.shape, dtype, x.device)

    def backward(self, grad):
        return cast(grad, self.in_dtype)
