"""torch.nn.functional's names; softmax and the losses live in webgrad.ops.loss."""
from ..ops.elementwise import gelu as _gelu, leaky_relu, relu, sigmoid, tanh
from ..ops.loss import cross_entropy, log_softmax, mse_loss, softmax

__all__ = ["cross_entropy", "gelu", "leaky_relu", "linear", "log_softmax", "mse_loss", "relu", "sigmoid",
           "softmax", "tanh"]


def _check_gelu_approximate(approximate):
    if approximate != "none":
        raise ValueError(f"gelu: approximate={approximate!r} is not supported; webgrad has the exact 'none'")
    return approximate


def gelu(input, approximate="none"):  # noqa: A002
    _check_gelu_approximate(approximate)
    return _gelu(input)


def linear(input, weight, bias=None):  # noqa: A002
    """input @ weight.T + bias, with weight of shape (out_features, in_features)."""
    out = input @ weight.T
    return out if bias is None else out + bias
