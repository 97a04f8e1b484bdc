// Cross-entropy of (N, C) logits against int class labels, fused into one kernel each way (the
// composed log_softmax + gather + neg path takes a dozen dispatches, a mean or sum two more).
// A row labelled `ignore_index` does not count: its loss and gradient are 0, and a mean divides by
// the rows that count (torch's rule: NaN where none does, with a gradient of 0).
// forward: one workgroup per row finds the row's max and the log of its sum of exp(x - max);
//          loss[n] = (max - x[n, label]) + log-sum, and both are kept in `stats` for the backward.
//          Kept apart, not as their sum: at logits of 1e4 a float32 log-sum-exp rounds away a
//          log-sum below 5e-4, and a gradient of that size with it (torch keeps them apart too). For a mean (`mean` 1) it also writes whether row n
//          counts (1 or 0) at loss[N + n]: a reduce sums both halves, then finish divides.
// forward_sum: the same losses reduced in the same dispatch to out[0], their sum or mean. One
//          workgroup: each thread takes every WORKGROUP_SIZE-th row and reads its classes one after
//          another (each read waits on memory), so the backend picks this kernel only where a
//          thread's share is short.
// finish: a mean's out[0] = sum / count, from the reduce's [sum, count], read through x.
// stats: row n's max at stats[n], its log-sum at stats[N + n], and at stats[2N] the factor the
// backward multiplies by: 1, or a mean's 1 / count (forward_sum's or finish's; the device counts,
// so the host needs no readback).
// backward: one thread per logit: out[n, c] = factor * upstream(n) * (exp((x[n, c] - max[n]) -
//          log-sum[n]) - (c == label[n])), 0 in a row that does not count.
// forward_sum with d_logits bound (wg.jit's fusion folds backward()'s implicit 1 into it:
//          backends/webgpu/fusion_loss.py): the backward's values too, each thread its own rows,
//          from the same expression (logit_grad), so they are the backward kernel's bit for bit.
// Parameters (kernels/loss.py's LOSS_PARAMS): `rows` N and `classes` C; logit (n, c) at
// offsets[0] + n * row_stride + c * class_stride, label n at offsets[1] + n * label_stride, row n's
// upstream gradient (backward, where given) at offsets[2] + n * grad_stride; binding 6 is that
// gradient (read), or forward_sum's d logits (written), or unbound.
// A label outside [0, C) and not ignore_index is reported (shaders/index_error.wgsl: the runtime
// raises it at the next read) and read as class 0.
const TARGET_ERROR: u32 = {{target_error}}u;   // kernels/loss.py's code for index_errors

@group(0) @binding(1) var<storage, read_write> out: array<f32>;   // loss (forward), d logits (backward)
@group(0) @binding(2) var<storage, read_write> stats: array<f32>;
@group(0) @binding(3) var<storage, read> x: array<f32>;
@group(0) @binding(4) var<storage, read> labels: array<i32>;
@group(0) @binding(5) var<storage, read_write> index_error: IndexErrorRecord;
{{sixth_binding}}

const ROW_THREADS: u32 = 64u;   // forward's workgroup, which takes one row
const IGNORED: u32 = 0xffffffffu;   // label()'s class for a row labelled ignore_index

// Threads reduce f32s together (shaders/workgroup.wgsl) two ways: a max, then a sum.
alias Partial = f32;
const PARTIALS: u32 = WORKGROUP_SIZE;
const MAX: u32 = 0u;
const SUM: u32 = 1u;

fn merge(a: f32, b: f32, how: u32) -> f32 {
    return select(a + b, max(a, b), how == MAX);
}

fn logit(n: u32, c: u32) -> f32 {
    return x[params_offsets(0u) + n * params.row_stride + c * params.class_stride];
}

fn label(n: u32) -> u32 {
    let y = labels[params_offsets(1u) + n * params.label_stride];
    if (y == params.ignore_index) {
        return IGNORED;
    }
    if (y < 0 || u32(y) >= params.classes) {
        report_index_error(TARGET_ERROR, y, params.classes, 0u);
        return 0u;
    }
    return u32(y);
}

fn factor_slot() -> u32 {
    return 2u * params.rows;
}

// Row n's loss from its max and its sum of exp(x - max), 0 where it does not count; keeps both.
fn row_loss(n: u32, y: u32, top: f32, total: f32) -> f32 {
    let log_sum = log(total);
    stats[n] = top;
    stats[params.rows + n] = log_sum;
    return select((top - logit(n, y)) + log_sum, 0.0, y == IGNORED);
}

