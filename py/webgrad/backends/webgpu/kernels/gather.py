"""The gather family (shaders/gather.wgsl): gather along a dim by an index, and its adjoint
scatter_add."""
import math

from .... import dtypes
from .common import check_gpu_dtype, fill, groups

# Index positions one scatter_add dispatch sums per output (each thread loops over them).
SCATTER_SPAN = 4096


class GatherKernels:
    def gather(self, x, dim, index):
        return self._gather_kernel("gather", x.dtype, index.shape, [x, index], [
            x.shape[dim], math.prod(index.shape[dim + 1:]), *index.shape,
            x.offset, *x.strides, index.offset, *index.strides], dim)

    def scatter_add(self, grad, dim, index, shape):
        """Each output sums over the index's positions along dim, in pieces of SCATTER_SPAN
        positions (lavapipe ends longer loops early), the later pieces adding to the first's."""
        storage = None
        for start in range(0, max(1, index.shape[dim]), SCATTER_SPAN):
            size = min(SCATTER_SPAN, index.shape[dim] - start)
            piece = (*index.shape[:dim], size, *index.shape[dim + 1:])
            storage = self._gather_kernel("scatter_add", grad.dtype, shape, [grad, index], [
                size, int(storage is not None), *shape, *piece,
                index.offset + start * index.strides[dim], *index.strides,
                grad.offset + start * grad.strides[dim], *grad.strides], dim, storage)
        return storage

    def _gather_kernel(self, entry, dtype, shape, inputs, words, dim, storage=None):
        check_gpu_dtype(dtype, f"{entry} of")
        if dtype is dtypes.uint8:
            raise TypeError(f"webgpu: {entry} of uint8 tensors is not supported; convert with .int() first")
        numel = math.prod(shape)
        storage = storage if storage is not None else self._empty(shape, dtype)
        if numel:
            pipeline = self.runtime.pipeline(("gather", entry, dtype.name), lambda: fill("gather", None, type=dtype.wgsl),
                                             entry=entry, bindings=("read_write", "read", "read"))
            self.runtime.dispatch(pipeline, [storage] + [t.storage for t in inputs],
                                  [numel, len(shape), dim] + words, groups(numel))
        return storage

