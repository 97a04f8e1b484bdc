"""nn.InstanceNorm1d / 2d / 3d: each sample's channels normalised over their own spatial
dims (F.instance_norm), with torch.nn's arguments (affine and track_running_stats off by default),
buffers and state_dict names, which are batch norm's."""
import warnings

from . import functional as F
from .norm import _BatchNorm


class _InstanceNorm(_BatchNorm):
    _unbatched_ndim = 0

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False, track_running_stats=False,
                 device=None, dtype=None, *, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)

    def forward(self, input):
        if input.ndim not in (self._unbatched_ndim, self._unbatched_ndim + 1):
            raise ValueError(f"expected {self._unbatched_ndim}D or {self._unbatched_ndim + 1}D input "
                             f"(got {input.ndim}D input)")
        feature_dim = input.ndim - self._unbatched_ndim
        if input.shape[feature_dim] != self.num_features:
            if self.affine:
                raise ValueError(f"expected input's size at dim={feature_dim} to match num_features "
                                 f"({self.num_features}), but got: {input.shape[feature_dim]}.")
            warnings.warn(f"input's size at dim={feature_dim} does not match num_features. You can silence this "
                          "warning by not passing in num_features, which is not used because affine=False",
                          stacklevel=2)
        unbatched = input.ndim == self._unbatched_ndim
        out = F.instance_norm(input.unsqueeze(0) if unbatched else input, self.running_mean, self.running_var,
                              self.weight, self.bias, self.training or not self.track_running_stats,
                              0.0 if self.momentum is None else self.momentum, self.eps)
        return out.squeeze(0) if unbatched else out


class InstanceNorm1d(_InstanceNorm):
    """Over an (N, C, L) or (C, L) input."""
    _unbatched_ndim = 2


class InstanceNorm2d(_InstanceNorm):
    """Over an (N, C, H, W) or (C, H, W) input."""
    _unbatched_ndim = 3


class InstanceNorm3d(_InstanceNorm):
    """Over an (N, C, D, H, W) or (C, D, H, W) input."""
    _unbatched_ndim = 4
