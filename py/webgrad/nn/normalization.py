"""nn.LayerNorm, nn.RMSNorm and nn.GroupNorm, with torch.nn's arguments, initialisation (weight 1,
bias 0) and state_dict names (weight, bias)."""
from ..ops.creation import empty
from . import functional as F
from . import init
from .module import Module, Parameter


class _TrailingNorm(Module):
    """Normalises over the input's trailing normalized_shape dims, with an elementwise weight (and
    bias) of that shape when elementwise_affine."""

    def __init__(self, normalized_shape, eps, elementwise_affine, bias, device, dtype):
        super().__init__()
        self.normalized_shape = ((normalized_shape,) if isinstance(normalized_shape, int)
                                 else tuple(normalized_shape))
        self.eps, self.elementwise_affine = eps, elementwise_affine
        affine = [Parameter(empty(self.normalized_shape, device=device, dtype=dtype)) if elementwise_affine and wanted
                  else None for wanted in (True, bias)]
        self.register_parameter("weight", affine[0])
        self.register_parameter("bias", affine[1])
        self.reset_parameters()

    def reset_parameters(self):
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)


class LayerNorm(_TrailingNorm):
    """(x - mean) / sqrt(var + eps) * weight + bias over the trailing normalized_shape dims."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None, dtype=None):
        super().__init__(normalized_shape, eps, elementwise_affine, bias, device, dtype)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
                f"bias={self.bias is not None}")


class RMSNorm(_TrailingNorm):
    """x / sqrt(mean(x^2) + eps) * weight over the trailing normalized_shape dims (eps None: the
    dtype's machine epsilon)."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None):
        super().__init__(normalized_shape, eps, elementwise_affine, False, device, dtype)

    def forward(self, x):
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class GroupNorm(Module):
    """Normalises each sample's num_groups groups of channels (with their other dims) to mean 0 and
    variance 1, then scales and shifts each channel (weight 1 and bias 0 at first, when affine)."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None, *, bias=True):
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups ({num_groups})")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        affine = [Parameter(empty(num_channels, device=device, dtype=dtype)) if affine and wanted else None
                  for wanted in (True, bias)]
        self.register_parameter("weight", affine[0])
        self.register_parameter("bias", affine[1])
        self.reset_parameters()

    reset_parameters = _TrailingNorm.reset_parameters

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, " \
               f"bias={self.bias is not None}"
