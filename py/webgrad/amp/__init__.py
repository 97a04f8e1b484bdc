"""Automatic mixed precision, as torch.amp has it: autocast (autocast_mode.py) runs ops in float16
or float32 by torch's lists, and GradScaler (grad_scaler.py) scales the loss so that float16
gradients do not underflow, skipping the steps where they overflow."""
import warnings

from .. import dtypes
from .autocast_mode import autocast, autocast_op, get_autocast_dtype, is_autocast_enabled
from .grad_scaler import GradScaler

__all__ = ["GradScaler", "autocast", "get_autocast_dtype", "is_autocast_enabled"]


class _CudaAutocast(autocast):
    """torch.cuda.amp.autocast (deprecated in torch for autocast('cuda', ...)): the webgpu device's."""

    def __init__(self, enabled=True, dtype=dtypes.float16, cache_enabled=True):
        warnings.warn("`torch.cuda.amp.autocast(args...)` is deprecated. Please use "
                      "`torch.amp.autocast('cuda', args...)` instead.", FutureWarning, stacklevel=2)
        super().__init__("cuda", dtype, enabled, cache_enabled)


class _CudaGradScaler(GradScaler):
    """torch.cuda.amp.GradScaler (deprecated in torch for GradScaler('cuda', ...))."""

    def __init__(self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
                 enabled=True):
        warnings.warn("`torch.cuda.amp.GradScaler(args...)` is deprecated. Please use "
                      "`torch.amp.GradScaler('cuda', args...)` instead.", FutureWarning, stacklevel=2)
        super().__init__("cuda", init_scale, growth_factor, backoff_factor, growth_interval, enabled)


class cuda_amp:
    """torch.cuda.amp's names (webgrad.cuda.amp)."""
    autocast = _CudaAutocast
    GradScaler = _CudaGradScaler
