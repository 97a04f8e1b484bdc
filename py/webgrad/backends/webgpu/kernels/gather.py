"""The gather family (shaders/gather.wgsl): gather along a dim by an index, and its adjoint
scatter_add. A uint8 result (bytes packed four to a u32 word) takes a thread per word."""
import functools
import math

from .... import dtypes
from .. import index_errors
from .common import check_gpu_dtype, fill, groups, load
from .params import ParamBlock, u32

# Index positions one scatter_add dispatch sums per output (each thread loops over them).
SCATTER_SPAN = 4096
# What the kernels report an index out of range as (torch's words; index_errors.py).
OUT_OF_BOUNDS = "index {index} is out of bounds for dimension {dim} with size {size}"
GATHER_ERROR = index_errors.code("gather", OUT_OF_BOUNDS)
SCATTER_ERROR = index_errors.code("scatter_add", OUT_OF_BOUNDS)
# Operand layouts kept worked out (_layout); past this many the oldest go.
GATHER_LAYOUTS_KEPT = 256

# Both kernels' parameters (their meanings: shaders/gather.wgsl). The offsets change from call to
# call, so they come last (ParamBlock.packer).
GATHER_PARAMS = ParamBlock(u32("numel"), u32("ndim"), u32("dim"), u32("dim_size"), u32("accumulate"),
                           u32("shape", "ndim"), u32("index_shape", "ndim"), u32("src_strides", "ndim"),
                           u32("index_strides", "ndim"), u32("offsets", 2))


@functools.lru_cache(maxsize=GATHER_LAYOUTS_KEPT)
def _layout(shape, dim, dim_size, accumulate, index_shape, src_strides, index_strides):
    """One layout of the operands: out's element count, and GATHER_PARAMS as a function of the
    operands' offsets [src's, index's]."""
    numel = math.prod(shape)
    return numel, GATHER_PARAMS.packer(numel=numel, ndim=len(shape), dim=dim, dim_size=dim_size,
                                       accumulate=accumulate, shape=shape, index_shape=index_shape,
                                       src_strides=src_strides, index_strides=index_strides)


class GatherKernels:
    def gather(self, x, dim, index):
        numel, pack = _layout(index.shape, dim, x.shape[dim], 0, index.shape, x.strides, index.strides)
        return self._gather_kernel("gather", x.dtype, index.shape, numel, [x, index], pack([x.offset, index.offset]))

    def scatter_add(self, grad, dim, index, shape):
        """Each output sums over the index's positions along dim, in pieces of SCATTER_SPAN
        positions (lavapipe ends longer loops early), the later pieces adding to the first's."""
        storage = None
        for start in range(0, max(1, index.shape[dim]), SCATTER_SPAN):
            size = min(SCATTER_SPAN, index.shape[dim] - start)
            piece = (*index.shape[:dim], size, *index.shape[dim + 1:])
            numel, pack = _layout(shape, dim, shape[dim], int(storage is not None), piece, grad.strides,
                                  index.strides)
            words = pack([grad.offset + start * grad.strides[dim], index.offset + start * index.strides[dim]])
            storage = self._gather_kernel("scatter_add", grad.dtype, shape, numel, [grad, index], words, storage)
        return storage

    def _gather_kernel(self, entry, dtype, shape, numel, inputs, words, storage=None):
        check_gpu_dtype(dtype, f"{entry} of")
        storage = storage if storage is not None else self._empty(shape, dtype)
        if numel:
            packed = dtype is dtypes.uint8
            pipeline = self.runtime.pipeline(
                ("gather", entry, dtype.name),
                lambda: fill("gather", GATHER_PARAMS, includes=("index_error",), type=dtype.wgsl,
                             packed=str(packed).lower(), src_element=load(dtype, "src", "at"),
                             out_element=load(dtype, "out", "i"), gather_error=str(GATHER_ERROR),
                             scatter_error=str(SCATTER_ERROR)),
                entry=entry, bindings=("read_write", "read", "read", "read_write"))
            storages = [storage] + [t.storage for t in inputs] + [self.runtime.index_errors.storage]
            self.runtime.dispatch(pipeline, storages, words, groups(-(-numel // 4) if packed else numel))
        return storage
