"""torch.nn.functional's names and signatures. The ops live in webgrad.ops: softmax and the class
losses in ops.loss, the elementwise losses in ops.pointwise_loss, activations in ops.activation and
ops.elementwise, convolution, pooling and pad in ops.conv. Dropout and batch_norm are compositions
of tensor ops, so they run (forward and backward) on the input's device."""
import warnings

from ..amp import autocast_op
from ..autograd import no_grad
from ..ops import activation, loss as _loss, pointwise_loss as _pointwise
from ..ops.attention import scaled_dot_product_attention
from ..ops.composite_activation import (celu, glu, hardshrink, hardsigmoid, hardswish, prelu, selu, softmin as _softmin,
                                        softshrink, softsign, tanhshrink, threshold)
from ..ops.conv1d import avg_pool1d, conv1d, max_pool1d
from ..ops.conv_transpose import conv_transpose1d, conv_transpose2d
from ..ops.distance import cosine_similarity, normalize, pairwise_distance
from ..ops.group_norm import group_norm, instance_norm
from ..ops.resample import (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d, adaptive_max_pool1d,
                            adaptive_max_pool2d, adaptive_max_pool3d, interpolate, pixel_shuffle, pixel_unshuffle)
from ..ops.conv import avg_pool2d, conv2d, max_pool2d
from ..ops.creation import rand as _rand, rand_like
from ..ops.embedding import embedding
from ..ops.embedding_bag import embedding_bag
from ..ops.norm import layer_norm, rms_norm
from ..ops.padding import pad
from ..ops.elementwise import gelu as _gelu, leaky_relu, relu, sigmoid, tanh
from ..ops.loss import log_softmax as _log_softmax, softmax as _softmax
from ..ops.matmul import matmul_with_bias
from ..ops.movement import write_into
from ..ops.scatter import one_hot

__all__ = ["avg_pool2d", "batch_norm", "binary_cross_entropy", "binary_cross_entropy_with_logits", "conv2d",
           "cross_entropy", "dropout", "gelu", "huber_loss", "kl_div", "l1_loss", "leaky_relu", "linear",
           "log_softmax", "logsigmoid", "max_pool2d", "mse_loss", "nll_loss", "one_hot", "pad", "relu", "sigmoid",
           "smooth_l1_loss", "softmax", "tanh"]


def gelu(input, approximate="none"):
    """Exact (erf) GELU, or with approximate='tanh' its tanh approximation; one kernel each."""
    if approximate == "tanh":
        return activation.gelu_tanh(input)
    if approximate != "none":
        raise RuntimeError("approximate argument must be either none or tanh.")
    return _gelu(input)


_gelu_tanh = activation.gelu_tanh   # (nn.GELU's name for it)
logsigmoid = activation.logsigmoid


# ---- losses: PyTorch's signatures, legacy size_average/reduce included ----
def _reduction(size_average, reduce, reduction):
    """The reduction that the deprecated size_average / reduce flags name, where given (PyTorch's rule)."""
    if size_average is None and reduce is None:
        return reduction
    if reduce is None or reduce:
        return "mean" if size_average is None or size_average else "sum"
    return "none"


def _weighted(loss, weight, reduction, mean_by_weights=True):
    """An elementwise loss times weight (one per element). As in PyTorch, mse_loss's and l1_loss's
    weighted mean divides by the weights' sum, huber_loss's by the element count."""
    if weight is None:
        return _loss.reduce_loss(loss, reduction)
    if weight.shape != loss.shape:
        raise ValueError("Weights and input must have the same size.")
    loss = loss * weight
    if reduction == "mean" and mean_by_weights:
        return loss.sum() / weight.sum()
    return _loss.reduce_loss(loss, reduction)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    return _loss.cross_entropy(input, target, weight, ignore_index, _reduction(size_average, reduce, reduction),
                               label_smoothing)


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    return _loss.nll_loss(input, target, weight, ignore_index, _reduction(size_average, reduce, reduction))


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    return _weighted(_loss.mse_loss(input, target, "none"), weight, _reduction(size_average, reduce, reduction))


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    return _weighted(_pointwise.l1_loss(input, target, "none"), weight, _reduction(size_average, reduce, reduction))


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    return _pointwise.smooth_l1_loss(input, target, _reduction(size_average, reduce, reduction), beta)


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    return _weighted(_pointwise.huber_loss(input, target, "none", delta), weight, reduction, mean_by_weights=False)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean"):
    return _pointwise.binary_cross_entropy(input, target, weight, _reduction(size_average, reduce, reduction))


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    return _pointwise.binary_cross_entropy_with_logits(input, target, weight,
                                                       _reduction(size_average, reduce, reduction), pos_weight)


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    return _pointwise.kl_div(input, target, _reduction(size_average, reduce, reduction), log_target)


@autocast_op
def linear(input, weight, bias=None):
    """input @ weight.T + bias, with weight of shape (out_features, in_features)."""
    return matmul_with_bias(input, weight.T, bias)


def dropout(input, p=0.5, training=True, inplace=False):
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


@autocast_op
def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
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



