// Scaled dot-product attention, fused (FlashAttention-2's structure, on plain FMAs): softmax(q k^T *
// scale + mask) v without the (L, S) score matrix in memory. kernels/attention.py writes out the
// entry points below (unrolled per head size) but delta:
// forward: a workgroup per (batch, OWN queries), over tiles of OTHER keys: the scores of the tile,
//          an online softmax (running max and sum per row, the output rescaled as the max grows),
//          out += p v. Writes out (*B, L, Ev) and each query's log-sum-exp lse (*B, L) at `lse_at`.
// delta:   LANES threads per query: its (lse, D = rowsum(dout * out)) pair at `stats_at` (in dq's buffer).
// weights, weights_backward: (not fused) the softmax of given raw scores and its gradient, in place, for
//          attention that keeps its weights.
// dkv:     a workgroup per (batch, OWN keys), over tiles of OTHER queries: p = exp(s - lse)
//          (recomputed), ds = p (dout . v - D); dv += p dout, dk += scale ds q. Writes dk (*B, S, E),
//          then dv (*B, S, Ev) at `dv_at`.
// dq:      a workgroup per (batch, OWN queries), over tiles of OTHER keys: dq += scale ds k.
// Every product is a register tile, as a matmul's: thread (r, c) of THREADS computes the scores of
// its own rows r + i RG and the tile's rows c + j GROUPS (i < OWN_EACH, j < OTHER_EACH) from staged chunks
// of CHUNK vec4s of the head (each thread fetching its share of the next chunk into registers
// while the workgroup uses the current one), then accumulates its own rows' outputs (out, dq, dk,
// dv) for the head's vec4s c + m GROUPS, from the weights (p or ds) of the whole tile, shared through
// workgroup memory, and the whole tile they weigh (forward and dq fetch it into registers before the
// tile's products, so its wait hides behind them). A thread's registers are named (never arrays
// indexed in loops, which GPU compilers place in slow local memory). Masked scores are -inf (by bits:
// compilers may assume finite maths) and their p is 0; a query with every key masked gets out 0 and
// no gradient (lse -inf), as torch.
// Parameters (kernels/attention.py's ATTENTION_PARAMS): `batch` rows of the `dims` - 2 leading dims
// `shape` (then L, S); `queries` L, `keys` S, `head` E, `value_head` Ev; q, k, v, mask and dout are
// read through their `dims` strides from `offsets` (q, k, v, mask, dout); the entry's output (forward:
// out, which delta reads back; dq: dq; dkv: dk) is written through `out_strides`, dkv's dv through
// `dv_strides` from `dv_at` (their head dim contiguous: each in its operand's layout, which the op
// picks, so a transposed view's output is a view too); `mask_kind` 0 none, 1 bool
// (True attends), 2 float (added); `causal` 1: key s only for queries l >= s; `scale`.
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> q: array<f32>;
@group(0) @binding(3) var<storage, read> k: array<f32>;
@group(0) @binding(4) var<storage, read> v: array<f32>;
@group(0) @binding(5) var<storage, read> mask: array<u32>;    // bool words or f32 bits (none: q again, unread)
@group(0) @binding(6) var<storage, read> dout: array<f32>;    // backward: out's gradient
@group(0) @binding(7) var<storage, read> saved: array<f32>;   // delta: forward's out and lse; dkv: the (lse, D) pairs

const THREADS: u32 = {{threads}}u;     // invocations per workgroup
const OWN: u32 = {{own}}u;             // the workgroup's own rows (queries; dkv: keys)
const OTHER: u32 = {{other}}u;         // rows of the other side per tile (keys; dkv: queries)
const OWN_EACH: u32 = {{own_each}}u;   // a thread's own rows (a multiple of 4)
const OTHER_EACH: u32 = {{other_each}}u;   // and the tile's rows it scores them with
const GROUPS: u32 = OTHER / OTHER_EACH;    // threads sharing own rows
const RG: u32 = OWN / OWN_EACH;            // row groups: THREADS = RG * GROUPS
const CHUNK: u32 = {{chunk}}u;         // vec4s of the head staged per pass of a product
const XW: u32 = {{xw}}u;               // vec4s of a staged row of the weighed tile (a multiple of GROUPS;
                                       // {{parts}} of them cover the head)
const LANES: u32 = {{lanes}}u;         // delta and the weights entries: threads per query
const MASKED: u32 = 0xff800000u;       // -inf's bits
const LOWEST: f32 = -3.4028234e38;     // a running max before any score

// Workgroup memory, in vec4s (16 KiB, WebGPU's default, where the tiles fit; kernels/attention.py picks):
const W_AT: u32 = 0u;                        // OTHER x OWN / 4 weights: [tile row][h RG + r] = r's own
                                             // rows 4 h .. 4 h + 3, and
