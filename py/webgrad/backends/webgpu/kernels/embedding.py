"""The embedding family (shaders/embedding.wgsl): rows of a weight picked by indices, one kernel each
way; the backward sums each row's picks on the device, deterministically."""
from ...base import SUM, flat
from .. import index_errors
from .common import WORKGROUP_SIZE, check_gpu_dtype, fill, groups, pieces
from .params import ParamBlock, i32, u32

# What the forward reports an index outside [0, R) as (torch's words, and the index; index_errors.py).
EMBEDDING_ERROR = index_errors.code("embedding", "index out of range in self (index {index}; indices must lie "
                                                 "in [0, {size}))")

# Both kernels' parameters (their meanings: shaders/embedding.wgsl).
EMBEDDING_PARAMS = ParamBlock(u32("rows"), u32("cols"), u32("count"), u32("span"), u32("index_stride"),
                              i32("padding"), u32("scale_by_freq"), u32("src_strides", 2), u32("offsets", 2))
# On a GPU, a backward with fewer than EMBEDDING_GROUPS workgroups (a small vocabulary's rows, each
# scanning every index: the GPT's 65 characters over 16,384 positions took 189 us on an H100 in 130
# workgroups) splits the indices into pieces of at least EMBEDDING_MIN_SPAN, summed after it. A
# software adapter keeps one piece (few cores, and the sum's dispatch would cost more).
EMBEDDING_GROUPS = 1024
EMBEDDING_MIN_SPAN = 1024


class EmbeddingKernels:
    def embedding(self, weight, index):
        check_gpu_dtype(weight.dtype, "embedding of")
        (rows, cols), count = weight.shape, index.shape[0]
        out = self._empty((count, cols), weight.dtype)
        if count * cols:
            self._embedding_dispatch("forward", out, weight, index, rows, -1, False, groups(count * cols))
        return out

    def embedding_backward(self, grad, index, rows, padding_idx, scale_by_freq):
        cols, count = grad.shape[1], index.shape[0]
        workgroups = rows * -(-cols // WORKGROUP_SIZE)
        wanted = 1
        if not self.is_software and not scale_by_freq:   # (a frequency is the whole count's)
            wanted = max(1, min(count // EMBEDDING_MIN_SPAN, -(-EMBEDDING_GROUPS // max(workgroups, 1))))
        span, count_pieces = pieces(count, wanted, WORKGROUP_SIZE)   # whole chunks a piece
        out = self._empty((count_pieces, rows, cols), grad.dtype)
        if rows * cols:
            self._embedding_dispatch("backward", out, grad, index, rows, -1 if padding_idx is None else padding_idx,
                                     scale_by_freq, workgroups * count_pieces, span)
        if count_pieces == 1:
            return out
        return self.reduce(SUM, flat(out, (count_pieces, rows * cols), grad.dtype), (0,), grad.dtype)

    def _embedding_dispatch(self, entry, out, src, index, rows, padding, scale_by_freq, workgroups, span=0):
        words = EMBEDDING_PARAMS.pack(rows=rows, cols=src.shape[1], count=index.shape[0], span=span,
                                      index_stride=index.strides[0], padding=padding, scale_by_freq=int(scale_by_freq),
                                      src_strides=src.strides, offsets=[src.offset, index.offset])
        pipeline = self.runtime.pipeline(("embedding", entry),
                                         lambda: fill("embedding", EMBEDDING_PARAMS, includes=("index_error",),
                                                      embedding_error=str(EMBEDDING_ERROR)),
                                         entry=entry, bindings=("read_write", "read", "read", "read_write"))
        storages = [out, src.storage, index.storage, self.runtime.index_errors.storage]
        self.runtime.dispatch(pipeline, storages, words, workgroups)
