"""Layer and RMS normalisation over an input's trailing dims (torch.nn.functional.layer_norm and
rms_norm): one fused kernel each way on the webgpu device (shaders/norm.wgsl), the rows' mean and
rstd kept from the forward for the backward; the weight's and bias's gradients are column sums of
the same rows."""
import math

from ..amp import autocast_op
from .. import dtypes
from ..autograd import Function
from .half import computes_in_float32
from .._tensor import Tensor


class _Norm(Function):
    def forward(self, x, weight, bias, shape, eps, centered):
        cols = math.prod(shape)
        rows = x.numel() // cols if cols else 0
        self.x, self.weight, self.bias, self.shape, self.centered = x.reshape(rows, cols), weight, bias, shape, centered
        y, stats = x.backend.norm(self.x._view, *(None if t is None else t.reshape(cols)._view for t in (weight, bias)),
                                  eps, centered)
        self.stats = Tensor(stats, (rows, 2), x.dtype, x.device)
        return Tensor(y, x.shape, x.dtype, x.device)

    def backward(self, grad):
        x, weight, bias = self.x, self.weight, self.bias
        param_grads = any(t is not None and t.requires_grad for t in (weight, bias))
        dx, params = x.backend.norm_backward(grad.reshape(x.shape)._view, x._view, self.stats._view,
                                             None if weight is None else weight.reshape(x.shape[1])._view,
                                             self.centered, param_grads)
        grads = [Tensor(dx, grad.shape, x.dtype, x.device)]
        for row, t in enumerate((weight, bias)):
            if t is not None:
                grads.append(Tensor(params, self.shape, x.dtype, x.device, offset=row * x.shape[1])
                             if param_grads else None)
        return tuple(grads)


def _normalized_shape(x, normalized_shape, weight, bias, name):
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(int(s) for s in normalized_shape)
    if not shape or tuple(x.shape[x.ndim - len(shape):]) != shape or len(shape) > x.ndim:
        raise RuntimeError(f"{name}: Given normalized_shape={list(shape)}, expected input with shape "
                           f"[*, {', '.join(map(str, shape))}], but got input of size{list(x.shape)}")
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"{name}: expected a floating point input, got {x.dtype.name}")
    for what, t in (("weight", weight), ("bias", bias)):
        if t is not None and (tuple(t.shape) != shape or t.device != x.device or t.dtype is not x.dtype):
            raise RuntimeError(f"{name}: expected {what} of shape {list(shape)}, {x.dtype.name} on {x.device}, "
                               f"got {list(t.shape)}, {t.dtype.name} on {t.device}")
    return shape


@autocast_op
@computes_in_float32
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """(x - mean) / sqrt(var + eps) * weight + bias, mean and biased var over the trailing
    normalized_shape dims."""
    shape = _normalized_shape(input, normalized_shape, weight, bias, "layer_norm")
    return _Norm.apply(input, weight, bias, shape, float(eps), True)


@autocast_op
@computes_in_float32
def rms_norm(input, normalized_shape, weight=None, eps=None):
    """x / sqrt(mean(x^2) + eps) * weight over the trailing normalized_shape dims; eps None is the
    dtype's machine epsilon, as in torch."""
    shape = _normalized_shape(input, normalized_shape, weight, None, "rms_norm")
    if eps is None:
        eps = 2.0 ** -52 if input.dtype is dtypes.float64 else 2.0 ** -23
    return _Norm.apply(input, weight, None, shape, float(eps), False)
