// Cross-entropy of (N, C) logits against int class labels, fused into one kernel each way (the
// composed log_softmax + gather + neg path takes a dozen dispatches, a mean or sum two more).
// forward: one workgroup per row finds the row's max and log-sum-exp; loss[n] = lse - x[n, label],
//          and lse[n] is kept for the backward.
// forward_sum: the same losses reduced in the same dispatch to out[0] = scale * their sum (the
//          mean: scale 1 / N). One workgroup: each thread takes every SUM_WG-th row and reads its
//          classes one after another (each read waits on memory), so the backend picks this
//          kernel only where a thread's share is short.
// backward: one thread per logit: out[n, c] = upstream(n) * (exp(x[n, c] - lse[n]) - (c == label[n])).
// Params: [0] N, [1] C, [2] logits offset, [3] row stride, [4] class stride, [5] labels offset,
// [6] labels stride, [7] scale (f32; forward_sum and backward), [8] grad offset, [9] grad stride.
// A label outside [0, C) reads class 0 here (checking needs a readback; the cpu device raises).
@group(0) @binding(1) var<storage, read_write> out: array<f32>;   // loss (forward), d logits (backward)
@group(0) @binding(2) var<storage, read_write> lse: array<f32>;
@group(0) @binding(3) var<storage, read> x: array<f32>;
@group(0) @binding(4) var<storage, read> labels: array<i32>;
@group(0) @binding(5) var<storage, read> grad: array<f32>;

const WG: u32 = 64u;
const SUM_WG: u32 = 256u;
var<workgroup> partial: array<f32, SUM_WG>;

fn logit(n: u32, c: u32) -> f32 {
    return x[p[2] + n * p[3] + c * p[4]];
}

fn label(n: u32) -> u32 {
    let y = labels[p[5] + n * p[6]];
    return select(0u, u32(y), y >= 0 && u32(y) < p[1]);
}

// Row n's loss from its max and its sum of exp(x - max); keeps the row's log-sum-exp.
fn row_loss(n: u32, top: f32, total: f32) -> f32 {
    let row_lse = top + log(total);
    lse[n] = row_lse;
    return row_lse - logit(n, label(n));
}

// The gradient reaching row n's loss, times the scale: the backend fills in
// grad[p[8] + n * p[9]] * pf(7), or pf(7) alone where backward() passed no gradient (its 1).
fn upstream(n: u32) -> f32 {
    return {{upstream}};
}

// The combined value of `v` (max when `is_max`, else the sum) over the first `size` threads of
// the workgroup (a power of two), in every thread.
fn combine(v: f32, li: u32, is_max: bool, size: u32) -> f32 {
    partial[li] = v;
    for (var step = size / 2u; step > 0u; step /= 2u) {
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
    top = combine(top, li, true, WG);
    var total = 0.0;
    for (var c = li; c < classes; c += WG) {
        total += exp(logit(n, c) - top);
    }
    total = combine(total, li, false, WG);
    if (live && li == 0u) {
        out[n] = row_loss(n, top, total);
    }
}

@compute @workgroup_size(256)
fn forward_sum(@builtin(local_invocation_index) li: u32) {
    var sum = 0.0;
    for (var n = li; n < p[0]; n += SUM_WG) {
        // one pass over the row: the running max, and the sum of exp(x - max) rescaled as it grows
        // (starting from the first logit, not -inf: a leading -inf would give exp(-inf + inf))
        var top = logit(n, 0u);
        var total = 1.0;
        for (var c = 1u; c < p[1]; c++) {
            let v = logit(n, c);
            let grown = max(top, v);
            total = total * exp(top - grown) + exp(v - grown);
            top = grown;
        }
        sum += row_loss(n, top, total);
    }
    sum = combine(sum, li, false, SUM_WG);
    if (li == 0u) {
        out[0] = sum * pf(7);
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
    out[i] = upstream(n) * (exp(logit(n, c) - lse[n]) - hit);
}
