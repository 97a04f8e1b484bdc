"""Activation functions as single elementwise kernels (MapOps run by shaders/map.wgsl), each with its
gradient as one kernel too: silu, softplus, elu, logsigmoid and GELU's tanh approximation.
nn.functional gives them PyTorch's names and signatures."""
import math

from ..amp import autocast_op
from .elementwise import MapOp, _map, _sigmoid as _np_sigmoid
from .unary import wgsl_expm1, wgsl_log1p

_GELU_K = math.sqrt(2 / math.pi)
_GELU_C = 0.044715


def _np_softplus(np, a, beta, threshold):
    return np.where(a * beta > threshold, a, np.log1p(np.exp(np.minimum(a * beta, threshold))) / beta)


def _times_sigmoid(x, z):
    """WGSL x * sigmoid(z) for x < 0 where z may be far below 0: there exp(z) is subnormal, which GPUs
    flush to 0, while x * sigmoid(z) is not yet; exp(z + log(-x)) keeps it."""
    return f"select({x} * sigmoid_f({z}), -exp({z} + log(-{x})) / (1.0 + exp({z})), {z} < -20.0 && {x} < 0.0)"


SILU_GRAD = MapOp("silu_grad", "sigmoid_f(a) * (1.0 + a * (1.0 - sigmoid_f(a)))",
                  lambda np, a: _np_sigmoid(np, a) * (1 + a * (1 - _np_sigmoid(np, a))), floating=True)
SILU = MapOp("silu", _times_sigmoid("a", "a"), lambda np, a: a * _np_sigmoid(np, a),
             (lambda g, a, o: g * _map(SILU_GRAD, a),), floating=True)

# b: beta, c: threshold; above it the input itself, as in PyTorch
SOFTPLUS_GRAD = MapOp("softplus_grad", "select(sigmoid_f(a * b), 1.0, a * b > c)",
                      lambda np, a, beta, threshold: np.where(a * beta > threshold, 1.0, _np_sigmoid(np, a * beta)),
                      floating=True)
SOFTPLUS = MapOp("softplus", f"select({wgsl_log1p('exp(a * b)')} / b, a, a * b > c)", _np_softplus,
                 (lambda g, a, beta, threshold, o: g * _map(SOFTPLUS_GRAD, a, beta, threshold), None, None),
                 floating=True)

# b: alpha. The backward takes (grad, x, alpha) and recomputes exp(x) rather than reading the output.
ELU_BACKWARD = MapOp("elu_backward", "select(a * c * exp(b), a, b > 0.0)",
                     lambda np, g, x, alpha: np.where(x > 0, g, g * alpha * np.exp(np.minimum(x, 0))), floating=True)
ELU = MapOp("elu", f"select(b * {wgsl_expm1('a')}, a, a > 0.0)",
            lambda np, a, alpha: np.where(a > 0, a, alpha * np.expm1(np.minimum(a, 0))),
            (lambda g, a, alpha, o: _map(ELU_BACKWARD, g, a, alpha), None), floating=True)

# log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)): no overflow either side
SIGMOID_OF_NEG = MapOp("sigmoid_of_neg", "sigmoid_f(-a)", lambda np, a: _np_sigmoid(np, -a), floating=True)
LOGSIGMOID = MapOp("logsigmoid", f"min(a, 0.0) - {wgsl_log1p('exp(-abs(a))')}",
                   lambda np, a: np.minimum(a, 0) - np.log1p(np.exp(-np.abs(a))),
                   (lambda g, a, o: g * _map(SIGMOID_OF_NEG, a),), floating=True)

# GELU's tanh approximation: 0.5 x (1 + tanh(u)) = x sigmoid(2u), u = k (x + c x^3), k = sqrt(2 / pi)
# (the sigmoid form keeps its precision where tanh(u) nears -1)
_TWO_U = f"{2 * _GELU_K!r} * (a + {_GELU_C!r} * a * a * a)"


def _np_two_u(a):
    return 2 * _GELU_K * (a + _GELU_C * a * a * a)


GELU_TANH_GRAD = MapOp(
    "gelu_tanh_grad",
    f"sigmoid_f({_TWO_U}) * (1.0 + a * (1.0 - sigmoid_f({_TWO_U})) * {2 * _GELU_K!r} * "
    f"(1.0 + {3 * _GELU_C!r} * a * a))",
    lambda np, a: _np_sigmoid(np, _np_two_u(a)) * (1 + a * (1 - _np_sigmoid(np, _np_two_u(a))) * 2 * _GELU_K *
                                                   (1 + 3 * _GELU_C * a * a)), floating=True)
GELU_TANH = MapOp("gelu_tanh", _times_sigmoid("a", f"({_TWO_U})"), lambda np, a: a * _np_sigmoid(np, _np_two_u(a)),
                  (lambda g, a, o: g * _map(GELU_TANH_GRAD, a),), floating=True)


def silu(x):
    return _map(SILU, x)


@autocast_op
def softplus(x, beta=1.0, threshold=20.0):
    return _map(SOFTPLUS, x, float(beta), float(threshold))


def elu(x, alpha=1.0):
    return _map(ELU, x, float(alpha))


def logsigmoid(x):
    return _map(LOGSIGMOID, x)


def gelu_tanh(x):
    return _map(GELU_TANH, x)
