// Cross-entropy of (N, C) logits against int class labels, fused into one kernel each way (the
// composed log_softmax + gather + neg path takes a dozen dispatches).
// forward: one workgroup per row finds the row's max and log-sum-exp; loss[n] = lse - x[n, label],
//          and lse[n] is kept for the backward.
// backward: one thread per logit: out[n, c] = grad[n] * (exp(x[n, c] - lse[n]) - (c == label[n])).
// Params: [0] N, [1] C, [2] logits offset, [3] row stride, [4] class stride, [5] labels offset,
// [6] labels stride, [7] grad offset, [8] grad stride (backward only).
// A label outside [0, C) reads class 0 here (checking needs a readback; the cpu device raises).
@group(0) @binding(1) var<storage, read_write> out: array<f32>;   // loss (forward), d logits (backward)
@group(0) @binding(2) var<storage, read_write> lse: array<f32>;
@group(0) @binding(3) var<storage, read> x: array<f32>;
@group(0) @binding(4) var<storage, read> labels: array<i32>;
@group(0) @binding(5) var<storage, read> grad: array<f32>;

const WG: u32 = 64u;
var<workgroup> partial: array<f32, WG>;

fn logit(n: u32, c: u32) -> f32 {
    return x[p[2] + n * p[3] + c * p[4]];
}

fn label(n: u32) -> u32 {
    let y = labels[p[5] + n * p[6]];
    return select(0u, u32(y), y >= 0 && u32(y) < p[1]);
}

// The workgroup's combined value of `v` (max when `is_max`, else the sum), in every thread.
fn combine(v: f32, li: u32, is_max: bool) -> f32 {
    partial[li] = v;
    for (var step = WG / 2u; step > 0u; step /= 2u) {
        workgroupBarrier();
        if (li < step) {
            let other = partial[li + step];
            partial[li] = select(partial[li] + other, max(partial[li], other), is_max);
        }
    }
    workgroupBarrier();
    let all = partial[0];
    workgroupBarrier();   // partial is reused by the next combine
    return all;
}

@compute @workgroup_size(64)
fn forward(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) li: u32) {
    let n = flat_id(wg, nwg);
    let live = n < p[0];   // the whole workgroup must reach the barriers
    let classes = select(0u, p[1], live);
    var top = f32_from_bits(0xff800000u);
    for (var c = li; c < classes; c += WG) {
        top = max(top, logit(n, c));
    }
    top = combine(top, li, true);
    var total = 0.0;
    for (var c = li; c < classes; c += WG) {
        total += exp(logit(n, c) - top);
    }
    total = combine(total, li, false);
    if (live && li == 0u) {
        let row_lse = top + log(total);
        lse[n] = row_lse;
        out[n] = row_lse - logit(n, label(n));
    }
}

@compute @workgroup_size(256)
fn backward(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) li: u32) {
    let i = flat_id(wg, nwg) * 256u + li;
    if (i >= p[0] * p[1]) {
        return;
    }
    let n = i / p[1];
    let c = i % p[1];
    let hit = select(0.0, 1.0, c == label(n));
    out[i] = grad[p[7] + n * p[8]] * (exp(logit(n, c) - lse[n]) - hit);
}
