// Scaled dot-product attention, fused ("flash" style): softmax(q k^T * scale + mask) v without the
// (L, S) score matrix in memory. Three entry points, each a workgroup per (batch, block of ROWS rows):
// forward: rows are queries. Each tile of TILE keys (and their values) is staged in workgroup
//          memory; the queries' scores of the tile feed an online softmax (a running max and sum,
//          the output rescaled as the max grows). Writes out (*B, L, Ev) and each query's
//          log-sum-exp lse (*B, L) after it, at `lse_at`, for the backward.
// dq: rows are queries. D = rowsum(dout * out) first (written with lse as (lse, D) pairs at
//          `stats_at`, after dq, for dkv); then over key tiles p = exp(s - lse) (recomputed),
//          ds = p * (dout . v - D), dq = scale * sum ds k.
// dkv: rows are keys, over tiles of TILE queries (with their (lse, D)): dv = sum p dout,
//          dk = scale * sum ds q. Writes dk (*B, S, E), then dv (*B, S, Ev) at `dv_at`.
// Each row is taken by G threads, thread t holding dims t, t + G, ... of the row's vectors (DQ of
// q/k, DV of v), so a dot product is G partial sums added in workgroup memory (group_sums): few
// registers a thread, and each staged tile serves ROWS rows.
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

const G: u32 = {{threads_per_row}}u;   // threads per row (kernels/attention.py's ATTENTION_THREADS_PER_ROW)
const ROWS: u32 = {{rows}}u;           // rows per workgroup (ATTENTION_ROWS)
const THREADS: u32 = ROWS * G;
const TILE: u32 = G;                   // rows of the other side per tile: thread t adds up row t's sums
const DQ: u32 = {{dq}}u;               // q/k dims per thread (E <= G * DQ)
const DV: u32 = {{dv}}u;               // v dims per thread (Ev <= G * DV)
const EP: u32 = G * DQ;
const VP: u32 = G * DV;
const MASKED: u32 = 0xff800000u;       // -inf's bits