# ---- activations (one kernel each, or compositions of tensor ops) and channel dropout;
# inplace=True is accepted and computes out of place (the same values; the input is left as it is) ----
__all__ += ["dropout1d", "dropout2d", "dropout3d", "elu", "hardtanh", "mish", "relu6", "silu", "softplus"]


def silu(input, inplace=False):
    return activation.silu(input)


def elu(input, alpha=1.0, inplace=False):
    return activation.elu(input, alpha)


def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta * x)) / beta, and x itself where beta * x > threshold (PyTorch's switch)."""
    return activation.softplus(input, beta, threshold)


@autocast_op
def mish(input, inplace=False):
    return input * tanh(softplus(input))


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return input.clamp(min_val, max_val)


def relu6(input, inplace=False):
    return hardtanh(input, 0.0, 6.0)


def _feature_dropout(input, p, training, inplace, name):
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


def _maybe_unbatched_dropout(input, p, training, inplace, name, batched_ndim):
    """An input of fewer than batched_ndim dims has no batch dim: it is one sample."""
    if input.ndim == batched_ndim:
        return _feature_dropout(input, p, training, inplace, name)
    return _feature_dropout(input.unsqueeze(0), p, training, inplace, name).squeeze(0)


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of an (N, C, L) or (C, L) input in training, scaling the rest by 1/(1-p)."""
    if input.ndim not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D input. Note that "
                           "dropout1d exists to provide channel-wise dropout on inputs with 1 spatial dimension, a "
                           "channel dimension, and an optional batch dimension (i.e. 2D or 3D inputs).")
    return _maybe_unbatched_dropout(input, p, training, inplace, "dropout1d", 3)


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of an (N, C, H, W) input in training, scaling the rest by 1/(1-p). As in
    PyTorch, a 3-D input is read as (N, C, L) (channel-wise 1-D dropout), with a warning."""
    if input.ndim not in (3, 4):
        warnings.warn(_DEPRECATED_NDIM.format(name="dropout2d", ndim=input.ndim, spatial=2, dims="3D or 4D"),
                      stacklevel=2)
    if input.ndim == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout "
                      "behavior is desired - input is interpreted as shape (N, C, L), where C is the channel dim. "
                      "To maintain the 1D channel-wise dropout behavior, please switch to using dropout1d instead.",
                      stacklevel=2)
    return _feature_dropout(input, p, training, inplace, "dropout2d")


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of an (N, C, D, H, W) or (C, D, H, W) input in training."""
    if input.ndim not in (4, 5):
        warnings.warn(_DEPRECATED_NDIM.format(name="dropout3d", ndim=input.ndim, spatial=3, dims="4D or 5D"),
                      stacklevel=2)
    return _maybe_unbatched_dropout(input, p, training, inplace, "dropout3d", 5)


_DEPRECATED_NDIM = ("{name}: Received a {ndim}-D input to {name}, which is deprecated and will result in an error "
                    "in a future release. To retain the behavior and silence this warning, please use dropout "
                    "instead. Note that {name} exists to provide channel-wise dropout on inputs with {spatial} "
                    "spatial dimensions, a channel dimension, and an optional batch dimension (i.e. {dims} inputs).")


# ---- language-model layers: embedding, layer / RMS norm and attention (fused kernels: webgrad.ops) ----
__all__ += ["embedding", "embedding_bag", "layer_norm", "rms_norm", "scaled_dot_product_attention"]


# ---- more layers, composed of the ops above: 1-D and transposed convolution, 1-D and adaptive
# pooling, resampling, padding modes, group / instance norm, distances and activations
# (webgrad.ops.conv1d, conv_transpose, resample, padding, group_norm, distance, composite_activation) ----
__all__ += ["adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d",
            "adaptive_max_pool2d", "adaptive_max_pool3d", "avg_pool1d", "celu", "conv1d", "conv_transpose1d",
            "conv_transpose2d", "cosine_similarity", "glu", "group_norm", "hardshrink", "hardsigmoid", "hardswish",
            "instance_norm", "interpolate", "max_pool1d", "normalize", "pairwise_distance", "pixel_shuffle",
            "pixel_unshuffle", "prelu", "selu", "softmin", "softshrink", "softsign", "tanhshrink", "threshold",
            "upsample", "upsample_bilinear", "upsample_nearest"]


def implicit_softmax_dim(name, ndim, stacklevel=3):
    """The dim softmax-like functions take when none is given (deprecated in PyTorch, with a warning)."""
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to include dim=X "
                  "as an argument.", stacklevel=stacklevel)
    return 0 if ndim in (0, 1, 3) else 1


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    return _softmin(input, implicit_softmax_dim("softmin", input.ndim, _stacklevel) if dim is None else dim, dtype)


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    return _softmax(input, implicit_softmax_dim("softmax", input.ndim, _stacklevel) if dim is None else dim, dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    return _log_softmax(input, implicit_softmax_dim("log_softmax", input.ndim, _stacklevel) if dim is None else dim,
                        dtype)


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    warnings.warn("`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    warnings.warn("`nn.functional.upsample_nearest` is deprecated. Use `nn.functional.interpolate` instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    warnings.warn("`nn.functional.upsample_bilinear` is deprecated. Use `nn.functional.interpolate` instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)
