// Scaled dot-product attention, fused ("flash" style): softmax(q k^T * scale + mask) v without the
// (L, S) score matrix in memory. Three entry points, each a workgroup per (batch, block of ROWS rows),
// one thread per row (kernels/attention.py's _attention_entries writes them, unrolled per head size):
// forward: rows are queries. Each tile of TILE keys (and their values) is staged in workgroup
//          memory; each query's scores of the tile, key by key, feed an online softmax (a running
//          max and sum, the output rescaled as the max grows). Writes out (*B, L, Ev) and each
//          query's log-sum-exp lse (*B, L) after it, at `lse_at`, for the backward.
// dq: rows are queries. D = rowsum(dout * out) first (written with lse as (lse, D) pairs at
//          `stats_at`, after dq, for dkv); then over key tiles p = exp(s - lse) (recomputed),
//          ds = p * (dout . v - D), dq = scale * sum ds k.
// dkv: rows are keys, over tiles of TILE queries (with their (lse, D)): dv = sum p dout,
//          dk = scale * sum ds q. Writes dk (*B, S, E), then dv (*B, S, Ev) at `dv_at`.
// A thread's own vectors (its row of q/k, v/dout, and its accumulators) are NQ (NV) named vec4s,
// never indexed arrays: an array indexed in a loop is placed in (slow) local memory by GPU drivers'
// compilers. Every thread reads the same staged row at once (a broadcast).
// Masked scores are -inf (by bits: compilers may assume finite maths) and their p is 0; a query
// with every key masked gets out 0 and no gradient (lse -inf), as torch.
// Parameters (kernels/attention.py's ATTENTION_PARAMS): `batch` rows of the `dims` - 2 leading dims
// `shape` (then L, S); `queries` L, `keys` S, `head` E, `value_head` Ev; q, k, v, mask and dout are
// read through their `dims` strides from `offsets` (q, k, v, mask, dout); `mask_kind` 0 none, 1 bool
// (True attends), 2 float (added); `causal` 1: key s only for queries l >= s; `scale`.
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> q: array<f32>;
@group(0) @binding(3) var<storage, read> k: array<f32>;
@group(0) @binding(4) var<storage, read> v: array<f32>;
@group(0) @binding(5) var<storage, read> mask: array<u32>;    // bool words or f32 bits (none: q again, unread)
@group(0) @binding(6) var<storage, read> dout: array<f32>;    // dq, dkv: out's gradient
@group(0) @binding(7) var<storage, read> saved: array<f32>;   // dq: forward's out and lse; dkv: dq's (lse, D)

const ROWS: u32 = {{rows}}u;           // rows (threads) per workgroup (ATTENTION_ROWS)
const TILE: u32 = {{tile}}u;           // rows of the other side staged at once
const NQ: u32 = {{nq}}u;               // vec4s of a q/k row (E <= 4 * NQ)
const NV: u32 = {{nv}}u;               // vec4s of a v row (Ev <= 4 * NV)
const MASKED: u32 = 0xff800000u;       // -inf's bits

// TILE * (NQ + NV) vec4s and TILE pairs: within WebGPU's 16 KiB (kernels/attention.py picks TILE).
var<workgroup> tile_e: array<vec4<f32>, TILE * NQ>;    // keys (forward, dq) or queries (dkv)
var<workgroup> tile_v: array<vec4<f32>, TILE * NV>;    // values (forward, dq) or out's gradient (dkv)
var<workgroup> tile_stats: array<vec2<f32>, TILE>;     // dkv: the tile's queries' (lse, D)

// Where an operand's batch starts, and its strides along rows and dims (read once per thread).
struct Operand {
    start: u32,
    row: u32,
    col: u32,
}

struct Place {
    batch: u32,
    row: u32,     // this thread's row (query or key)
    live: bool,   // row < `rows` (the whole workgroup runs to the end: barriers)
    q: Operand,
    k: Operand,
    v: Operand,
    mask: Operand,
    dout: Operand,
}

// The workgroup's batch and first row (kept apart from Place: barriers' loop bounds must be seen
// to be the same in every thread).
fn block(wg: vec3<u32>, nwg: vec3<u32>, rows: u32) -> vec2<u32> {
    let blocks = (rows + ROWS - 1u) / ROWS;
    let id = flat_id(wg, nwg);
    return vec2<u32>(id / blocks, (id % blocks) * ROWS);
}

