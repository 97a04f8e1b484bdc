"""The attention family (shaders/attention.wgsl): scaled dot-product attention, fused (FlashAttention-2's
structure): one dispatch forward; three backward (delta, then dk and dv over key blocks, then dq over
query blocks: WGSL has no float atomics to share one pass); and, for attention that keeps its weights
on a GPU (ops/attention.py's _KeptWeights), the softmax of its scores and that softmax's gradient, in
place (the weights entries). kernels/attention_entries.py writes out the tiled entries."""
import functools
import math
from typing import NamedTuple

from .... import dtypes
from ...base import contiguous_strides
from .attention_entries import entry_body, weights_body
from .common import check_gpu_dtype, fill, shader
from .params import ParamBlock, f32, u32

# Past ATTENTION_MAX_HEAD dims a thread's accumulators outgrow its registers: the op composes
# attention there.
ATTENTION_MAX_HEAD = 128
WORKGROUP_BYTES = 16384   # WebGPU's default maxComputeWorkgroupStorageSize (the page's)
OTHER_ROWS = (32, 16, 8)  # the tiles' rows tried, largest first (bench/attention.py compares them)
DELTA_LANES = 8           # the delta entry's threads per query


class Blocking(NamedTuple):
    """A thread's block of a tile's scores, own_each of the workgroup's own rows (a multiple of 4) by
    other_each of the tile's rows; the threads of a workgroup; the weighed tile staged in up to
    `parts` slices of its columns, one after the other (less workgroup memory, two barriers more a
    slice)."""
    own_each: int
    other_each: int
    threads: int
    parts: int = 1


# Each entry's blockings on a GPU, preferred first (bench/attention.py --blocking compares others; H100,
# heads of 64: the forward of 128 threads with the weighed tile in two slices 0.44 -> 0.36 ms, dkv and
# dq slower so; bench/NOTES.md). A blocking before the last is taken only where its tiles of 32 rows fit
# WebGPU's default 16 KiB (heads up to 64: where it was measured).
BLOCKINGS = {"forward": (Blocking(4, 4, 128, 2), Blocking(4, 4, 64)), "delta": (Blocking(4, 4, 64),),
             "dkv": (Blocking(4, 4, 64),), "dq": (Blocking(4, 4, 64),)}
# A software adapter (lavapipe, SwiftShader: a CPU running each invocation as a SIMD lane) ran that
# forward 2x slower: there every entry keeps 64 threads.
SOFTWARE_BLOCKINGS = (Blocking(4, 4, 64),)


# On a software adapter, forward, dkv and dq run a thread per own row instead (shaders/attention_rows.wgsl:
# no workgroup memory, no barriers, which switch between its coroutines: the page's small GPT spent 48%
# of its step on SwiftShader in the tiled entries, bench/NOTES.md), and delta a thread per query.
SOFTWARE_ROW_ENTRIES = ("forward", "dkv", "dq")
SOFTWARE_DELTA_LANES = 1


# On a GPU, attention keeps its (L, S) weights (ops/attention.py's _KeptWeights: the tuned batched
# products around the weights entries) where they take at most KEPT_WEIGHTS_BYTES: the six products run
# dense, twice the causal work, yet faster than the fused kernels, which workgroup-memory reads and
# occupancy bound (H100, causal, forward + backward replayed: (64, 6, 256, 64) 1.09 against 1.56 ms of
# GPU, (8, 8, 1024, 64) 3.03 against 3.52; bench/NOTES.md). Past the budget (long sequences) the fused
# kernels keep memory linear in L. Under KEPT_MIN_KEYS keys the fused kernels stay: launch-bound
# there, their four dispatches were as fast as the kept path's eight ((32, 4, 64, 32): 0.078 against
# 0.088 ms; 128 keys not measured). Software adapters (the page) keep the fused kernels. Eagerly too:
# each call's weights come from the buffer pool and its dq, dk and dv pass through copies that a replay
# fuses away, yet the GPT large config's eager step ran 0.845 of PyTorch eager so against 0.760 with the
# fused kernels (once the native driver made its bind groups through wgpu-native's C call; before, the
# kept path's ~160 new bind groups a step cost 9 ms of host and the two tied, bench/NOTES.md).
KEPT_WEIGHTS_BYTES = 256 << 20
KEPT_MIN_KEYS = 256
# The weights entries hold a row in registers: WEIGHTS_LANES threads a query holding WEIGHTS_REGS keys
# each, more lanes for longer rows up to WebGPU's 256 invocations a workgroup, then more keys a thread
# up to WEIGHTS_MOST_REGS; longer rows keep the fused kernels (KEPT_MAX_KEYS).
WEIGHTS_LANES = 16
WEIGHTS_REGS = 16
WEIGHTS_MOST_LANES = 256
WEIGHTS_MOST_REGS = 32
KEPT_MAX_KEYS = WEIGHTS_MOST_LANES * WEIGHTS_MOST_REGS


