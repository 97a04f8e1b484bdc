"""The attention family (shaders/attention.wgsl): scaled dot-product attention, fused (FlashAttention-2's
structure): one dispatch forward; three backward (delta, then dk and dv over key blocks, then dq over
query blocks: WGSL has no float atomics to share one pass)."""
import math
from typing import NamedTuple

from .... import dtypes
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

Q, K, V, DOUT = range(4)   # shaders/attention.wgsl's operand numbers


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


# ---- the entry points, written out per head size (shaders/attention.wgsl says what each computes) ----


def _operand(which):
    """fetch()'s arguments for operand `which`: its number, its batch's start and its strides."""
    name = ("q", "k", "v", "dout")[which]
    return f"{which}u, at.{name}.start, vec2(at.{name}.row, at.{name}.col)"


def _score(query, key, dot):
    """The masked, scaled score of (query, key) from their dot product (WGSL expressions)."""
    mask_at = f"at.mask.start + ({query}) * at.mask.row + ({key}) * at.mask.col"
    return f"score({query}, {key}, {dot} * params.scale, {mask_at})"


def _product(name, own, other, n4, own_rows, other_rows, tiles):
    """name{i}{j}: own row i . tile row j of operands `own` and `other` over n4 vec4s, staged CHUNK
    vec4s at a time; each thread fetches its share of the next chunk into registers while the
    current one is used (only the first chunk waits for global memory; holding the next product's
    or tile's first chunk across the tile as well measured no faster on the H100). own_rows,
    other_rows: (first row, row count) as WGSL expressions."""
    mine, theirs = range(tiles.own_each), range(tiles.other_each)
    lines = [f"{name}{i}{j} = 0.0;" for i in mine for j in theirs]
    sides = [("a", own, own_rows, "OWN", "A_AT", tiles.own), ("b", other, other_rows, "OTHER", "B_AT", tiles.other)]
    fetches = [(f"{name}_{side}{u}", f"li + {u}u * THREADS", which, ", ".join(rows), size, at)
               for side, which, rows, size, at, count in sides for u in range(-(-count * tiles.chunk // tiles.threads))]

    def fetch(d0):
        return [f"{reg} = fetch({i}, {_operand(which)}, {rows}, {size}, {d0}, CHUNK);"
                for reg, i, which, rows, size, _ in fetches]
    lines += [f"var {reg} = vec4<f32>();" for reg, *_ in fetches] + fetch("0u")
    lines += [f"for (var d0 = 0u; d0 < {n4}u; d0 += CHUNK) {{"]
    lines += [f"    put({i}, {at}, {size}, CHUNK, CHUNK + 1u, {reg});" for reg, i, _, _, size, at in fetches]
    lines += ["    workgroupBarrier();", f"    if (d0 + CHUNK < {n4}u) {{"]
    lines += ["        " + line for line in fetch("d0 + CHUNK")] + ["    }", "    for (var d = 0u; d < CHUNK; d++) {"]
    lines += [f"        let a{i} = scratch[A_AT + (r + {i}u * RG) * (CHUNK + 1u) + d];" for i in mine]
    lines += [f"        let b{j} = scratch[B_AT + (c + {j}u * GROUPS) * (CHUNK + 1u) + d];" for j in theirs]
    lines += [f"        {name}{i}{j} += dot(a{i}, b{j});" for i in mine for j in theirs]
    return lines + ["    }", "    workgroupBarrier();", "}"]


def _tile_fetch(name, operand, other_rows, tiles):
    """The thread's share of the whole tile of `operand` (rows other_rows, PARTS slices of XW vec4s),
    fetched into registers tile_{name}{p}_{u} for _weights and _accumulate. Fetched before a tile's
    products (forward, dq), its wait hides behind them (H100: forward -14%, dq the same); dkv fetches
    each of its two tiles just before _weights (ahead of its products it measured 2% slower: more
    registers held through both)."""
    return [f"let tile_{name}{p}_{u} = fetch(li + {u}u * THREADS, {_operand(operand)}, {other_rows[0]}, "
            f"{other_rows[1]}, OTHER, {p}u * XW, XW);" for p in range(tiles.parts) for u in range(_tile_shares(tiles))]


def _tile_shares(tiles):
    """vec4s of a tile's slice per thread."""
    return -(-tiles.other * tiles.xw // tiles.threads)


def _put_tile(tile, part, tiles):
    return [f"put(li + {u}u * THREADS, X_AT, OTHER, XW, XW, tile_{tile}{part}_{u});"
            for u in range(_tile_shares(tiles))]


def _weights(name, tile, tiles):
    """Shares the thread's weights name{i}{j} through workgroup memory and puts the first slice of the
    tile that they weigh (_tile_fetch's tile_{tile}) in scratch, then waits for the workgroup."""
    lines = [f"scratch[W_AT + (c + {j}u * GROUPS) * (OWN / 4u) + {h}u * RG + r] = "
             f"vec4({', '.join(f'{name}{i}{j}' for i in range(4 * h, 4 * h + 4))});"
             for j in range(tiles.other_each) for h in range(tiles.own_each // 4)]
    return lines + _put_tile(tile, 0, tiles) + ["workgroupBarrier();"]


def _accumulate(acc, count, tile, tiles):
    """acc{i}_{m} += sum over the tile of weight (i, j) * the tile row j's vec4 c + m GROUPS, a staged
    slice of the tile (_weights' first, then each next) at a time."""
    per = tiles.xw // (tiles.other // tiles.other_each)   # a slice's vec4s a thread accumulates
    lines = []
    for part in range(tiles.parts):
        mine = range(part * per, min(count, (part + 1) * per))
        if not mine:
            break
        if part:
            lines += _put_tile(tile, part, tiles) + ["workgroupBarrier();"]
        lines += ["for (var j = 0u; j < OTHER; j++) {"]
        lines += [f"    let w{h} = scratch[W_AT + j * (OWN / 4u) + {h}u * RG + r];" for h in range(tiles.own_each // 4)]
        lines += [f"    let x{m} = scratch[X_AT + j * XW + c + {m - part * per}u * GROUPS];" for m in mine]
        lines += [f"    {acc}{i}_{m} = fma(vec4(w{i // 4}[{i % 4}]), x{m}, {acc}{i}_{m});"
                  for i in range(tiles.own_each) for m in mine]
        lines += ["}", "workgroupBarrier();"]
    return lines


def _store(acc, count, rows, target, size, factor, tiles):
    """Writes acc{i}_{m} * factor for the thread's own rows below `rows` through Operand at.{target}."""
    lines = []
    for i in range(tiles.own_each):
        lines += [f"if (first + r + {i}u * RG < {rows}) {{",
                  f"    let base = at.{target}.start + (first + r + {i}u * RG) * at.{target}.row;"]
        lines += [f"    put4(base, {size}, c + {m}u * GROUPS, {acc}{i}_{m} * {factor});" for m in range(count)]
        lines += ["}"]
    return lines


def _declare(tiles, *names, count=0):
    """Scalars name{i}{j} (count 0) or vec4 accumulators name{i}_{m}, m < count."""
    mine = range(tiles.own_each)
    if not count:
        return [f"var {n}{i}{j} = 0.0;" for n in names for i in mine for j in range(tiles.other_each)]
    return [f"var {n}{i}_{m} = vec4<f32>();" for n in names for i in mine for m in range(count)]


def _tree(op, terms):
    """terms combined pairwise, as a balanced tree (op: 'max' or 'add'), a WGSL expression."""
    while len(terms) > 1:
        pairs = [terms[n:n + 2] for n in range(0, len(terms), 2)]
        terms = [(f"max({p[0]}, {p[1]})" if op == "max" else f"({p[0]} + {p[1]})") if len(p) == 2 else p[0]
                 for p in pairs]
    return terms[0]


def _entry_body(entry, nq, nv, tiles):
    mq, mv = (-(-n // (tiles.other // tiles.other_each)) for n in (nq, nv))
    mine, theirs = range(tiles.own_each), range(tiles.other_each)
    own_row = [f"first + r + {i}u * RG" for i in mine]
    tile_row = [f"start + c + {j}u * GROUPS" for j in theirs]
    rows = "params.keys" if entry == "dkv" else "params.queries"
    body = [f"let b = block(wg, nwg, {rows}, OWN);",
            "if (b.x >= params.batch) {", "    return;", "}",
            "let at = place(b.x);", "let first = b.y;", "let r = li / GROUPS;", "let c = li % GROUPS;"]
    if entry == "forward":
        keys, own = ("start", "params.keys"), ("first", "params.queries")
        body += _declare(tiles, "s", "p") + _declare(tiles, "a", count=mv)
        body += [f"var top{i} = LOWEST;" for i in mine] + [f"var total{i} = 0.0;" for i in mine]
        body += ["for (var start = 0u; start < keys_end(first); start += OTHER) {"]
        loop = _tile_fetch("v", V, keys, tiles) + _product("s", Q, K, nq, own, keys, tiles)
        loop += [f"s{i}{j} = {_score(own_row[i], tile_row[j], f's{i}{j}')};" for i in mine for j in theirs]
        for i in mine:   # the tile's max of the thread's part of row i, shared with the row's threads
            unmasked = [f"select(LOWEST, s{i}{j}, !is_masked(s{i}{j}))" for j in theirs]
            loop += [f"row_stats[(r + {i}u * RG) * GROUPS + c] = {_tree('max', unmasked)};"]
        loop += ["workgroupBarrier();"]
        for i in mine:
            loop += [f"let top_{i} = row_max(r + {i}u * RG, top{i});",
                     f"let rescale{i} = exp(top{i} - top_{i});", f"top{i} = top_{i};"]
            loop += [f"a{i}_{m} *= rescale{i};" for m in range(mv)]
            loop += [f"p{i}{j} = select(0.0, exp(s{i}{j} - top{i}), !is_masked(s{i}{j}));" for j in theirs]
            loop += [f"total{i} = total{i} * rescale{i} + {_tree('add', [f'p{i}{j}' for j in theirs])};"]
        loop += _weights("p", "v", tiles) + _accumulate("a", mv, "v", tiles)
        body += ["    " + line for line in loop] + ["}"]
        body += [f"row_stats[(r + {i}u * RG) * GROUPS + c] = total{i};" for i in mine] + ["workgroupBarrier();"]
        body += [f"let sum{i} = row_total(r + {i}u * RG);" for i in mine]
        body += [f"let inverse{i} = select(0.0, 1.0 / sum{i}, sum{i} > 0.0);" for i in mine]
        for i in mine:
            body += [f"a{i}_{m} *= inverse{i};" for m in range(mv)]
        body += _store("a", mv, "params.queries", "out", "params.value_head", "1.0", tiles)
        for i in mine:
            body += [f"if (c == 0u && {own_row[i]} < params.queries) {{",
                     f"    out[params.lse_at + at.batch * params.queries + {own_row[i]}] = "
                     f"select(f32_from_bits(MASKED), top{i} + log(sum{i}), sum{i} > 0.0);", "}"]
    elif entry == "dq":
        keys, own = ("start", "params.keys"), ("first", "params.queries")
        body += _declare(tiles, "s", "dp") + _declare(tiles, "a", count=mq)
        for i in mine:   # the rows' (lse, D) from the delta pass, in this kernel's own buffer
            body += [f"let stat{i} = at.batch * params.queries + min({own_row[i]}, params.queries - 1u);",
                     f"let lse{i} = out[params.stats_at + 2u * stat{i}];",
                     f"let delta{i} = out[params.stats_at + 2u * stat{i} + 1u];"]
        body += ["for (var start = 0u; start < keys_end(first); start += OTHER) {"]
        loop = _tile_fetch("k", K, keys, tiles) + _product("s", Q, K, nq, own, keys, tiles)
        loop += _product("dp", DOUT, V, nv, own, keys, tiles)
        for i in mine:
            for j in theirs:
                loop += [f"s{i}{j} = {_score(own_row[i], tile_row[j], f's{i}{j}')};",
                         f"s{i}{j} = select(0.0, exp(s{i}{j} - lse{i}) * (dp{i}{j} - delta{i}), !is_masked(s{i}{j}));"]
        loop += _weights("s", "k", tiles) + _accumulate("a", mq, "k", tiles)
        body += ["    " + line for line in loop] + ["}"]
        body += _store("a", mq, "params.queries", "out", "params.head", "params.scale", tiles)
    else:
        queries, own = ("start", "params.queries"), ("first", "params.keys")
        body += _declare(tiles, "s", "dp") + _declare(tiles, "dk", count=mq) + _declare(tiles, "dv", count=mv)
        body += ["// causal: the queries before the workgroup's first key attend none of its keys",
                 "for (var start = select(0u, first, params.causal == 1u); start < params.queries; start += OTHER) {"]
        loop = ["for (var j = li; j < OTHER; j += THREADS) {   // the tile's (lse, D) (past the end: masked)",
                "    let query = at.batch * params.queries + min(start + j, params.queries - 1u);",
                "    row_stats[2u * j] = saved[params.stats_at + 2u * query];",
                "    row_stats[2u * j + 1u] = saved[params.stats_at + 2u * query + 1u];",
                "}"]
        loop += _product("s", K, Q, nq, own, queries, tiles) + _product("dp", V, DOUT, nv, own, queries, tiles)
        for j in theirs:
            loop += [f"let lse{j} = row_stats[2u * (c + {j}u * GROUPS)];",
                     f"let delta{j} = row_stats[2u * (c + {j}u * GROUPS) + 1u];"]
            for i in mine:
                loop += [f"s{i}{j} = {_score(tile_row[j], own_row[i], f's{i}{j}')};",
                         f"s{i}{j} = select(0.0, exp(s{i}{j} - lse{j}), !is_masked(s{i}{j}));",
                         f"dp{i}{j} = s{i}{j} * (dp{i}{j} - delta{j});"]
        loop += _tile_fetch("dout", DOUT, queries, tiles) + _weights("s", "dout", tiles)
        loop += _accumulate("dv", mv, "dout", tiles)
        loop += _tile_fetch("q", Q, queries, tiles) + _weights("dp", "q", tiles)
        loop += _accumulate("dk", mq, "q", tiles)
        body += ["    " + line for line in loop] + ["}"]
        body += _store("dk", mq, "params.keys", "out", "params.head", "params.scale", tiles)
        body += _store("dv", mv, "params.keys", "dv", "params.value_head", "1.0", tiles)
    return body


def _attention_source(entry, nq, nv, tiles, rows_entry=False, lanes=DELTA_LANES):
    """shaders/attention.wgsl with the entry point `entry` written out for heads of nq (q, k) and nv
    (v) vec4s, blocked as `tiles`; rows_entry: shaders/attention_rows.wgsl's instead (a thread per row);
    lanes: delta's threads per query."""
    entries = ""
    if rows_entry:
        entries = shader("attention_rows").replace("{{row_head}}", str(ATTENTION_MAX_HEAD))
    elif entry != "delta":
        head = ["@compute @workgroup_size(THREADS)",
                f"fn {entry}(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,",
                "        @builtin(local_invocation_index) li: u32) {"]
        entries = "\n".join(head + ["    " + line for line in _entry_body(entry, nq, nv, tiles)] + ["}"])
    slots = {name: str(value) for name, value in tiles._asdict().items()}
    return fill("attention", ATTENTION_PARAMS, entries=entries, lanes=str(lanes), **slots)


def _mask_storage(q, mask):
    """The mask's binding: its storage, or q's where there is none (bound, never read)."""
    return q.storage if mask is None else mask.storage
