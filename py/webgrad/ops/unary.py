"""Elementwise maths beyond the arithmetic of ops/elementwise.py: logarithms and exponentials,
trigonometric and hyperbolic functions, roots, rounding, erf, NaN/Inf tests (and logit, deg2rad,
rad2deg composed of them). Each op is one MapOp (its WGSL expression, its NumPy twin, its
gradient) run by shaders/map.wgsl, and a Tensor method of the same name.

Where a WGSL builtin loses precision (log2/log10/log1p near 1, expm1 and erf near 0, asin/atan
anywhere) the expression goes through map.wgsl's accurate log_f / tanh_f or a Cephes polynomial.
"""
import math

from ..amp import autocast_op
from ..backends.base import wgsl_is_nan
from .._tensor import Tensor, tensor_method
from .elementwise import _BOOL, MapOp, _map, exp, log, sign, where, zero_gradient

_LN2, _LN10 = math.log(2.0), math.log(10.0)


def _series(z, coefficients):
    """WGSL Horner form of c0 + c1 z + c2 z^2 + ... ."""
    text = repr(coefficients[-1])
    for c in reversed(coefficients[:-1]):
        text = f"({c!r} + {z} * {text})"
    return text


def wgsl_log1p(x):
    """log(1 + x) for a WGSL expression x: near 0 (|x| < 0.4) 2 atanh(s), s = x / (2 + x), as its odd
    series, so no precision is lost in forming 1 + x; elsewhere log_f(1 + x)."""
    s = f"({x} / (2.0 + {x}))"
    series = _series(f"({s} * {s})", [1.0] + [1.0 / k for k in range(3, 15, 2)])
    return f"select(log_f(1.0 + {x}), 2.0 * {s} * {series}, abs({x}) < 0.4)"


def wgsl_expm1(x):
    """exp(x) - 1 for a WGSL expression x: for |x| < 1, 2t / (1 - t) with t = tanh(x / 2) (tanh_f is
    accurate near 0), so the small result keeps its relative precision."""
    t = f"tanh_f(0.5 * {x})"
    return f"select(exp({x}) - 1.0, 2.0 * {t} / (1.0 - {t}), abs({x}) < 1.0)"


# Cephes' single-precision polynomials (asinf, atanf, erff): WGSL lets asin/atan be off by
# thousands of ulp (lavapipe: 4e-4 relative), and A&S's erf_f keeps no relative precision near 0.
_ASIN_P = [1.6666752422e-1, 7.4953002686e-2, 4.5470025998e-2, 2.4181311049e-2, 4.2163199048e-2]
_ATAN_P = [-3.33329491539e-1, 1.99777106478e-1, -1.38776856032e-1, 8.05374449538e-2]
_ERF_P = [1.128379165726710, -3.761262582423300e-1, 1.128358514861418e-1, -2.685381193529856e-2,
          5.188327685732524e-3, -8.010193625184903e-4, 7.853861353153693e-5]
_HALF_PI = math.pi / 2


def _odd(w, z, coefficients):
    """w + w z P(z), Cephes' odd polynomial form."""
    return f"({w} + {w} * {z} * {_series(z, coefficients)})"


def wgsl_asin(x):
    """asin for |x| <= 1/2 directly; above, pi/2 - 2 asin(sqrt((1 - |x|) / 2))."""
    big = f"(abs({x}) > 0.5)"
    z = f"select({x} * {x}, 0.5 * (1.0 - abs({x})), {big})"
    w = f"select(abs({x}), sqrt({z}), {big})"
    r = f"select({_odd(w, z, _ASIN_P)}, {_HALF_PI!r} - 2.0 * {_odd(w, z, _ASIN_P)}, {big})"
    return f"select({r}, -{r}, {x} < 0.0)"


def wgsl_atan(x):
    """atan of |x| reduced to [0, tan(pi/8)] by atan(x) = pi/2 - atan(1/x) and pi/4 + atan((x-1)/(x+1))."""
    ax = f"abs({x})"
    w = f"select(select({ax}, ({ax} - 1.0) / ({ax} + 1.0), {ax} > 0.41421356), -1.0 / {ax}, {ax} > 2.41421356)"
    base = f"select(select(0.0, {math.pi / 4!r}, {ax} > 0.41421356), {_HALF_PI!r}, {ax} > 2.41421356)"
    r = f"({base} + {_odd(w, f'({w} * {w})', _ATAN_P)})"
    return f"select({r}, -{r}, {x} < 0.0)"


def wgsl_erf(x):
    return f"select(erf_f({x}), {x} * {_series(f'({x} * {x})', _ERF_P)}, abs({x}) < 1.0)"


def _np_erf(np, a):
    from .elementwise import _erf
    return np.where(np.abs(a) < 1, a * np.polynomial.polynomial.polyval(a * a, _ERF_P), _erf(np, a)).astype(a.dtype)


LOG2 = MapOp("log2", f"log_f(a) * {1 / _LN2!r}", lambda np, a: np.log2(a), (lambda g, a, o: g / (a * _LN2),),
             floating=True)
