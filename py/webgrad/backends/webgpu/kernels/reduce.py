"""The reduce family (shaders/reduce.wgsl): a backends.base.Reduction over any dims of a strided
view, in one pass or two."""
import math

from .... import dtypes
from ...base import flat
from .common import HIGHEST, LOWEST, check_gpu_dtype, check_not_uint8, fill, groups

# Reduced elements per reduce workgroup (64 threads, 256 each): bigger reductions take two passes.
REDUCE_SPAN = 64 * 256
# A reduction with few outputs is split into chunks of at least this many elements until it has
# REDUCE_GROUPS workgroups: a GPU needs hundreds of workgroups in flight (on an H100 a conv's bias
# gradient, 16 outputs of 100k elements each, took 134 us on 112 workgroups; on 1024 it takes 26 us,
# and 12 us more for the second pass).
REDUCE_MIN_SPAN = 1024
REDUCE_GROUPS = 1024
# Reductions this short take one thread per output rather than a workgroup (reduce.wgsl per_thread).
PER_THREAD_REDUCE = 32


class ReduceKernels:
    def reduce(self, op, x, dims, out_dtype):
        check_gpu_dtype(x.dtype, "reducing")
        check_not_uint8(out_dtype, op.name)
        kept = [d for d in range(x.ndim) if d not in dims]
        n_out = math.prod(x.shape[d] for d in kept)
        n_red = math.prod(x.shape[d] for d in dims)
        chunks = max(1, -(-n_red // REDUCE_SPAN), min(-(-n_red // REDUCE_MIN_SPAN), -(-REDUCE_GROUPS // max(1, n_out))))
        if chunks == 1 or n_out == 0:
            return self._reduce_pass(op, x, kept, dims, out_dtype, n_out, n_red, 1)
        # Two passes: each chunk's result, then those reduced per output. An arg op's chunks give
        # the index they picked; the second pass compares x at those indices.
        if op.arg:
            picked = self._reduce_pass(op, x, kept, dims, dtypes.int32, n_out, n_red, chunks)
            return self._reduce_pass(op, x, kept, dims, out_dtype, n_out, chunks, 1, picked=picked)
        partial_dtype = dtypes.float32 if x.dtype.is_floating_point else dtypes.int32
        partial = self._reduce_pass(op, x, kept, dims, partial_dtype, n_out, n_red, chunks)
        return self.reduce(op, flat(partial, (n_out, chunks), partial_dtype), (1,), out_dtype)

    def _reduce_pass(self, op, x, kept, dims, out_dtype, n_out, count, chunks, picked=None):
        """One dispatch of shaders/reduce.wgsl: `chunks` workgroups per output, each reducing up to
        REDUCE_SPAN of the `count` positions (reduced indices, or the chunks' picked indices)."""
        storage = self._empty((n_out * chunks,), out_dtype)
        if n_out == 0:
            return storage
        compute = "f32" if x.dtype.is_floating_point else "i32"
        load = "byte_at(x[at >> 2u], at)" if x.dtype is dtypes.uint8 else "x[at]"
        per_thread = chunks == 1 and count <= PER_THREAD_REDUCE
        entry = "per_thread" if per_thread else "main"
        key = ("reduce", op.name, x.dtype.name, out_dtype.name, picked is not None, entry)
        store = "out[w] = i32(at);" if op.arg else f"out[w] = {out_dtype.wgsl}(acc);"
        if picked is None:
            picked_binding, index = "", "let j = k;"
        else:
            picked_binding = "@group(0) @binding(3) var<storage, read> picked: array<i32>;"
            index = "let c = picked[o * p[1] + k];\n            if (c < 0) { continue; }\n            let j = u32(c);"
        pipeline = self.runtime.pipeline(key, lambda: fill(
            "reduce", None, compute=compute, out_type=out_dtype.wgsl, in_type=x.dtype.wgsl, load=f"T({load})",
            lowest=LOWEST[compute], highest=HIGHEST[compute], identity=op.identity,
            combine=op.combine, store=store, picked_binding=picked_binding, index=index),
            entry=entry, bindings=("read_write", "read") + (("read",) if picked is not None else ()))
        span = -(-count // chunks)
        words = [n_out, count, len(kept), len(dims), x.offset, chunks, span,
                 *(x.shape[d] for d in kept), *(x.strides[d] for d in kept),
                 *(x.shape[d] for d in dims), *(x.strides[d] for d in dims)]
        self.runtime.dispatch(pipeline, [storage, x.storage] + ([picked] if picked is not None else []),
                              words, groups(n_out, 64) if per_thread else n_out * chunks)
        return storage

