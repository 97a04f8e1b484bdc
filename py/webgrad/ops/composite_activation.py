"""Activations composed of existing tensor ops (each op has its kernel and gradient, so these run on
the input's device with gradients): selu, hardsigmoid, hardswish, softsign, tanhshrink, glu, softmin
and prelu, with torch.nn.functional's names and signatures."""
from ..amp import autocast_op
from .activation import elu
from .elementwise import where
from .loss import softmax

# SELU's constants (Klambauer et al.), as PyTorch has them
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def selu(input, inplace=False):
    return elu(input, SELU_ALPHA) * SELU_SCALE


def hardsigmoid(input, inplace=False):
    """relu6(x + 3) / 6: 0 below -3, 1 above 3, linear between."""
    return (input / 6.0 + 0.5).clamp(0.0, 1.0)


def hardswish(input, inplace=False):
    return input * hardsigmoid(input)


def softsign(input):
    return input / (input.abs() + 1.0)


def tanhshrink(input):
    return input - input.tanh()


def glu(input, dim=-1):
    """a * sigmoid(b), where a and b are the first and second halves of input along dim."""
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    size = input.shape[dim]
    if size % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {dim % input.ndim} is size {size}")
    first, second = input.split(size // 2, dim)
    return first * second.sigmoid()


def softmin(input, dim, dtype=None):
    if dtype is not None:
        input = input.to(dtype)
    return softmax(-input, dim)


@autocast_op
def prelu(input, weight):
    """x where x > 0, else weight * x; weight holds 1 value or one per channel (dim 1)."""
    if weight.ndim > 1:
        raise RuntimeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: ndim = {weight.ndim}")
    channels = input.shape[1] if input.ndim >= 2 else 1
    count = weight.numel()
    if count != 1 and count != channels:
        raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found parameter numbers = "
                           f"{count} and channel size = {channels}.")
    shape = [1] * input.ndim
    if input.ndim >= 2:
        shape[1] = count
    return where(input > 0, input, weight.reshape(shape) * input)


def celu(input, alpha=1.0, inplace=False):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1)), which is alpha * elu(x / alpha)."""
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError")
    return elu(input / alpha) * alpha


def hardshrink(input, lambd=0.5):
    return where(input.abs() > lambd, input, 0.0)


def softshrink(input, lambd=0.5):
    """x - lambd above lambd, x + lambd below -lambd, 0 between."""
    if lambd < 0:
        raise RuntimeError(f"lambda must be greater or equal to 0, but found to be {lambd}.")
    return input - input.clamp(-lambd, lambd)


def threshold(input, threshold, value, inplace=False):
    return where(input > threshold, input, float(value))
