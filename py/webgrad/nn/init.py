"""In-place parameter initialisation, with PyTorch's names and formulas.

Values are drawn on the tensor's own device from webgrad's seeded generator and copied in
through the tensor's view, so the tensor object (and an optimizer's reference to it) stays.
"""
import math

from ..autograd import no_grad
from ..ops.creation import full_like, rand, randn
from ..ops.movement import write_into


def _copy_(tensor, make_values):
    with no_grad():
        write_into(tensor, make_values())
    return tensor


def uniform_(tensor, a=0.0, b=1.0):
    return _copy_(tensor, lambda: rand(tensor.shape, dtype=tensor.dtype, device=tensor.device) * (b - a) + a)


def normal_(tensor, mean=0.0, std=1.0):
    return _copy_(tensor, lambda: randn(tensor.shape, dtype=tensor.dtype, device=tensor.device) * std + mean)


def constant_(tensor, val):
    return _copy_(tensor, lambda: full_like(tensor, val))


def zeros_(tensor):
    return constant_(tensor, 0.0)


def ones_(tensor):
    return constant_(tensor, 1.0)


def calculate_gain(nonlinearity, param=None):
    if nonlinearity in ("linear", "identity", "sigmoid", "conv1d", "conv2d", "conv3d"):
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor):
    if tensor.ndim < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def kaiming_uniform_(tensor, a=0.0, mode="fan_in", nonlinearity="leaky_relu"):
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = calculate_gain(nonlinearity, a) * math.sqrt(3.0 / (fan_in if mode == "fan_in" else fan_out))
    return uniform_(tensor, -bound, bound)


def xavier_uniform_(tensor, gain=1.0):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(tensor, -bound, bound)