fn place(wg: vec3<u32>, nwg: vec3<u32>, li: u32, rows: u32) -> Place {
    let b = block(wg, nwg, rows);
    let row = params.dims - 2u;
    let col = params.dims - 1u;
    var at = Place(min(b.x, params.batch - 1u), b.y + li, false,
                   Operand(params_offsets(0u), params_q_strides(row), params_q_strides(col)),
                   Operand(params_offsets(1u), params_k_strides(row), params_k_strides(col)),
                   Operand(params_offsets(2u), params_v_strides(row), params_v_strides(col)),
                   Operand(params_offsets(3u), params_mask_strides(row), params_mask_strides(col)),
                   Operand(params_offsets(4u), params_dout_strides(row), params_dout_strides(col)));
    at.live = at.row < rows && b.x < params.batch;
    var rest = at.batch;
    for (var d = row; d > 0u; d--) {
        let size = params_shape(d - 1u);
        let pos = rest % size;
        rest /= size;
        at.q.start += pos * params_q_strides(d - 1u);
        at.k.start += pos * params_k_strides(d - 1u);
        at.v.start += pos * params_v_strides(d - 1u);
        at.mask.start += pos * params_mask_strides(d - 1u);
        at.dout.start += pos * params_dout_strides(d - 1u);
    }
    return at;
}

fn element(x: Operand, row: u32, d: u32) -> u32 {
    return x.start + row * x.row + d * x.col;
}

fn q_at(at: Place, row: u32, d: u32) -> f32 {
    return q[element(at.q, row, d)];
}

fn k_at(at: Place, row: u32, d: u32) -> f32 {
    return k[element(at.k, row, d)];
}

fn v_at(at: Place, row: u32, d: u32) -> f32 {
    return v[element(at.v, row, d)];
}

fn dout_at(at: Place, row: u32, d: u32) -> f32 {
    return dout[element(at.dout, row, d)];
}

// The score of (query, key) from scale * q.k: -inf where masked (or outside the rows), else plus the
// float mask.
fn score(at: Place, query: u32, key: u32, dot: f32) -> f32 {
    let s = dot * params.scale;
    let masked = f32_from_bits(MASKED);
    if (query >= params.queries || key >= params.keys || (params.causal == 1u && key > query)) {
        return masked;
    }
    if (params.mask_kind == 0u) {
        return s;
    }
    let word = mask[element(at.mask, query, key)];
    if (params.mask_kind == 1u) {
        return select(masked, s, word != 0u);
    }
    return s + bitcast<f32>(word);
}

fn is_masked(s: f32) -> bool {
    return bitcast<u32>(s) == MASKED;
}

// Stages rows start .. start + TILE of k (or q) and v (or dout) in tile_e and tile_v, zero past
// the end (`count` rows) and past the head sizes.
fn load_tiles(at: Place, li: u32, start: u32, count: u32, rows_are_keys: bool) {
    for (var i = li; i < TILE * NQ * 4u; i += ROWS) {
        let row = start + i / (NQ * 4u);
        let d = i % (NQ * 4u);
        var value = 0.0;
        if (row < count && d < params.head) {
            if (rows_are_keys) {
                value = k_at(at, row, d);
            } else {
                value = q_at(at, row, d);
            }
        }
        tile_e[i / 4u][i % 4u] = value;
    }
    for (var i = li; i < TILE * NV * 4u; i += ROWS) {
        let row = start + i / (NV * 4u);
        let d = i % (NV * 4u);
        var value = 0.0;
        if (row < count && d < params.value_head) {
            if (rows_are_keys) {
                value = v_at(at, row, d);
            } else {
                value = dout_at(at, row, d);
            }
        }
        tile_v[i / 4u][i % 4u] = value;
    }
}

// Dims 4 i .. 4 i + 3 of the thread's own row of q (0), k (1), v (2) or dout (3); 0 past the head
// size (or where the row is past the end).
fn own4(at: Place, which: u32, i: u32) -> vec4<f32> {
    var r = vec4<f32>();
    let size = select(params.head, params.value_head, which >= 2u);
    for (var c = 0u; c < 4u; c++) {
        let d = 4u * i + c;
        if (at.live && d < size) {
            switch (which) {
                case 0u: { r[c] = q_at(at, at.row, d); }
                case 1u: { r[c] = k_at(at, at.row, d); }
                case 2u: { r[c] = v_at(at, at.row, d); }
                default: { r[c] = dout_at(at, at.row, d); }
            }
        }
    }
    return r;
}

fn hsum(x: vec4<f32>) -> f32 {
    return (x.x + x.y) + (x.z + x.w);
}

// One past the last key that the queries from `first` on attend.
fn keys_end(first: u32) -> u32 {
    return select(params.keys, min(params.keys, first + ROWS), params.causal == 1u);
}

{{entries}}

// Writes x's dims 4 i .. 4 i + 3 (those below `size`) to out from `base`.
fn put4(base: u32, size: u32, i: u32, x: vec4<f32>) {
    for (var c = 0u; c < 4u; c++) {
        let d = 4u * i + c;
        if (d < size) {
            out[base + d] = x[c];
        }
    }
}

// Dims 4 i .. 4 i + 3 of saved from `base` (0 past `size`, or where the row is not live).
fn saved4(live: bool, base: u32, size: u32, i: u32) -> vec4<f32> {
    var r = vec4<f32>();
    for (var c = 0u; c < 4u; c++) {
        let d = 4u * i + c;
        if (live && d < size) {
            r[c] = saved[base + d];
        }
    }
    return r;
}