// At most 8 * 128 * 2 + 128 * 8 + 16 words (E = Ev = 128): 12 KiB of WebGPU's 16.
var<workgroup> tile_e: array<f32, TILE * EP>;          // keys (forward, dq) or queries (dkv)
var<workgroup> tile_v: array<f32, TILE * VP>;          // values (forward, dq) or out's gradient (dkv)
var<workgroup> partial: array<f32, THREADS * TILE>;    // [row][thread][tile row]
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
    t: u32,       // the thread's place in its row's group
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
    var at = Place(min(b.x, params.batch - 1u), b.y + li / G, li % G, false,
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

// The dot products of each thread's row with the tile's rows, from every thread's partial sums
// `mine`: thread t adds up tile row t's (column t of the row's block, which no other thread reads,
// so it writes the total on its diagonal), then every thread reads the TILE totals.
fn group_sums(mine: array<f32, TILE>, li: u32) -> array<f32, TILE> {
    let first = (li - li % G) * TILE;
    let t = li % G;
    for (var j = 0u; j < TILE; j++) {
        partial[li * TILE + j] = mine[j];
    }
    workgroupBarrier();
    var total = 0.0;
    for (var u = 0u; u < G; u++) {
        total += partial[first + u * TILE + t];
    }
    partial[first + t * TILE + t] = total;
    workgroupBarrier();
    var totals: array<f32, TILE>;
    for (var j = 0u; j < TILE; j++) {
        totals[j] = partial[first + j * TILE + j];
    }
    workgroupBarrier();   // every thread has read them before partial is written again
    return totals;
}

// Stages rows start .. start + TILE of k (or q) and v (or dout) in tile_e and tile_v, zero past
// the end (`count` rows) and past the head sizes.
fn load_tiles(at: Place, li: u32, start: u32, count: u32, rows_are_keys: bool) {
    for (var i = li; i < TILE * EP; i += THREADS) {
        let row = start + i / EP;
        let d = i % EP;
        var value = 0.0;
        if (row < count && d < params.head) {
            if (rows_are_keys) {
                value = k_at(at, row, d);
            } else {
                value = q_at(at, row, d);
            }
        }
        tile_e[i] = value;
    }
    for (var i = li; i < TILE * VP; i += THREADS) {
        let row = start + i / VP;
        let d = i % VP;
        var value = 0.0;
        if (row < count && d < params.value_head) {
            if (rows_are_keys) {
                value = v_at(at, row, d);
            } else {
                value = dout_at(at, row, d);
            }
        }
        tile_v[i] = value;
    }
}

// The partial dot products of a thread's dims `mine` (of q or k) with each row of tile_e.
fn partial_e(mine: array<f32, DQ>, t: u32) -> array<f32, TILE> {
    var dots: array<f32, TILE>;
    for (var j = 0u; j < TILE; j++) {
        var dot = 0.0;
        for (var i = 0u; i < DQ; i++) {
            dot += mine[i] * tile_e[j * EP + t + G * i];
        }
        dots[j] = dot;
    }
    return dots;
}

fn partial_v(mine: array<f32, DV>, t: u32) -> array<f32, TILE> {
    var dots: array<f32, TILE>;
    for (var j = 0u; j < TILE; j++) {
        var dot = 0.0;
        for (var i = 0u; i < DV; i++) {
            dot += mine[i] * tile_v[j * VP + t + G * i];
        }
        dots[j] = dot;
    }
    return dots;
}

// The row's own dims of q (or k) and of v (or dout).
fn own_e(at: Place, from_keys: bool) -> array<f32, DQ> {
    var mine: array<f32, DQ>;
    for (var i = 0u; i < DQ; i++) {
        let d = at.t + G * i;
        if (at.live && d < params.head && from_keys) {
            mine[i] = k_at(at, at.row, d);
        } else if (at.live && d < params.head) {
            mine[i] = q_at(at, at.row, d);
        }
    }
    return mine;
}

fn own_v(at: Place, from_values: bool) -> array<f32, DV> {
    var mine: array<f32, DV>;
    for (var i = 0u; i < DV; i++) {
        let d = at.t + G * i;
        if (at.live && d < params.value_head && from_values) {
            mine[i] = v_at(at, at.row, d);
        } else if (at.live && d < params.value_head) {
            mine[i] = dout_at(at, at.row, d);
        }
    }
    return mine;
}

// One past the last key that the queries from `first` on attend.
fn keys_end(first: u32) -> u32 {
    return select(params.keys, min(params.keys, first + ROWS), params.causal == 1u);
}

@compute @workgroup_size(THREADS)
fn forward(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) li: u32) {
    let at = place(wg, nwg, li, params.queries);
    let mine = own_e(at, false);
    var acc: array<f32, DV>;
    var top = 0.0;     // the largest score so far (where total > 0)
    var total = 0.0;   // the sum of exp(score - top)
    let end = keys_end(block(wg, nwg, params.queries).y);
    for (var start = 0u; start < end; start += TILE) {
        load_tiles(at, li, start, params.keys, true);
        workgroupBarrier();
        let dots = group_sums(partial_e(mine, at.t), li);
        var scores: array<f32, TILE>;
        var grown = top;
        var seen = total > 0.0;
        for (var j = 0u; j < TILE; j++) {
            scores[j] = score(at, at.row, start + j, dots[j]);
            if (!is_masked(scores[j])) {
                grown = select(scores[j], max(grown, scores[j]), seen);
                seen = true;
            }
        }
        if (seen) {
            let rescale = select(0.0, exp(top - grown), total > 0.0);
            total *= rescale;
            for (var i = 0u; i < DV; i++) {
                acc[i] *= rescale;
            }
            for (var j = 0u; j < TILE; j++) {
                let p = select(exp(scores[j] - grown), 0.0, is_masked(scores[j]));
                total += p;
                for (var i = 0u; i < DV; i++) {
                    acc[i] += p * tile_v[j * VP + at.t + G * i];
                }
            }
            top = grown;
        }
        workgroupBarrier();   // the tiles are read before the next are staged
    }
    if (at.live) {
        let row = at.batch * params.queries + at.row;
        for (var i = 0u; i < DV; i++) {
            let d = at.t + G * i;
            if (d < params.value_head) {
                out[row * params.value_head + d] = select(0.0, acc[i] / total, total > 0.0);
            }
        }
        if (at.t == 0u) {
            out[params.lse_at + row] = select(f32_from_bits(MASKED), top + log(total), total > 0.0);
        }
    }
}

