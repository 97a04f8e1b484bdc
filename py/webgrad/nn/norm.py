"""Batch normalisation layers, with torch.nn's (2.13) arguments, buffers and state_dict names: weight,
bias, running_mean, running_var, num_batches_tracked (int32 here; int64 in PyTorch, which
loads it all the same)."""
from ..autograd import no_grad
from ..ops.creation import ones, tensor, zeros
from ..ops.movement import write_into
from . import functional as F
from . import init
from .module import Module, Parameter


class _BatchNorm(Module):
    _expected_dims = ()

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 device=None, dtype=None, *, bias=True):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        self.register_parameter("weight", Parameter(ones(num_features, device=device, dtype=dtype)) if affine else None)
        self.register_parameter("bias", Parameter(zeros(num_features, device=device, dtype=dtype))
                                if affine and bias else None)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, device=device, dtype=dtype))
            self.register_buffer("running_var", ones(num_features, device=device, dtype=dtype))
            self.register_buffer("num_batches_tracked", tensor(0, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def reset_running_stats(self):
        if self.track_running_stats:
            init.zeros_(self.running_mean)
            init.ones_(self.running_var)
            with no_grad():
                write_into(self.num_batches_tracked, zeros((), dtype=self.num_batches_tracked.dtype,
                                                           device=self.num_batches_tracked.device))

    def reset_parameters(self):
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input):
        if input.ndim not in self._expected_dims:
            raise ValueError(f"expected {' or '.join(f'{d}D' for d in self._expected_dims)} input "
                             f"(got {input.ndim}D input)")
        if input.shape[1] != self.num_features:
            raise ValueError(f"{type(self).__name__}: expected {self.num_features} channels in dim 1, "
                             f"got input of shape {tuple(input.shape)}")
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            with no_grad():
                write_into(self.num_batches_tracked, self.num_batches_tracked + 1)
            if self.momentum is None:   # a cumulative moving average: 1/n of the n-th batch
                factor = 1.0 / int(self.num_batches_tracked.item())
        use_batch = self.training or self.running_mean is None
        return F.batch_norm(input, self.running_mean if not self.training or self.track_running_stats else None,
                            self.running_var if not self.training or self.track_running_stats else None,
                            self.weight, self.bias, use_batch, factor, self.eps)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Normalises each feature of an (N, C) or (N, C, L) input over the batch (and L)."""
    _expected_dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Normalises each channel of an (N, C, H, W) input over N, H and W."""
    _expected_dims = (4,)