LOG10 = MapOp("log10", f"log_f(a) * {1 / _LN10!r}", lambda np, a: np.log10(a),
              (lambda g, a, o: g / (a * _LN10),), floating=True)
LOG1P = MapOp("log1p", wgsl_log1p("a"), lambda np, a: np.log1p(a), (lambda g, a, o: g / (a + 1.0),), floating=True)
EXPM1 = MapOp("expm1", wgsl_expm1("a"), lambda np, a: np.expm1(a), (lambda g, a, o: g * (o + 1.0),), floating=True)
SIN = MapOp("sin", "sin(a)", lambda np, a: np.sin(a), (lambda g, a, o: g * cos(a),), floating=True)
COS = MapOp("cos", "cos(a)", lambda np, a: np.cos(a), (lambda g, a, o: -g * sin(a),), floating=True)
TAN = MapOp("tan", "tan(a)", lambda np, a: np.tan(a), (lambda g, a, o: g * (o * o + 1.0),), floating=True)
ASIN = MapOp("asin", wgsl_asin("a"), lambda np, a: np.arcsin(a), (lambda g, a, o: g * rsqrt(1.0 - a * a),),
             floating=True)
ACOS = MapOp("acos", f"{_HALF_PI!r} - {wgsl_asin('a')}", lambda np, a: np.arccos(a),
             (lambda g, a, o: -g * rsqrt(1.0 - a * a),), floating=True)
ATAN = MapOp("atan", wgsl_atan("a"), lambda np, a: np.arctan(a), (lambda g, a, o: g / (a * a + 1.0),), floating=True)
RSQRT = MapOp("rsqrt", "inverseSqrt(a)", lambda np, a: 1 / np.sqrt(a), (lambda g, a, o: g * o * o * o * -0.5,),
              floating=True)
RECIPROCAL = MapOp("reciprocal", "1.0 / a", lambda np, a: 1 / a, (lambda g, a, o: -g * o * o,), floating=True)
SQUARE = MapOp("square", "a * a", lambda np, a: a * a, (lambda g, a, o: g * a * 2.0,))
FLOOR = MapOp("floor", "floor(a)", lambda np, a: np.floor(a), (zero_gradient,))
CEIL = MapOp("ceil", "ceil(a)", lambda np, a: np.ceil(a), (zero_gradient,))
ROUND = MapOp("round", "round(a)", lambda np, a: np.round(a), (zero_gradient,))   # halves to even, as in PyTorch
TRUNC = MapOp("trunc", "trunc(a)", lambda np, a: np.trunc(a), (zero_gradient,))
FRAC = MapOp("frac", "a - trunc(a)", lambda np, a: a - np.trunc(a), (lambda g, a, o: g,))
ERF = MapOp("erf", wgsl_erf("a"), _np_erf, (lambda g, a, o: g * exp(-a * a) * (2 / math.sqrt(math.pi)),),
            floating=True)
EXP2 = MapOp("exp2", "exp2(a)", lambda np, a: np.exp2(a), (lambda g, a, o: g * o * _LN2,), floating=True)
# e^a / 2 as e^(a - ln 2), finite up to sinh's and cosh's own overflow (e^89 is past float32's range);
# sinh near 0 from expm1 (u = e^a - 1: sinh = u (u + 2) / 2 (u + 1)), so no digits cancel
_HALF_EXP = f"exp(a - {_LN2!r})", f"exp(-a - {_LN2!r})"
SINH = MapOp("sinh", f"select({_HALF_EXP[0]} - {_HALF_EXP[1]}, 0.5 * {wgsl_expm1('a')} * ({wgsl_expm1('a')} + 2.0) / "
                     f"({wgsl_expm1('a')} + 1.0), abs(a) < 1.0)",
             lambda np, a: np.sinh(a), (lambda g, a, o: g * cosh(a),), floating=True)
COSH = MapOp("cosh", f"{_HALF_EXP[0]} + {_HALF_EXP[1]}", lambda np, a: np.cosh(a), (lambda g, a, o: g * sinh(a),),
             floating=True)
# the inverse hyperbolics through log1p where their argument nears 0 (asinh, atanh) and as
# log(2|a|) where squaring |a| would overflow
_T = "abs(a)"
_ASINH_OF_ABS = wgsl_log1p(f"({_T} + {_T} * {_T} / (1.0 + sqrt(1.0 + {_T} * {_T})))")
ASINH = MapOp("asinh", f"select(1.0, -1.0, a < 0.0) * select({_ASINH_OF_ABS}, log_f({_T}) + {_LN2!r}, {_T} > 1e4)",
              lambda np, a: np.arcsinh(a), (lambda g, a, o: g * rsqrt(a * a + 1.0),), floating=True)
ACOSH = MapOp("acosh", f"select(log_f(a + sqrt(a * a - 1.0)), log_f(a) + {_LN2!r}, a > 1e4)",
              lambda np, a: np.arccosh(a), (lambda g, a, o: g * rsqrt(a * a - 1.0),), floating=True)