// The loss of `sum` over `count` rows that count, and the backward's factor.
fn reduced(sum: f32, count: f32) -> f32 {
    if (params.mean == 0u) {
        stats[factor_slot()] = 1.0;
        return sum;
    }
    // no row counts: torch's NaN loss, and a factor that keeps the (zero) gradient finite
    stats[factor_slot()] = select(1.0 / count, 0.0, count == 0.0);
    return select(sum / count, f32_from_bits(0x7fc00000u), count == 0.0);
}

// The gradient reaching row n's loss: the backend fills in grad[params_offsets(2u) + n *
// params.grad_stride], or 1.0 where backward() passed no gradient (its implicit 1).
fn upstream(n: u32) -> f32 {
    return {{upstream}};
}

// d loss / d x[n, c] for row n labelled y (its max and log-sum in stats), 0 where the row does not count.
fn logit_grad(n: u32, c: u32, y: u32) -> f32 {
    let hit = select(0.0, 1.0, c == y);
    let p = exp((logit(n, c) - stats[n]) - stats[params.rows + n]);
    return select(stats[factor_slot()] * upstream(n) * (p - hit), 0.0, y == IGNORED);
}

// Whether forward_sum writes d logits as well, and where (binding 6, d_logits).
const WRITES_D_LOGITS: bool = {{writes_d_logits}};
fn store_d_logits(i: u32, d: f32) {
    {{store_d_logits}}
}

@compute @workgroup_size(ROW_THREADS)
fn forward(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) li: u32) {
    let n = flat_id(wg, nwg);
    let live = n < params.rows;   // the whole workgroup must reach the barriers
    let classes = select(0u, params.classes, live);
    var top = f32_from_bits(0xff800000u);
    for (var c = li; c < classes; c += ROW_THREADS) {
        top = max(top, logit(n, c));
    }
    top = workgroup_merge_all(top, li, ROW_THREADS, MAX);
    var total = 0.0;
    for (var c = li; c < classes; c += ROW_THREADS) {
        total += exp(logit(n, c) - top);
    }
    total = workgroup_merge(total, li, ROW_THREADS, SUM);
    if (live && li == 0u) {
        let y = label(n);
        out[n] = row_loss(n, y, top, total);
        if (params.mean == 1u) {
            out[params.rows + n] = select(1.0, 0.0, y == IGNORED);
        }
        if (n == 0u) {
            stats[factor_slot()] = 1.0;   // a sum's or none's factor (finish writes a mean's)
        }
    }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn forward_sum(@builtin(local_invocation_index) li: u32) {
    var sum = 0.0;
    var count = 0.0;
    for (var n = li; n < params.rows; n += WORKGROUP_SIZE) {
        let y = label(n);
        if (y == IGNORED) {
            continue;
        }
        // one pass over the row: the running max, and the sum of exp(x - max) rescaled as it grows
        // (starting from the first logit, not -inf: a leading -inf would give exp(-inf + inf))
        var top = logit(n, 0u);
        var total = 1.0;
        for (var c = 1u; c < params.classes; c++) {
            let v = logit(n, c);
            let grown = max(top, v);
            total = total * exp(top - grown) + exp(v - grown);
            top = grown;
        }
        sum += row_loss(n, y, top, total);
        count += 1.0;
    }
    sum = workgroup_merge(sum, li, WORKGROUP_SIZE, SUM);
    workgroupBarrier();   // thread 0 has read the sums' partials before the counts take their place
    count = workgroup_merge(count, li, WORKGROUP_SIZE, SUM);
    if (li == 0u) {
        out[0] = reduced(sum, count);
    }
    if (WRITES_D_LOGITS) {
        storageBarrier();   // thread 0's factor in stats, for every thread; each row's stats are its own
        for (var n = li; n < params.rows; n += WORKGROUP_SIZE) {
            let y = label(n);
            for (var c = 0u; c < params.classes; c++) {
                store_d_logits(n * params.classes + c, logit_grad(n, c, y));
            }
        }
    }
}

@compute @workgroup_size(1)
fn finish() {
    out[0] = reduced(x[0], x[1]);
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn backward(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) li: u32) {
    let i = element_id(wg, nwg, li);
    if (i >= params.rows * params.classes) {
        return;
    }
    let n = i / params.classes;
    out[i] = logit_grad(n, i % params.classes, label(n));
}