@compute @workgroup_size(THREADS)
fn dq(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
      @builtin(local_invocation_index) li: u32) {
    let at = place(wg, nwg, li, params.queries);
    let row = at.batch * params.queries + at.row;
    let mine = own_e(at, false);
    let grad = own_v(at, false);
    var partial_d: array<f32, TILE>;
    for (var i = 0u; i < DV; i++) {
        let d = at.t + G * i;
        if (at.live && d < params.value_head) {
            partial_d[0] += grad[i] * saved[row * params.value_head + d];
        }
    }
    let delta = group_sums(partial_d, li)[0];
    let lse = select(0.0, saved[params.lse_at + row], at.live);
    if (at.live && at.t == 0u) {
        out[params.stats_at + 2u * row] = lse;
        out[params.stats_at + 2u * row + 1u] = delta;
    }
    var acc: array<f32, DQ>;
    let end = keys_end(block(wg, nwg, params.queries).y);
    for (var start = 0u; start < end; start += TILE) {
        load_tiles(at, li, start, params.keys, true);
        workgroupBarrier();
        let dots = group_sums(partial_e(mine, at.t), li);
        let grads = group_sums(partial_v(grad, at.t), li);
        for (var j = 0u; j < TILE; j++) {
            let s = score(at, at.row, start + j, dots[j]);
            let ds = select(exp(s - lse) * (grads[j] - delta), 0.0, is_masked(s));
            for (var i = 0u; i < DQ; i++) {
                acc[i] += ds * tile_e[j * EP + at.t + G * i];
            }
        }
        workgroupBarrier();
    }
    if (at.live) {
        for (var i = 0u; i < DQ; i++) {
            let d = at.t + G * i;
            if (d < params.head) {
                out[row * params.head + d] = acc[i] * params.scale;
            }
        }
    }
}

@compute @workgroup_size(THREADS)
fn dkv(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
       @builtin(local_invocation_index) li: u32) {
    let at = place(wg, nwg, li, params.keys);
    let mine = own_e(at, true);
    let values = own_v(at, true);
    var dk: array<f32, DQ>;
    var dv: array<f32, DV>;
    // causal: the queries before the workgroup's first key attend none of its keys
    let begin = select(0u, block(wg, nwg, params.keys).y, params.causal == 1u);
    for (var start = begin; start < params.queries; start += TILE) {
        load_tiles(at, li, start, params.queries, false);
        if (li < TILE) {   // (0 past the last query: p is 0 there, and 0 * a stale NaN is not)
            let query = at.batch * params.queries + start + li;
            let live = start + li < params.queries;
            tile_stats[li] = select(vec2<f32>(0.0), vec2<f32>(saved[params.stats_at + 2u * query],
                                                              saved[params.stats_at + 2u * query + 1u]), live);
        }
        workgroupBarrier();
        let dots = group_sums(partial_e(mine, at.t), li);
        let grads = group_sums(partial_v(values, at.t), li);
        for (var j = 0u; j < TILE; j++) {
            let s = score(at, start + j, at.row, dots[j]);
            let stats = tile_stats[j];
            let p = select(exp(s - stats.x), 0.0, is_masked(s));
            let ds = p * (grads[j] - stats.y);
            for (var i = 0u; i < DV; i++) {
                dv[i] += p * tile_v[j * VP + at.t + G * i];
            }
            for (var i = 0u; i < DQ; i++) {
                dk[i] += ds * tile_e[j * EP + at.t + G * i];
            }
        }
        workgroupBarrier();
    }
    if (at.live) {
        let row = at.batch * params.keys + at.row;
        for (var i = 0u; i < DQ; i++) {
            let d = at.t + G * i;
            if (d < params.head) {
                out[row * params.head + d] = dk[i] * params.scale;
            }
        }
        for (var i = 0u; i < DV; i++) {
            let d = at.t + G * i;
            if (d < params.value_head) {
                out[params.dv_at + row * params.value_head + d] = dv[i];
            }
        }
    }
}