ATANH = MapOp("atanh", f"0.5 * {wgsl_log1p('(2.0 * a / (1.0 - a))')}", lambda np, a: np.arctanh(a),
              (lambda g, a, o: g / (1.0 - a * a),), floating=True)
ISNAN = MapOp("isnan", f"select(0u, 1u, {wgsl_is_nan('a')})", lambda np, a: a != a, out=_BOOL)
# |a| == inf, by its bits as for NaN (false for integer T)
ISINF = MapOp("isinf", "select(0u, 1u, T(0.5) != T(0) && (bitcast<u32>(a) & 0x7fffffffu) == 0x7f800000u)",
              lambda np, a: np.isinf(a), out=_BOOL)


@tensor_method
@autocast_op
def log2(x): return _map(LOG2, x)
@tensor_method
@autocast_op
def log10(x): return _map(LOG10, x)
@tensor_method
@autocast_op
def log1p(x): return _map(LOG1P, x)
@tensor_method
@autocast_op
def expm1(x): return _map(EXPM1, x)
@tensor_method
def sin(x): return _map(SIN, x)
@tensor_method
def cos(x): return _map(COS, x)
@tensor_method
@autocast_op
def tan(x): return _map(TAN, x)
@tensor_method
@autocast_op
def asin(x): return _map(ASIN, x)
@tensor_method
@autocast_op
def acos(x): return _map(ACOS, x)
@tensor_method
def atan(x): return _map(ATAN, x)
@tensor_method
@autocast_op
def rsqrt(x): return _map(RSQRT, x)
@tensor_method
@autocast_op
def reciprocal(x): return _map(RECIPROCAL, x)
@tensor_method
def square(x): return _map(SQUARE, x)
@tensor_method
def erf(x): return _map(ERF, x)
@tensor_method
def exp2(x): return _map(EXP2, x)
@tensor_method
@autocast_op
def sinh(x): return _map(SINH, x)
@tensor_method
@autocast_op
def cosh(x): return _map(COSH, x)
@tensor_method
def asinh(x): return _map(ASINH, x)
@tensor_method
def acosh(x): return _map(ACOSH, x)
@tensor_method
def atanh(x): return _map(ATANH, x)
@tensor_method
def isnan(x): return _map(ISNAN, x)
@tensor_method
def isinf(x): return _map(ISINF, x)


@tensor_method
def isfinite(x):
    return ~(isnan(x) | isinf(x))


# the rounding ops keep an integer tensor as it is (a copy), as in PyTorch
@tensor_method
def floor(x): return _map(FLOOR, x) if x.dtype.is_floating_point else x.clone()
@tensor_method
def ceil(x): return _map(CEIL, x) if x.dtype.is_floating_point else x.clone()
@tensor_method
def trunc(x): return _map(TRUNC, x) if x.dtype.is_floating_point else x.clone()
@tensor_method
def frac(x):
    if not x.dtype.is_floating_point:
        raise NotImplementedError(f"frac is not implemented for {x.dtype.name} tensors")
    return _map(FRAC, x)


@tensor_method
def round(x, decimals=0):
    """Halves to even; with decimals, round(x * 10^d) / 10^d as PyTorch computes it."""
    if not x.dtype.is_floating_point:
        if decimals:
            raise NotImplementedError(f"round with decimals is not implemented for {x.dtype.name} tensors")
        return x.clone()
    if not decimals:
        return _map(ROUND, x)
    scale = 10.0 ** decimals
    return _map(ROUND, x * scale) / scale


def nan_to_num(x, nan=0.0, posinf=None, neginf=None):
    """NaN, +inf and -inf replaced (by default: 0 and float32's largest and lowest values)."""
    if not x.dtype.is_floating_point:
        return x.clone()
    big = 3.4028234663852886e38
    out = where(isnan(x), nan, x)
    out = where(out == math.inf, big if posinf is None else posinf, out)
    return where(out == -math.inf, -big if neginf is None else neginf, out)


tensor_method(nan_to_num)


@tensor_method
def isclose(x, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|x - other| <= atol + rtol |other| elementwise (PyTorch's rule: infinities are close only to
    themselves, NaN to NaN only with equal_nan)."""
    error = (x - other).abs()
    close = (x == other) | (isfinite(error) & (error <= atol + rtol * abs(other)))
    return close | (isnan(x) & isnan(other)) if equal_nan else close


@tensor_method
def allclose(x, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether every element is close (a Python bool: the answer is read back from the device)."""
    return bool(isclose(x, other, rtol, atol, equal_nan).all().item())


@tensor_method
def logit(x, eps=None):
    """log(x / (1 - x)), x first clamped to [eps, 1 - eps] where eps is given."""
    z = x if eps is None else x.clamp(eps, 1.0 - eps)
    return log(z) - log1p(-z)


@tensor_method
def deg2rad(x): return x * (math.pi / 180.0)
@tensor_method
def rad2deg(x): return x * (180.0 / math.pi)


sgn = Tensor.sgn = sign   # for real tensors, torch's sgn is sign
arcsinh, arccosh, arctanh = Tensor.arcsinh, Tensor.arccosh, Tensor.arctanh = asinh, acosh, atanh
