// Attention's entry points for software adapters (kernels/attention.py takes them there), filled
// into shaders/attention.wgsl's {{entries}}: a thread per own row (query; dkv: key) walks every row
// of the other side from memory, its own row's head and its accumulators in arrays of its own, with
// no workgroup memory and no barrier. A CPU adapter runs each invocation as a SIMD lane, where the
// tiled entries' staging and barriers switch between coroutines (bench/NOTES.md). What each entry
// computes, its inputs and outputs: attention.wgsl's header; the sums run over the other side's rows
// in order.
const ROW_HEAD: u32 = {{row_head}}u;   // the largest head (ATTENTION_MAX_HEAD)

fn mask_at(at: Place, query: u32, key: u32) -> u32 {
    return at.mask.start + query * at.mask.row + key * at.mask.col;
}

// The thread's batch and own row, of `rows` rows; the batch is params.batch (none) past the rows.
fn own_row(wg: vec3<u32>, nwg: vec3<u32>, li: u32, rows: u32) -> vec2<u32> {
    let b = block(wg, nwg, rows, THREADS);
    return vec2(select(params.batch, b.x, b.y + li < rows), b.y + li);
}

// Elements 0 .. size of a row of operand `which` (q 0, k 1, v 2, dout 3) at x.
fn row_of(which: u32, x: Operand, row: u32, size: u32) -> array<f32, ROW_HEAD> {
    var values: array<f32, ROW_HEAD>;
    for (var e = 0u; e < size; e++) {
        values[e] = load(which, element(x, row, e));
    }
    return values;
}

// One past the last key the query attends (causal: itself).
fn keys_of(query: u32) -> u32 {
    return select(params.keys, min(params.keys, query + 1u), params.causal == 1u);
}

// The scaled, masked score of (query, key), q's row given.
fn row_score(at: Place, own_q: ptr<function, array<f32, ROW_HEAD>>, query: u32, key: u32) -> f32 {
    var dot = 0.0;
    for (var e = 0u; e < params.head; e++) {
        dot = fma((*own_q)[e], k[element(at.k, key, e)], dot);
    }
    return score(query, key, dot * params.scale, mask_at(at, query, key));
}

@compute @workgroup_size(THREADS)
fn forward(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) li: u32) {
    let b = own_row(wg, nwg, li, params.queries);
    let query = b.y;
    if (b.x >= params.batch) {
        return;
    }
    let at = place(b.x);
    var own_q = row_of(0u, at.q, query, params.head);
    var acc: array<f32, ROW_HEAD>;
    var top = LOWEST;
    var total = 0.0;
    for (var key = 0u; key < keys_of(query); key++) {
        let s = row_score(at, &own_q, query, key);
        if (is_masked(s)) {
            continue;
        }
        let new_top = max(top, s);
        let rescale = exp(top - new_top);
        let p = exp(s - new_top);
        total = total * rescale + p;
        for (var e = 0u; e < params.value_head; e++) {
            acc[e] = fma(p, v[element(at.v, key, e)], acc[e] * rescale);
        }
        top = new_top;
    }
    let inverse = select(0.0, 1.0 / total, total > 0.0);
    for (var e = 0u; e < params.value_head; e++) {
        out[element(at.out, query, e)] = acc[e] * inverse;
    }
    out[params.lse_at + b.x * params.queries + query] = select(f32_from_bits(MASKED), top + log(total), total > 0.0);
}

@compute @workgroup_size(THREADS)
fn dq(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
      @builtin(local_invocation_index) li: u32) {
    let b = own_row(wg, nwg, li, params.queries);
    let query = b.y;
    if (b.x >= params.batch) {
        return;
    }
    let at = place(b.x);
    let flat = b.x * params.queries + query;
    let lse = out[params.stats_at + 2u * flat];
    let delta = out[params.stats_at + 2u * flat + 1u];
    var own_q = row_of(0u, at.q, query, params.head);
    var grad: array<f32, ROW_HEAD>;
    for (var key = 0u; key < keys_of(query); key++) {
        let s = row_score(at, &own_q, query, key);
        if (is_masked(s)) {
            continue;
        }
        var dp = 0.0;
        for (var e = 0u; e < params.value_head; e++) {
            dp = fma(dout[element(at.dout, query, e)], v[element(at.v, key, e)], dp);
        }
        let ds = exp(s - lse) * (dp - delta);
        for (var e = 0u; e < params.head; e++) {
            grad[e] = fma(ds, k[element(at.k, key, e)], grad[e]);
        }
    }
    for (var e = 0u; e < params.head; e++) {
        out[element(at.out, query, e)] = grad[e] * params.scale;
    }
}

@compute @workgroup_size(THREADS)
fn dkv(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
       @builtin(local_invocation_index) li: u32) {
    let b = own_row(wg, nwg, li, params.keys);
    let key = b.y;
    if (b.x >= params.batch) {
        return;
    }
    let at = place(b.x);
    var own_k = row_of(1u, at.k, key, params.head);
    var own_v = row_of(2u, at.v, key, params.value_head);
    var grad_k: array<f32, ROW_HEAD>;
    var grad_v: array<f32, ROW_HEAD>;
    // causal: only the queries from the key on attend it
    for (var query = select(0u, key, params.causal == 1u); query < params.queries; query++) {
        var dot = 0.0;
        for (var e = 0u; e < params.head; e++) {
            dot = fma(q[element(at.q, query, e)], own_k[e], dot);
        }
        let s = score(query, key, dot * params.scale, mask_at(at, query, key));
        if (is_masked(s)) {
            continue;
        }
        let flat = b.x * params.queries + query;
        let p = exp(s - saved[params.stats_at + 2u * flat]);
        var dp = 0.0;
        for (var e = 0u; e < params.value_head; e++) {
            let g = dout[element(at.dout, query, e)];
            grad_v[e] = fma(p, g, grad_v[e]);
            dp = fma(g, own_v[e], dp);
        }
        let ds = p * (dp - saved[params.stats_at + 2u * flat + 1u]);
        for (var e = 0u; e < params.head; e++) {
            grad_k[e] = fma(ds, q[element(at.q, query, e)], grad_k[e]);
        }
    }
    for (var e = 0u; e < params.head; e++) {
        out[element(at.out, key, e)] = grad_k[e] * params.scale;
    }
    for (var e = 0u; e < params.value_head; e++) {
        out[element(at.dv, key, e)] = grad_v[e];
    }
}
