"""Group and instance normalisation of an (N, C, *) input: each sample's channel groups (or each
channel, for instance norm) are rows of layer_norm's fused kernel, then the per-channel affine
weight and bias are applied. Instance norm's running statistics blend in the batch's mean of the
per-instance means and unbiased variances, as in PyTorch."""
from ..amp import autocast_op
from ..autograd import no_grad
from .movement import write_into
from .norm import layer_norm


def _channel_affine(out, weight, bias):
    shape = (1, out.shape[1]) + (1,) * (out.ndim - 2)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


@autocast_op
def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    if input.ndim < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {input.ndim}")
    n, channels = input.shape[:2]
    if num_groups <= 0 or channels % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by num_groups, but got input of "
                           f"shape {list(input.shape)} and num_groups={num_groups}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != (channels,):
            raise RuntimeError(f"Expected {name} to be a vector of size equal to the number of channels in input, "
                               f"but got {name} of shape {list(t.shape)} and input of shape {list(input.shape)}")
    rows = input.reshape(n, num_groups, -1)
    out = layer_norm(rows, (rows.shape[-1],), eps=eps).reshape(input.shape)
    return _channel_affine(out, weight, bias)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                  momentum=0.1, eps=1e-5):
    if input.ndim < 2:
        raise ValueError(f"instance_norm: expected an (N, C, *) input, got shape {list(input.shape)}")
    n, channels = input.shape[:2]
    if not use_input_stats:
        if running_mean is None or running_var is None:
            raise ValueError("instance_norm: running_mean and running_var are needed when use_input_stats=False")
        shape = (1, channels) + (1,) * (input.ndim - 2)
        out = (input - running_mean.reshape(shape)) * (running_var.reshape(shape) + eps) ** -0.5
        return _channel_affine(out, weight, bias)
    count = input.numel() // (n * channels) if n * channels else 0
    if count <= 1:
        raise ValueError(f"Expected more than 1 spatial element when training, got input size {list(input.shape)}")
    rows = input.reshape(n, channels, count)
    if running_mean is not None or running_var is not None:
        with no_grad():
            stats = rows.detach()
            mean = stats.mean(2)
            if running_mean is not None:
                write_into(running_mean, running_mean * (1.0 - momentum) + mean.mean(0) * momentum)
            if running_var is not None:
                unbiased = stats.var(2, correction=1).mean(0)
                write_into(running_var, running_var * (1.0 - momentum) + unbiased * momentum)
    out = layer_norm(rows, (count,), eps=eps).reshape(input.shape)
    return _channel_affine(out, weight, bias)