const X_AT: u32 = OTHER * OWN / 4u;          // OTHER x XW: the weighed tile (v, k, dout or q); or, while a
const A_AT: u32 = 0u;                        // product runs (a barrier apart), OWN x CHUNK of own rows and
const B_AT: u32 = A_AT + OWN * (CHUNK + 1u); // OTHER x CHUNK of the tile's (a vec4 of padding a row
                                             // spreads the rows over the banks)
var<workgroup> scratch: array<vec4<f32>, {{scratch}}>;
var<workgroup> row_stats: array<f32, {{stats}}>;   // forward: per-thread row max / sum; dkv: (lse, D)

// Where an operand's batch starts, and its strides along rows and dims.
struct Operand {
    start: u32,
    row: u32,
    col: u32,
}

struct Place {
    batch: u32,
    q: Operand,
    k: Operand,
    v: Operand,
    mask: Operand,
    dout: Operand,
    out: Operand,   // the entry's output (col 1)
    dv: Operand,
}

// The workgroup's batch and first row, for blocks of `size` of `rows` rows (kept apart from Place:
// barriers' loop bounds must be seen to be the same in every thread).
fn block(wg: vec3<u32>, nwg: vec3<u32>, rows: u32, size: u32) -> vec2<u32> {
    let blocks = (rows + size - 1u) / size;
    let id = flat_id(wg, nwg);
    return vec2<u32>(id / blocks, (id % blocks) * size);
}

fn place(batch: u32) -> Place {
    let row = params.dims - 2u;
    let col = params.dims - 1u;
    var at = Place(batch,
                   Operand(params_offsets(0u), params_q_strides(row), params_q_strides(col)),
                   Operand(params_offsets(1u), params_k_strides(row), params_k_strides(col)),
                   Operand(params_offsets(2u), params_v_strides(row), params_v_strides(col)),
                   Operand(params_offsets(3u), params_mask_strides(row), params_mask_strides(col)),
                   Operand(params_offsets(4u), params_dout_strides(row), params_dout_strides(col)),
                   Operand(0u, params_out_strides(row), 1u), Operand(params.dv_at, params_dv_strides(row), 1u));
    var rest = batch;
    for (var d = row; d > 0u; d--) {
        let size = params_shape(d - 1u);
        let pos = rest % size;
        rest /= size;
        at.q.start += pos * params_q_strides(d - 1u);
        at.k.start += pos * params_k_strides(d - 1u);
        at.v.start += pos * params_v_strides(d - 1u);
        at.mask.start += pos * params_mask_strides(d - 1u);
        at.dout.start += pos * params_dout_strides(d - 1u);
        at.out.start += pos * params_out_strides(d - 1u);
        at.dv.start += pos * params_dv_strides(d - 1u);
    }
    return at;
}

fn element(x: Operand, row: u32, d: u32) -> u32 {
    return x.start + row * x.row + d * x.col;
}

// Element `index` of q (0), k (1), v (2) or dout (3); and where that operand's batch starts.
fn load(which: u32, index: u32) -> f32 {
    switch (which) {
        case 0u: { return q[index]; }
        case 1u: { return k[index]; }
        case 2u: { return v[index]; }
        default: { return dout[index]; }
    }
}

// Vec4 i of the rows first .. first + rows of operand `which` (its batch from `start`, `strides`
// along rows and dims; those below `count`; zero past them, past its head size and for i past the
// rows' vec4s), vec4s d0 .. d0 + width of each, row by row. (Scalars only: a struct passed to a
// function can cost a trip through local memory.) Without branches: the 4 loads always run (a load
// outside the buffer reads some element of it, as WebGPU guarantees) and select() keeps those
// inside. SwiftShader (the page's CPU WebGPU) compiled the earlier form, an if per row and per dim,
// 6-8x slower where the products write out their fetches (minutes for the backward); the H100 ran
// the branch-free form 5-10% faster.
fn fetch(i: u32, which: u32, start: u32, strides: vec2<u32>, first: u32, count: u32, rows: u32, d0: u32,
         width: u32) -> vec4<f32> {
    let size = select(params.head, params.value_head, which >= 2u);
    let row = i / width;
    let d = 4u * (d0 + i % width);
    let at = start + (first + row) * strides.x + d * strides.y;
    let inside = vec4((row < rows) & (first + row < count)) & (vec4(d) + vec4(0u, 1u, 2u, 3u) < vec4(size));
    let value = vec4(load(which, at), load(which, at + strides.y), load(which, at + 2u * strides.y),
                     load(which, at + 3u * strides.y));
    return select(vec4<f32>(), value, inside);
}

// Puts fetch()'s vec4 i (of rows of `width` vec4s) in scratch from `base`, a row every `stride` vec4s.
fn put(i: u32, base: u32, rows: u32, width: u32, stride: u32, value: vec4<f32>) {
    if (i < rows * width) {
        scratch[base + (i / width) * stride + i % width] = value;
    }
}

