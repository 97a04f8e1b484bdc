"""The reduce family (shaders/reduce.wgsl): a backends.base.Reduction over any dims of a strided
view, in one pass or two; a float32 sum's pass is a producer of store epilogues (kernels/epilogue.py)."""
import functools
import math
import struct
from typing import NamedTuple

from .... import dtypes
from ...base import COPY, SUM, flat
from .common import HIGHEST, LOWEST, check_gpu_dtype, fill, groups, load
from .epilogue import Producer, bindings, epilogue_fields, store_function
from .params import ParamBlock, u32

# Threads of a reduce workgroup, each reading up to 256 of the REDUCE_SPAN reduced elements the
# workgroup takes: bigger reductions take two passes.
REDUCE_THREADS = 64
REDUCE_SPAN = REDUCE_THREADS * 256
# A reduction with few outputs is split into chunks of at least this many elements until it has
# REDUCE_GROUPS workgroups: a GPU needs hundreds of workgroups in flight (on an H100 a conv's bias
# gradient, 16 outputs of 100k elements each, took 134 us on 112 workgroups; on 1024 it takes 26 us,
# and 12 us more for the second pass).
REDUCE_MIN_SPAN = 1024
REDUCE_GROUPS = 1024
# Reductions this short take one thread per output rather than a workgroup (reduce.wgsl per_thread).
PER_THREAD_REDUCE = 32
# On a software adapter every pass takes a thread per (output, chunk of up to this many): there a
# workgroup's barriers switch between its lanes' coroutines (the page's MLP bias gradient, 128 sums of
# 128, 4.4 -> ~1.8 ms on SwiftShader), and a thread's loop must stay far below the ~65535 iterations
# such shaders allow. Its threads step through x by adds (reduce.wgsl's per_thread, stepped), where a
# division per reduced dim and element cost more than the load (a lane at a time on a CPU).
SOFTWARE_PER_THREAD_REDUCE = REDUCE_MIN_SPAN
# A reduction down the columns of a row-major block (a Linear's bias gradient: (16384, 1152) summed
# over its rows) takes a thread per (output, chunk of rows), so that a warp's loads are adjacent
# outputs: a workgroup per output read its column at a stride of a row, a memory sector per value
# (H100: 111 us for that sum, ~1/5 of the bandwidth). Chunks of at least COLUMN_MIN_SPAN rows, as
# many as give COLUMN_THREADS threads (an H100 holds ~270k resident); their sums go to a second pass.
# Under COLUMN_FROM elements a reduction keeps a workgroup per output: one pass, where the work is
# about a dispatch's time either way.
COLUMN_MIN_SPAN = 32
COLUMN_THREADS = 1 << 18
COLUMN_FROM = 1 << 20
# A stepped thread's loads in flight at a time (reduce.wgsl's per_thread, stepped, as the column form
# takes it on a GPU): with one, the GPT's bias sums moved 1.1-1.4 TB/s of an H100's ~3.
STEP_LOADS = 4
# On a GPU a reduction that would take two passes takes one, a workgroup of RUN_THREADS per output
# reading four elements at a time (reduce.wgsl's runs), where each output's elements lie in runs of
# adjacent ones (whole vec4s) and are at most RUN_SPAN: a convolution's bias gradient ((128, 16, 28, 28)
# to 16, 100352 elements each), whose second pass cost a dispatch (~10 us of an H100 host's time a step).
RUN_THREADS = 256
RUN_SPAN = 1 << 17
# A runs thread's loads in flight at a time: one round of the runs form, written out (no loop for a
# compiler to keep or unroll).
RUN_LOADS = 8
# Reduce passes worked out and kept; past this many (ever new shapes or strides) the oldest go.
REDUCE_PASSES_KEPT = 4096

# The reduced dims' arrays first: they are read for every element, and the tail's first arrays are
# found with the fewest reads of the block. x's offset last: the one word that changes per call.
REDUCE_PARAMS = ParamBlock(
    u32("outputs"), u32("count"), u32("chunks"), u32("span"), u32("reduced_ndim"), u32("kept_ndim"),
    u32("reduced_shape", "reduced_ndim"), u32("reduced_strides", "reduced_ndim"),
    u32("kept_shape", "kept_ndim"), u32("kept_strides", "kept_ndim"), u32("offset", 1))


