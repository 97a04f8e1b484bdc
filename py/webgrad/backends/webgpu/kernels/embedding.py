"""The embedding family (shaders/embedding.wgsl): rows of a weight picked by indices, one kernel each
way; the backward sums each row's picks on the device, deterministically."""
from .. import index_errors
from .common import WORKGROUP_SIZE, check_gpu_dtype, fill, groups
from .params import ParamBlock, i32, u32

# What the forward reports an index outside [0, R) as (torch's words, and the index; index_errors.py).
EMBEDDING_ERROR = index_errors.code("embedding", "index out of range in self (index {index}; indices must lie "
                                                 "in [0, {size}))")

# Both kernels' parameters (their meanings: shaders/embedding.wgsl).
EMBEDDING_PARAMS = ParamBlock(u32("rows"), u32("cols"), u32("count"), u32("index_stride"), i32("padding"),
                              u32("scale_by_freq"), u32("src_strides", 2), u32("offsets", 2))


class EmbeddingKernels:
    def embedding(self, weight, index):
        check_gpu_dtype(weight.dtype, "embedding of")
        (rows, cols), count = weight.shape, index.shape[0]
        out = self._empty((count, cols), weight.dtype)
        if count * cols:
            self._embedding_dispatch("forward", out, weight, index, rows, -1, False, groups(count * cols))
        return out

    def embedding_backward(self, grad, index, rows, padding_idx, scale_by_freq):
        cols = grad.shape[1]
        out = self._empty((rows, cols), grad.dtype)
        if rows * cols:
            self._embedding_dispatch("backward", out, grad, index, rows, -1 if padding_idx is None else padding_idx,
                                     scale_by_freq, rows * -(-cols // WORKGROUP_SIZE))
        return out

    def _embedding_dispatch(self, entry, out, src, index, rows, padding, scale_by_freq, workgroups):
        words = EMBEDDING_PARAMS.pack(rows=rows, cols=src.shape[1], count=index.shape[0], index_stride=index.strides[0],
                                      padding=padding, scale_by_freq=int(scale_by_freq), src_strides=src.strides,
                                      offsets=[src.offset, index.offset])
        pipeline = self.runtime.pipeline(("embedding", entry),
                                         lambda: fill("embedding", EMBEDDING_PARAMS, includes=("index_error",),
                                                      embedding_error=str(EMBEDDING_ERROR)),
                                         entry=entry, bindings=("read_write", "read", "read", "read_write"))
        storages = [out, src.storage, index.storage, self.runtime.index_errors.storage]
        self.runtime.dispatch(pipeline, storages, words, workgroups)