// The score of (query, key) from s = scale * q.k: -inf where masked (or outside the rows), else plus
// the float mask. mask_at: the mask's element (query, key), read where there is a mask. Selects,
// not early returns: SwiftShader compiles them faster, and the H100 ran the kernels 5-8% faster.
fn score(query: u32, key: u32, s: f32, mask_at: u32) -> f32 {
    let masked = f32_from_bits(MASKED);
    var value = s;
    if (params.mask_kind != 0u) {   // the same in every thread
        let word = mask[mask_at];
        value = select(s + bitcast<f32>(word), select(masked, s, word != 0u), params.mask_kind == 1u);
    }
    let outside = (query >= params.queries) | (key >= params.keys) | ((params.causal == 1u) & (key > query));
    return select(value, masked, outside);
}

fn is_masked(s: f32) -> bool {
    return bitcast<u32>(s) == MASKED;
}

// One past the last key that the queries from `first` on attend.
fn keys_end(first: u32) -> u32 {
    return select(params.keys, min(params.keys, first + OWN), params.causal == 1u);
}

// The sum (or the max) of own row `row`'s per-thread shares in row_stats.
fn row_total(row: u32) -> f32 {
    var total = 0.0;
    for (var g = 0u; g < GROUPS; g++) {
        total += row_stats[row * GROUPS + g];
    }
    return total;
}

fn row_max(row: u32, start: f32) -> f32 {
    var top = start;
    for (var g = 0u; g < GROUPS; g++) {
        top = max(top, row_stats[row * GROUPS + g]);
    }
    return top;
}

// The delta entry: LANES threads per query, each summing every LANES-th product of its row (neighbours
// read neighbouring elements; a thread per row, each walking its own, ran at ~0.2 TB/s on the H100),
// then the first adds the lanes' sums: the row's (lse, D) pair.
@compute @workgroup_size(THREADS)
fn delta(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
         @builtin(local_invocation_index) li: u32) {
    let b = block(wg, nwg, params.queries, THREADS / LANES);
    let row = b.y + li / LANES;
    let inside = (b.x < params.batch) & (row < params.queries);
    var total = 0.0;
    if (inside) {
        let at = place(b.x);
        for (var e = li % LANES; e < params.value_head; e += LANES) {
            total = fma(load(3u, element(at.dout, row, e)), saved[element(at.out, row, e)], total);
        }
    }
    row_stats[li] = total;
    workgroupBarrier();
    if (inside & (li % LANES == 0u)) {
        for (var lane = 1u; lane < LANES; lane++) {
            total += row_stats[li + lane];
        }
        let flat = b.x * params.queries + row;
        out[params.stats_at + 2u * flat] = saved[params.lse_at + flat];
        out[params.stats_at + 2u * flat + 1u] = total;
    }
}

// The weights entries (kernels/attention_entries.py writes them out), for attention that keeps its (L, S)
// weights (ops/attention.py's _KeptWeights), in place on a contiguous (*B, L, S) matrix in out from
// offset 0's word: weights turns the raw products s = q k^T into softmax(scale s + mask), 0 where masked
// (a row with every key masked: all 0); weights_backward turns the weights' gradient dP into the scores'
// scale * dS = scale P (dP - D), D = rowsum(P dP), P bound as q from offset 1's word. LANES threads a
// query, each holding every LANES-th key of its row in registers: one read and one write of the row
// (three passes over it ran at ~1.2 TB/s on the H100). Under a causal mask the keys past the query are
// not read (their weights and gradients are 0).

// One past the last key that `query`'s weights row reads (none outside the rows).
fn weights_end(query: u32, inside: bool) -> u32 {
    return select(0u, select(params.keys, min(params.keys, query + 1u), params.causal == 1u), inside);
}

// The max (lanes_max) or the sum (lanes_sum) of the LANES threads' values of thread li's query, by a
// tree through row_stats (a thread reading every lane's ran O(LANES) workgroup reads a thread: slower
// than the row's own loads at 64 lanes); first THREADS floats for the max, next for the sum, so a sum
// may follow a max without a barrier between. LANES is a power of two.
fn lanes_max(li: u32, value: f32) -> f32 {
    row_stats[li] = value;
    for (var half = LANES / 2u; half > 0u; half /= 2u) {
        workgroupBarrier();
        if (li % LANES < half) {
            row_stats[li] = max(row_stats[li], row_stats[li + half]);
        }
    }
    workgroupBarrier();
    return row_stats[li - li % LANES];
}

fn lanes_sum(li: u32, value: f32) -> f32 {
    row_stats[THREADS + li] = value;
    for (var half = LANES / 2u; half > 0u; half /= 2u) {
        workgroupBarrier();
        if (li % LANES < half) {
            row_stats[THREADS + li] += row_stats[THREADS + li + half];
        }
    }
    workgroupBarrier();
    return row_stats[THREADS + li - li % LANES];
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