class ReduceKernels:
    def reduce(self, op, x, dims, out_dtype):
        check_gpu_dtype(x.dtype, "reducing", float16=True)
        if out_dtype is dtypes.uint8:
            # a pass writes a word per output, and uint8 outputs share words: the values in int32,
            # then a map packs them (it writes each word whole)
            values = self.reduce(op, x, dims, dtypes.int32)
            shape = (math.prod(x.shape[d] for d in range(x.ndim) if d not in dims),)
            return self.map(COPY, (flat(values, shape, dtypes.int32),), shape, dtypes.int32, dtypes.uint8)
        kept = tuple(d for d in range(x.ndim) if d not in dims)
        n_out = math.prod(x.shape[d] for d in kept)
        n_red = math.prod(x.shape[d] for d in dims)
        chunks, form = self._plan(n_out, n_red, _down_columns(x, kept, dims, n_out, n_red))
        if chunks > 1 and not self.is_software and _in_runs(op, x, kept, dims, n_red):
            chunks, form = 1, "runs"
        if chunks == 1 or n_out == 0:
            return self._reduce_pass(op, x, kept, dims, out_dtype, n_out, n_red, 1, form)
        # Two passes: each chunk's result, then those reduced per output. An arg op's chunks give
        # the index they picked; the second pass compares x at those indices.
        if op.arg:
            picked = self._reduce_pass(op, x, kept, dims, dtypes.int32, n_out, n_red, chunks, form)
            _, form = self._plan(n_out, chunks, False)   # one chunk: picks are few
            return self._reduce_pass(op, x, kept, dims, out_dtype, n_out, chunks, 1, form, picked=picked)
        partial_dtype = dtypes.float32 if x.dtype.is_floating_point else dtypes.int32
        partial = self._reduce_pass(op, x, kept, dims, partial_dtype, n_out, n_red, chunks, form)
        return self.reduce(op, flat(partial, (n_out, chunks), partial_dtype), (1,), out_dtype)

    def _plan(self, n_out, count, columns):
        """(chunks, form) of a reduction of `count` elements into each of n_out outputs: its first pass's
        chunks an output, and the pass's form: "main" (a workgroup per (output, chunk)), "per_thread"
        (a thread each, where short) or "stepped" (a thread each stepping through x by adds: a software
        adapter's every pass, and a GPU's down columns); reduce() may then pick "runs" (_in_runs)."""
        if self.is_software:
            return max(1, -(-count // SOFTWARE_PER_THREAD_REDUCE)), "stepped"
        if columns:
            chunks = max(1, -(-count // REDUCE_SPAN), min(count // COLUMN_MIN_SPAN, -(-COLUMN_THREADS // n_out)))
            return chunks, "stepped"
        chunks = max(1, -(-count // REDUCE_SPAN), min(-(-count // REDUCE_MIN_SPAN), -(-REDUCE_GROUPS // max(1, n_out))))
        return chunks, "per_thread" if chunks == 1 and count <= PER_THREAD_REDUCE else "main"

    def _reduce_pass(self, op, x, kept, dims, out_dtype, n_out, count, chunks, form, picked=None):
        """One dispatch of shaders/reduce.wgsl in `form` (_plan): `chunks` workgroups or threads per
        output, each reducing up to REDUCE_SPAN of the `count` positions (reduced indices, or the
        chunks' picked indices)."""
        storage = self._empty((n_out * chunks,), out_dtype)
        if n_out == 0:
            return storage
        kernel = _reduce_pass_kernel(op, x.dtype, x.shape, x.strides, kept, dims, out_dtype, n_out, count, chunks,
                                     picked is not None, form)
        storages = [storage, x.storage] if picked is None else [storage, x.storage, picked]
        self.runtime.dispatch(self.runtime.pipeline(*kernel.compile), storages, kernel.pack([x.offset]),
                              kernel.groups)
        return storage


def _in_runs(op, x, kept, dims, n_red):
    """Whether reduce.wgsl's runs form takes this reduction in one pass: a float32 one (not an arg op) of at
    most RUN_SPAN elements an output, which lie in runs (_runs) of whole vec4s: the runs' length and
    stride, x's offset and its kept dims' strides multiples of 4."""
    if op.arg or x.dtype is not dtypes.float32 or n_red > RUN_SPAN or x.offset % 4:
        return False
    runs = _runs([(x.shape[d], x.strides[d]) for d in dims])
    return (runs is not None and runs[0][1] % 4 == 0 and runs[1][0] % 4 == 0
            and all(x.strides[d] % 4 == 0 for d in kept if x.shape[d] > 1))


def _runs(reduced):
    """The reduced dims' (size, stride) pairs as two, [(runs, their stride), (a run's length, 1)], where
    they merge (_merged) into that; else None."""
    merged = _merged([(size, stride) for size, stride in reduced if size != 1]) or [(1, 1)]
    merged = [(1, 0)] * (2 - len(merged)) + merged
    return merged if len(merged) == 2 and merged[1][1] == 1 else None


def _down_columns(x, kept, dims, n_out, n_red):
    """Whether adjacent outputs lie side by side in x and each one's elements a row apart: a thread
    per output reads x in runs of adjacent elements, a workgroup per output a value per memory sector."""
    return (bool(kept) and x.strides[kept[-1]] == 1 and n_out >= REDUCE_THREADS and n_out * n_red >= COLUMN_FROM
            and all(x.strides[d] > 1 for d in dims if x.shape[d] > 1))


class _ReducePass(NamedTuple):
    """What a reduce pass works out once for its key: runtime.pipeline's arguments, its parameter
    packer and its workgroups."""
    compile: tuple
    pack: object   # [x's offset] -> the parameter words
    groups: int


@functools.lru_cache(maxsize=REDUCE_PASSES_KEPT)
def _reduce_pass_kernel(op, in_dtype, shape, strides, kept, dims, out_dtype, n_out, count, chunks, picked, form):
    """The _ReducePass of these arguments: all of a pass but x's storage and offset follows from them
    (form: ReduceKernels._plan's)."""
    entry = _entry(form)
    key = ("reduce", op.name, in_dtype.name, out_dtype.name, picked, form)
    reduced = [(shape[d], strides[d]) for d in dims]
    if form == "stepped":   # its runs as long as x allows: dims that step through x as one, merged
        reduced = _merged(reduced)
    elif form == "runs":
        reduced = _runs(reduced)
    pack = REDUCE_PARAMS.packer(
        outputs=n_out, count=count, chunks=chunks, span=-(-count // chunks), kept_ndim=len(kept),
        reduced_ndim=len(reduced), kept_shape=[shape[d] for d in kept], kept_strides=[strides[d] for d in kept],
        reduced_shape=[size for size, _ in reduced], reduced_strides=[stride for _, stride in reduced])
    bindings = ("read_write", "read", "read") if picked else ("read_write", "read")
    return _ReducePass((key, lambda: _reduce_source(op, in_dtype, out_dtype, picked, form), entry, bindings), pack,
                       n_out * chunks if entry != "per_thread" else groups(n_out * chunks, REDUCE_THREADS))


def _merged(reduced):
    """(size, stride) of each reduced dim, outermost first, with each dim that continues the one
    before it in x (its stride times its size that one's stride) merged into it."""
    merged = []
    for size, stride in reduced:
        if merged and merged[-1][1] == stride * size:
            merged[-1] = (merged[-1][0] * size, stride)
        else:
            merged.append((size, stride))
    return merged


def _entry(form):
    """The shaders/reduce.wgsl entry point of a pass's form."""
    return form if form in ("main", "runs") else "per_thread"


def reduce_producer(key, block):
    """A recorded pass of a float32 sum (its pipeline's key, its parameter bytes) as an epilogue's
    Producer, or None: the maps fused into a store compute on f32 results."""
    _, op_name, in_name, out_name, picked, form = key
    if op_name != SUM.name or out_name != "float32" or picked:
        return None
    head = struct.unpack_from(f"<{len(REDUCE_PARAMS.scalars)}I", block)
    fields = dict(zip((f.name for f in REDUCE_PARAMS.scalars), head))
    arrays = 2 * (fields["reduced_ndim"] + fields["kept_ndim"]) + 1   # shapes and strides, then the offset
    words = struct.unpack_from(f"<{len(head) + arrays}I", block)
    in_dtype = getattr(dtypes, in_name)
    return Producer(key, _entry(form), words, fields["outputs"] * fields["chunks"],
                    lambda epilogue: _reduce_source(SUM, in_dtype, dtypes.float32, False, form, epilogue))


# The stepped form's round: STEP_LOADS loads a step apart, then their merges in order.
_STEP_ROUND = "\n".join(
    [f"                let v{u} = load(at + {u}u * step);" for u in range(STEP_LOADS)]
    + [f"                mine = merge(mine, Partial(v{u}, k + {u}u), 0u);" for u in range(STEP_LOADS)])

# The runs form's round: RUN_LOADS loads, each thread's next place worked out after each, then their sums.
_RUN_ROUND = "\n".join(
    [f"        let v{u} = load4(base4 + c.run * stride4 + c.at);\n"
     f"        c = next_load(c, first, lanes, per, run4);" for u in range(RUN_LOADS)]
    + [f"        mine = merge4(mine, v{u});" for u in range(RUN_LOADS)])


def _reduce_source(op, in_dtype, out_dtype, picked, form, epilogue=None):
    compute = "f32" if in_dtype.is_floating_point else "i32"
    runs = form == "runs"   # x bound as vec4s
    own = [("read_write", "out", out_dtype.stored), ("read", "x", "vec4<f32>" if runs else in_dtype.stored)]
    if picked:
        own.append(("read", "picked", "i32"))
        index = "let c = picked[o * params.count + k];\n        if (c < 0) { continue; }\n        let j = u32(c);"
    else:
        index = "let j = k;"
    return fill("reduce", ParamBlock(*REDUCE_PARAMS.fields, *epilogue_fields(epilogue)), includes=("workgroup",),
                threads=str(RUN_THREADS if runs else REDUCE_THREADS), compute=compute,
                stepped=str(form == "stepped" and not picked).lower(),
                load="x[at / 4u][at % 4u]" if runs else f"T({load(in_dtype, 'x', 'at')})",
                load4="x[at]" if runs else f"vec4<T>({', '.join(f'load(4u * at + {k}u)' for k in range(4))})",
                run_loads=str(RUN_LOADS), run_round=_RUN_ROUND, step_loads=str(STEP_LOADS), step_round=_STEP_ROUND,
                lowest=LOWEST[compute], highest=HIGHEST[compute],
                identity=op.identity, combine=op.combine, out_type=out_dtype.stored,
                result="i32(r.index)" if op.arg else f"{out_dtype.stored}(r.value)", index=index,
                bindings=bindings(own, epilogue), epilogue=store_function(epilogue, out_dtype.stored))
