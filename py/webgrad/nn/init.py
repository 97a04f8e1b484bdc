"""In-place parameter initialisation, with PyTorch's names, signatures and formulas.

Values are drawn on the tensor's own device from webgrad's seeded generator (webgrad.manual_seed;
a `generator=` argument is not supported) and copied in through the tensor's view, so the tensor
object (and an optimizer's reference to it) stays.
"""
import math
import warnings

from ..autograd import no_grad
from ..ops.creation import arange, full_like, rand, randn, zeros
from ..ops.elementwise import where
from ..ops.movement import write_into


def _copy_(tensor, make_values):
    with no_grad():
        write_into(tensor, make_values())
    return tensor


def _no_generator(generator):
    if generator is not None:
        raise NotImplementedError("nn.init: generator= is not supported; webgrad draws from its global seeded "
                                  "generator (webgrad.manual_seed)")


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    _no_generator(generator)
    return _copy_(tensor, lambda: rand(tensor.shape, dtype=tensor.dtype, device=tensor.device) * (b - a) + a)


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    _no_generator(generator)
    return _copy_(tensor, lambda: randn(tensor.shape, dtype=tensor.dtype, device=tensor.device) * std + mean)


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Normal(mean, std) restricted to [a, b] (absolute bounds, not in units of std), drawn as
    PyTorch draws it: a uniform draw between the bounds' CDF values through the inverse CDF."""
    _no_generator(generator)
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The distribution of values "
                      "may be incorrect.", stacklevel=2)

    def cdf(x):
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0

    low, high = 2 * cdf((a - mean) / std) - 1, 2 * cdf((b - mean) / std) - 1
    return _copy_(tensor, lambda: (_erfinv(rand(tensor.shape, dtype=tensor.dtype, device=tensor.device)
                                           * (high - low) + low) * (std * math.sqrt(2.0)) + mean).clamp(a, b))


def _erfinv(x):
    """The inverse error function on (-1, 1), composed of tensor ops: M. Giles' single-precision
    polynomials ("Approximating the erfinv function", 2010), one for the centre, one for the tails."""
    w = -((1.0 - x) * (1.0 + x)).log()
    centre, tail = w - 2.5, w.sqrt() - 3.0
    p = 2.81022636e-08
    for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503, -0.00417768164,
              0.246640727, 1.50140941):
        p = c + p * centre
    q = -0.000200214257
    for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613, 0.00943887047,
              1.00167406, 2.83297682):
        q = c + q * tail
    return where(w < 5.0, p, q) * x


def constant_(tensor, val):
    return _copy_(tensor, lambda: full_like(tensor, val))


def zeros_(tensor):
    return constant_(tensor, 0.0)


def ones_(tensor):
    return constant_(tensor, 1.0)


def eye_(tensor):
    """The identity matrix, on a 2-D tensor (ones on the diagonal of a non-square one)."""
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    return _copy_(tensor, lambda: (arange(rows, device=tensor.device).reshape(rows, 1)
                                   == arange(cols, device=tensor.device)).to(tensor.dtype))


def calculate_gain(nonlinearity, param=None):
    if nonlinearity in ("linear", "identity", "sigmoid", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                        "conv_transpose2d", "conv_transpose3d"):
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor):
    if tensor.ndim < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of ['fan_in', 'fan_out']")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _kaiming_std(tensor, a, mode, nonlinearity):
    return calculate_gain(nonlinearity, a) / math.sqrt(_calculate_correct_fan(tensor, mode))


def _is_empty(tensor):
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return True
    return False


def kaiming_uniform_(tensor, a=0.0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """U(-bound, bound) with bound = gain * sqrt(3 / fan) (He et al., 2015)."""
    if _is_empty(tensor):
        return tensor
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0.0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """N(0, std^2) with std = gain / sqrt(fan) (He et al., 2015)."""
    if _is_empty(tensor):
        return tensor
    return normal_(tensor, 0.0, _kaiming_std(tensor, a, mode, nonlinearity), generator)


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """U(-bound, bound) with bound = gain * sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio, 2010)."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    """N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out)) (Glorot & Bengio, 2010)."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)), generator)


def orthogonal_(tensor, gain=1, generator=None):
    """A (semi-)orthogonal matrix (Saxe et al., 2013), the tensor's trailing dims flattened: the Q
    of a standard normal matrix's QR decomposition with R's diagonal positive, as PyTorch makes it.
    There is no QR op: the columns are orthonormalised in turn (Gram-Schmidt, each column twice
    for float32 accuracy), on the tensor's device."""
    _no_generator(generator)
    if tensor.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows

    def values():
        a = randn(rows, cols, dtype=tensor.dtype, device=tensor.device)
        q = _orthonormal_columns(a.T if rows < cols else a)
        return ((q.T if rows < cols else q) * gain).reshape(tensor.shape)

    return _copy_(tensor, values)


def _orthonormal_columns(a):
    """Q of a = QR (a tall or square), R with a positive diagonal: the columns still to come are
    zero in q, so projecting on all of q projects on the columns made so far."""
    n, k = a.shape
    q = zeros(n, k, dtype=a.dtype, device=a.device)
    for j in range(k):
        v = a[:, j:j + 1]
        for _ in range(2):
            v = v - q @ (q.T @ v)
        write_into(q[:, j:j + 1], v * ((v * v).sum() ** -0.5))
    return q