def weights_blocking(keys):
    """(lanes, regs, threads): the weights entries' threads a query, keys a thread and threads a
    workgroup (at least 64) for rows of `keys` keys (rounded up to a power of two: few pipelines)."""
    span = 1 << max(keys - 1, 0).bit_length()
    lanes = min(WEIGHTS_MOST_LANES, max(WEIGHTS_LANES, span // WEIGHTS_REGS))
    return lanes, max(1, span // lanes), max(64, lanes)


def entry_blockings(entry, is_software):
    """The blockings `entry` tries, preferred first, on a software adapter or a GPU."""
    return SOFTWARE_BLOCKINGS if is_software else BLOCKINGS[entry]

# The kernels' parameters (their meanings: shaders/attention.wgsl).
ATTENTION_PARAMS = ParamBlock(
    u32("batch"), u32("dims"), u32("queries"), u32("keys"), u32("head"), u32("value_head"), f32("scale"),
    u32("mask_kind"), u32("causal"), u32("lse_at"), u32("stats_at"), u32("dv_at"),
    u32("shape", "dims"), u32("q_strides", "dims"), u32("k_strides", "dims"), u32("v_strides", "dims"),
    u32("mask_strides", "dims"), u32("dout_strides", "dims"), u32("out_strides", "dims"), u32("dv_strides", "dims"),
    u32("offsets", 5))

class Tiles(NamedTuple):
    """A workgroup's blocking: `threads` threads of own_each x other_each scores each; OWN rows of its
    own, OTHER rows of the other side per tile, products over the head CHUNK vec4s at a time, the
    weighed tile staged in PARTS slices XW vec4s wide; SCRATCH vec4s and STATS floats of workgroup
    memory."""
    threads: int
    own_each: int
    other_each: int
    own: int
    other: int
    chunk: int
    xw: int
    parts: int
    scratch: int
    stats: int

    def bytes(self):
        return 16 * self.scratch + 4 * self.stats


@functools.lru_cache(maxsize=None)   # (a search; an eager attention call asks for it a dispatch)
def attention_tiles(nq, nv, workgroup_bytes=WORKGROUP_BYTES, blockings=SOFTWARE_BLOCKINGS):
    """The tiles for heads of nq (q, k) and nv (v) vec4s: of the first of `blockings` whose tiles of
    OTHER_ROWS[0] rows fit WebGPU's default 16 KiB, else of the last, by _largest_tiles."""
    *preferred, last = blockings
    for blocking in preferred:
        tiles = _largest_tiles(nq, nv, min(WORKGROUP_BYTES, workgroup_bytes), blocking, OTHER_ROWS[:1])
        if tiles:
            return tiles
    tiles = _largest_tiles(nq, nv, workgroup_bytes, last, OTHER_ROWS)
    if not tiles:
        raise ValueError(f"attention: no tiles of {last} fit {workgroup_bytes} bytes for heads of {4 * max(nq, nv)}")
    return tiles


def _largest_tiles(nq, nv, workgroup_bytes, blocking, other_rows):
    """The largest tiles (other_rows rows, largest first) of `blocking`, in the least workgroup memory
    that holds them: WebGPU's default 16 KiB, else the adapter's workgroup_bytes (tiles of 32 rows need
    more past heads of 64); then the fewest passes of a product over the head that fit; None where
    none fit. More memory than the tiles need lowers occupancy: on the H100, heads of 64 kept resident
    beside the tiles (31 KiB) ran the backward 2.2x slower; 7 KiB held unused beside 13 KiB, 1.3x."""
    widest = max(nq, nv)
    own_each, other_each, threads, most_parts = blocking
    budgets = sorted({min(WORKGROUP_BYTES, workgroup_bytes), workgroup_bytes})
    for other in other_rows:
        groups = other // other_each
        if other % other_each or threads % groups:
            continue
        own = threads // groups * own_each
        per = -(-widest // groups)   # vec4s of a staged row a thread accumulates
        parts = max(p for p in range(1, most_parts + 1) if per % p == 0)
        xw = per // parts * groups
        stats = max(own * groups, 2 * other)
        # the weights and the whole tile, or (while a product runs) both sides' chunks, padded a vec4
        sizes = {chunk: max(own * other // 4 + other * xw, (own + other) * (chunk + 1))
                 for chunk in range(1, min(16, widest) + 1)}
        for budget in budgets:
            fitting = [chunk for chunk, vec4s in sizes.items() if 16 * vec4s + 4 * stats <= budget]
            if fitting:
                passes = -(-widest // fitting[-1])
                chunk = -(-widest // passes)
                return Tiles(threads, own_each, other_each, own, other, chunk, xw, parts, sizes[chunk], stats)
    return None


class AttentionKernels:
    attention_max_head = ATTENTION_MAX_HEAD
    attention_layouts = True   # out, dq, dk and dv written through the strides the op gives

    def attention(self, q, k, v, mask, causal, scale, layouts):
        """layouts: the strides of out, dq, dk and dv (ops/attention.py's; the forward uses out's)."""
        check_gpu_dtype(q.dtype, "attention of")
        batch, queries = math.prod(q.shape[:-2]), q.shape[-2]
        numel = batch * queries * v.shape[-1]
        saved = self._empty((numel + batch * queries,), q.dtype)   # out, then lse
        # dout and saved are bound (q again), unread
        inputs = [q.storage, k.storage, v.storage, _mask_storage(q, mask), q.storage, q.storage]
        self._attention("forward", [saved, *inputs], q, k, v, mask, None, causal, scale, layouts[0], lse_at=numel)
        return saved

    def attention_keeps_weights(self, batch, queries, keys):
        """Whether attention over `batch` (queries, keys) matrices keeps its weights (KEPT_WEIGHTS_BYTES)."""
        budget = min(KEPT_WEIGHTS_BYTES, self.runtime.max_tensor_bytes)
        return not self.is_software and KEPT_MIN_KEYS <= keys <= KEPT_MAX_KEYS and 4 * batch * queries * keys <= budget

    def attention_softmax(self, scores, mask, causal, scale):
        """In place, the raw products scores = q k^T (a contiguous (*B, L, S) View) become the weights
        softmax(scores * scale + mask) (shaders/attention.wgsl's weights entry); mask: None, or bool or
        float, as attention()'s."""
        self._weights_entry("weights", scores, scores, mask, causal, scale)

    def attention_softmax_backward(self, grad, weights, causal, scale):
        """In place, the weights' gradient grad (contiguous, as the weights View) becomes the raw
        products' times scale: scale * weights * (grad - rowsum(grad * weights)); causal: the weights
        past each query's key are 0 (so are their gradients: not read)."""
        self._weights_entry("weights_backward", grad, weights, None, causal, scale)

    def _weights_entry(self, entry, matrix, read, mask, causal, scale):
        """One dispatch of `entry` over View matrix (in place, its (*B, L, S) rows), reading View `read`."""
        check_gpu_dtype(matrix.dtype, "attention of")
        if matrix.strides != contiguous_strides(matrix.shape) or read.strides != matrix.strides:
            raise ValueError(f"attention's {entry}: needs contiguous weights, got strides {matrix.strides}")
        batch_shape, (queries, keys) = matrix.shape[:-2], matrix.shape[-2:]
        batch = math.prod(batch_shape)
        if not batch * queries * keys:
            return
        unread = (0,) * len(matrix.shape)
        words = ATTENTION_PARAMS.pack(
            batch=batch, dims=len(matrix.shape), queries=queries, keys=keys, head=0, value_head=0, scale=scale,
            mask_kind=0 if mask is None else 1 if mask.dtype is dtypes.bool_ else 2, causal=int(causal), lse_at=0,
            stats_at=0, dv_at=0, shape=matrix.shape, q_strides=unread, k_strides=unread, v_strides=unread,
            mask_strides=unread if mask is None else mask.strides, dout_strides=unread, out_strides=unread,
            dv_strides=unread, offsets=[matrix.offset, read.offset, 0, 0 if mask is None else mask.offset, 0])
        lanes, regs, threads = weights_blocking(keys)
        if regs > WEIGHTS_MOST_REGS:
            raise ValueError(f"attention's {entry}: rows of {keys} keys, over the {KEPT_MAX_KEYS} kept in registers")
        # the template's tile constants: the weights entries use THREADS and row_stats' size alone
        tiles = Tiles(threads=threads, own_each=4, other_each=4, own=4, other=4, chunk=1, xw=1, parts=1,
                      scratch=1, stats=2 * threads)
        pipeline = self.runtime.pipeline(
            ("attention", entry, tiles, lanes, regs),
            lambda: _attention_source(entry, 0, 0, tiles, lanes=lanes, regs=regs), entry=entry,
            bindings=("read_write",) + ("read",) * 6)
        # matrix is bound writable, so no other binding may hold its buffer
        other = read.storage if read is not matrix else self._unread_buffer()
        storages = [matrix.storage, other, other, other, other if mask is None else mask.storage, other, other]
        self.runtime.dispatch(pipeline, storages, words, batch * -(-queries // (threads // lanes)))

    def _unread_buffer(self):
        """A small buffer for bindings that an entry leaves unread."""
        if getattr(self, "_unread", None) is None:
            self._unread = self._empty((4,), dtypes.float32)
        return self._unread

    def attention_backward(self, grad, q, k, v, saved, mask, causal, scale, layouts):
        batch, (queries, head), keys = math.prod(q.shape[:-2]), q.shape[-2:], k.shape[-2]
        inputs = [q.storage, k.storage, v.storage, _mask_storage(q, mask), grad.storage]
        dq_numel, dk_numel = batch * queries * head, batch * keys * head
        dq = self._empty((dq_numel + 2 * batch * queries,), q.dtype)   # dq, then the rows' (lse, D)
        dkv = self._empty((dk_numel + batch * keys * v.shape[-1],), q.dtype)   # dk, then dv
        offsets = dict(lse_at=batch * queries * v.shape[-1], stats_at=dq_numel, dv_at=dk_numel)
        out, dq_strides, dk, dv = layouts
        self._attention("delta", [dq, *inputs, saved], q, k, v, mask, grad, causal, scale, out, **offsets)
        self._attention("dkv", [dkv, *inputs, dq], q, k, v, mask, grad, causal, scale, dk, dv, **offsets)
        self._attention("dq", [dq, *inputs, saved], q, k, v, mask, grad, causal, scale, dq_strides, **offsets)
        return dq, dkv

    def _attention(self, entry, storages, q, k, v, mask, grad, causal, scale, out_strides, dv_strides=None,
                   lse_at=0, stats_at=0, dv_at=0):
        """One dispatch of `entry`, a workgroup per (batch, block of rows); q, k, v, mask and grad
        share their leading (batch) dims; out_strides: the entry's output's (delta: the forward's out,
        read), dv_strides: dkv's dv."""
        batch_shape = q.shape[:-2]
        batch = math.prod(batch_shape)
        nq, nv = (-(-size // 4) for size in (q.shape[-1], v.shape[-1]))
        rows = k.shape[-2] if entry == "dkv" else q.shape[-2]
        tiles = attention_tiles(nq, nv, self.runtime.limits["max_compute_workgroup_storage_size"],
                                entry_blockings(entry, self.is_software))
        rows_entry = self.is_software and entry in SOFTWARE_ROW_ENTRIES
        lanes = SOFTWARE_DELTA_LANES if self.is_software else DELTA_LANES
        block = tiles.threads // lanes if entry == "delta" else tiles.threads if rows_entry else tiles.own
        if not batch or not rows:
            return
        dims = len(batch_shape) + 2
        no_mask = (0,) * dims
        words = ATTENTION_PARAMS.pack(
            batch=batch, dims=dims, queries=q.shape[-2], keys=k.shape[-2], head=q.shape[-1], value_head=v.shape[-1],
            scale=scale, mask_kind=0 if mask is None else 1 if mask.dtype is dtypes.bool_ else 2,
            causal=int(causal), lse_at=lse_at, stats_at=stats_at, dv_at=dv_at,
            shape=(*batch_shape, q.shape[-2], k.shape[-2]), q_strides=q.strides, k_strides=k.strides,
            v_strides=v.strides, mask_strides=no_mask if mask is None else mask.strides,
            dout_strides=no_mask if grad is None else grad.strides, out_strides=out_strides,
            dv_strides=no_mask if dv_strides is None else dv_strides,
            offsets=[t.offset if t is not None else 0 for t in (q, k, v, mask, grad)])
        pipeline = self.runtime.pipeline(
            ("attention", entry, nq, nv, tiles, rows_entry, lanes),
            lambda: _attention_source(entry, nq, nv, tiles, rows_entry, lanes),
            entry=entry, bindings=("read_write",) + ("read",) * (len(storages) - 1))
        self.runtime.dispatch(pipeline, storages, words, batch * -(-rows // block))


def _attention_source(entry, nq, nv, tiles, rows_entry=False, lanes=DELTA_LANES, regs=0):
    """shaders/attention.wgsl with the entry point `entry` written out for heads of nq (q, k) and nv
    (v) vec4s, blocked as `tiles`; rows_entry: shaders/attention_rows.wgsl's instead (a thread per row);
    lanes: delta's and the weights entries' threads per query; regs: the weights entries' keys a thread."""
    entries = ""
    if rows_entry:
        entries = shader("attention_rows").replace("{{row_head}}", str(ATTENTION_MAX_HEAD))
    elif entry != "delta":   # (delta is written in the shader)
        body = weights_body(entry, regs) if entry.startswith("weights") else entry_body(entry, nq, nv, tiles)
        head = ["@compute @workgroup_size(THREADS)",
                f"fn {entry}(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,",
                "        @builtin(local_invocation_index) li: u32) {"]
        entries = "\n".join(head + ["    " + line for line in body] + ["}"])
    slots = {name: str(value) for name, value in tiles._asdict().items()}
    return fill("attention", ATTENTION_PARAMS, entries=entries, lanes=str(lanes), **slots)


def _mask_storage(q, mask):
    """The mask's binding: its storage, or q's where there is none (bound, never read)."""
    return q.storage if mask is None else mask.storage
