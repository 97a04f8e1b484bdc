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



# ---- activations and channel dropout composed of tensor ops (so they run on the input's device);
# inplace=True is accepted and computes out of place (the same values; the input is left as it is) ----
import warnings  # noqa: E402

from ..ops.creation import rand as _rand  # noqa: E402
from ..ops.elementwise import where as _where  # noqa: E402

__all__ += ["dropout1d", "dropout2d", "dropout3d", "elu", "hardtanh", "mish", "relu6", "silu", "softplus"]


def silu(input, inplace=False):  # noqa: A002
    return input * sigmoid(input)


def elu(input, alpha=1.0, inplace=False):  # noqa: A002
    # exp of the negative part only: exp(x) of a large x would overflow where x is kept as it is
    return relu(input) + alpha * (input.clamp(max=0.0).exp() - 1.0)


def softplus(input, beta=1.0, threshold=20.0):  # noqa: A002
    """log(1 + exp(beta * x)) / beta, and x itself where beta * x > threshold (PyTorch's switch)."""
    scaled = input * beta
    return _where(scaled > threshold, input, (scaled.clamp(max=threshold).exp() + 1.0).log() * (1.0 / beta))


def mish(input, inplace=False):  # noqa: A002
    return input * tanh(softplus(input))


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):  # noqa: A002
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return input.clamp(min_val, max_val)


def relu6(input, inplace=False):  # noqa: A002
    return hardtanh(input, 0.0, 6.0)


def _gelu_tanh(input):  # noqa: A002
    """GELU's tanh approximation (approximate='tanh'): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    inner = (input + input * input * input * 0.044715) * 0.7978845608028654
    return input * 0.5 * (tanh(inner) + 1.0)


def _feature_dropout(input, p, training, inplace, name):  # noqa: A002
    """Zero whole channels (dim 1 of an (N, C, *) input) with probability p, scale the rest by 1/(1-p)."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if inplace:
        raise NotImplementedError(f"{name}: inplace=True is not supported")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0.0
    mask_shape = tuple(input.shape[:2]) + (1,) * (input.ndim - 2)
    keep = (_rand(mask_shape, dtype=input.dtype, device=input.device) >= p).to(input.dtype)
    return input * (keep * (1.0 / (1.0 - p)))


def _maybe_unbatched_dropout(input, p, training, inplace, name, batched_ndim):  # noqa: A002
    """An input of fewer than batched_ndim dims has no batch dim: it is one sample."""
    if input.ndim == batched_ndim:
        return _feature_dropout(input, p, training, inplace, name)
    return _feature_dropout(input.unsqueeze(0), p, training, inplace, name).squeeze(0)


def dropout1d(input, p=0.5, training=True, inplace=False):  # noqa: A002
    """Zero whole channels of an (N, C, L) or (C, L) input in training, scaling the rest by 1/(1-p)."""
    if input.ndim not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D input. Note that "
                           "dropout1d exists to provide channel-wise dropout on inputs with 1 spatial dimension, a "
                           "channel dimension, and an optional batch dimension (i.e. 2D or 3D inputs).")
    return _maybe_unbatched_dropout(input, p, training, inplace, "dropout1d", 3)


def dropout2d(input, p=0.5, training=True, inplace=False):  # noqa: A002
    """Zero whole channels of an (N, C, H, W) input in training, scaling the rest by 1/(1-p). As in
    PyTorch, a 3-D input is read as (N, C, L) (channel-wise 1-D dropout), with a warning."""
    if input.ndim not in (3, 4):
        warnings.warn(_DEPRECATED_NDIM.format(name="dropout2d", ndim=input.ndim, spatial=2, dims="3D or 4D"))
    if input.ndim == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout "
                      "behavior is desired - input is interpreted as shape (N, C, L), where C is the channel dim. "
                      "To maintain the 1D channel-wise dropout behavior, please switch to using dropout1d instead.")
    return _feature_dropout(input, p, training, inplace, "dropout2d")


def dropout3d(input, p=0.5, training=True, inplace=False):  # noqa: A002
    """Zero whole channels of an (N, C, D, H, W) or (C, D, H, W) input in training."""
    if input.ndim not in (4, 5):
        warnings.warn(_DEPRECATED_NDIM.format(name="dropout3d", ndim=input.ndim, spatial=3, dims="4D or 5D"))
    return _maybe_unbatched_dropout(input, p, training, inplace, "dropout3d", 5)


_DEPRECATED_NDIM = ("{name}: Received a {ndim}-D input to {name}, which is deprecated and will result in an error "
                    "in a future release. To retain the behavior and silence this warning, please use dropout "
                    "instead. Note that {name} exists to provide channel-wise dropout on inputs with {spatial} "
                    "spatial dimensions, a channel dimension, and an optional batch dimension (i.e. {dims} inputs).")
