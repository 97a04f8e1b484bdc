"""torch.nn.functional's names; softmax and the losses live in webgrad.ops.loss, convolution,
pooling and pad in webgrad.ops.conv. Dropout and batch_norm are compositions of tensor ops, so
they run (forward and backward) on the input's device."""
from ..autograd import no_grad
from ..ops.conv import avg_pool2d, conv2d, max_pool2d, pad
from ..ops.creation import rand_like
from ..ops.elementwise import gelu as _gelu, leaky_relu, relu, sigmoid, tanh
from ..ops.loss import cross_entropy, log_softmax, mse_loss, softmax
from ..ops.matmul import matmul_with_bias
from ..ops.movement import write_into

__all__ = ["avg_pool2d", "batch_norm", "conv2d", "cross_entropy", "dropout", "gelu", "leaky_relu", "linear",
           "log_softmax", "max_pool2d", "mse_loss", "pad", "relu", "sigmoid", "softmax", "tanh"]


def _check_gelu_approximate(approximate):
    if approximate != "none":
        raise ValueError(f"gelu: approximate={approximate!r} is not supported; webgrad has the exact 'none'")
    return approximate


def gelu(input, approximate="none"):  # noqa: A002
    _check_gelu_approximate(approximate)
    return _gelu(input)


def linear(input, weight, bias=None):  # noqa: A002
    """input @ weight.T + bias, with weight of shape (out_features, in_features)."""
    return matmul_with_bias(input, weight.T, bias)


def dropout(input, p=0.5, training=True, inplace=False):  # noqa: A002
    """Zero each element with probability p and scale the rest by 1/(1-p) (training only).
    The mask is drawn on input's device from webgrad's seeded generator."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if inplace:
        raise NotImplementedError("dropout: inplace=True is not supported")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0.0
    keep = (rand_like(input) >= p).to(input.dtype)
    return input * (keep * (1.0 / (1.0 - p)))


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,  # noqa: A002
               momentum=0.1, eps=1e-5):
    """torch.nn.functional.batch_norm over dim 1 of an (N, C) or (N, C, *) input.

    Training (or no running statistics) normalises with the batch's mean and biased variance
    and, when running_mean / running_var are given, blends the batch mean and unbiased variance
    into them in place (running = (1 - momentum) * running + momentum * batch). Otherwise the
    running statistics normalise."""
    if input.ndim < 2:
        raise ValueError(f"batch_norm: expected an (N, C) or (N, C, *) input, got shape {tuple(input.shape)}")
    channels = input.shape[1]
    dims = (0, *range(2, input.ndim))
    stat_shape = (1, channels) + (1,) * (input.ndim - 2)
    if training:
        count = input.numel() // channels
        if count <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size "
                             f"{list(input.shape)}")
        mean = input.mean(dims, keepdim=True)
        centred = input - mean
        var = (centred * centred).mean(dims, keepdim=True)
        if running_mean is not None or running_var is not None:
            with no_grad():
                if running_mean is not None:
                    write_into(running_mean, running_mean * (1.0 - momentum) + mean.detach().reshape(channels)
                               * momentum)
                if running_var is not None:
                    unbiased = var.detach().reshape(channels) * (count / (count - 1))
                    write_into(running_var, running_var * (1.0 - momentum) + unbiased * momentum)
    else:
        if running_mean is None or running_var is None:
            raise ValueError("batch_norm: running_mean and running_var are needed when not training")
        centred = input - running_mean.reshape(stat_shape)
        var = running_var.reshape(stat_shape)
    out = centred * (var + eps) ** -0.5
    if weight is not None:
        out = out * weight.reshape(stat_shape)
    if bias is not None:
        out = out + bias.reshape(stat_shape)
    return out
