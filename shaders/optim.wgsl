// Fused optimizer updates: one dispatch per parameter tensor reads the gradient and updates the
// parameter and its state in place, with PyTorch's formulas. Params: [0] numel, [1] param
// offset, [2] grad offset, then f32 hyperparameters as listed per entry point.
@group(0) @binding(1) var<storage, read_write> param: array<f32>;
@group(0) @binding(2) var<storage, read> grad: array<f32>;
@group(0) @binding(3) var<storage, read_write> state1: array<f32>;
@group(0) @binding(4) var<storage, read_write> state2: array<f32>;

fn element(wg: vec3<u32>, nwg: vec3<u32>, li: u32) -> u32 {
    return flat_id(wg, nwg) * 256u + li;
}

// Plain SGD. [3] lr, [4] weight decay.
@compute @workgroup_size(256)
fn sgd(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
       @builtin(local_invocation_index) li: u32) {
    let i = element(wg, nwg, li);
    if (i >= p[0]) { return; }
    let at = p[1] + i;
    param[at] -= pf(3u) * (grad[p[2] + i] + pf(4u) * param[at]);
}

// SGD with momentum. [3] lr, [4] weight decay, [5] momentum, [6] dampening, [7] nesterov (u32),
// [8] first step (u32: the momentum buffer starts as the gradient). state1: momentum buffer.
@compute @workgroup_size(256)
fn sgd_momentum(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) li: u32) {
    let i = element(wg, nwg, li);
    if (i >= p[0]) { return; }
    let at = p[1] + i;
    let g = grad[p[2] + i] + pf(4u) * param[at];
    let momentum = pf(5u);
    var buf = g;
    if (p[8] == 0u) {
        buf = momentum * state1[i] + (1.0 - pf(6u)) * g;
    }
    state1[i] = buf;
    param[at] -= pf(3u) * select(buf, g + momentum * buf, p[7] == 1u);
}

// Adam / AdamW. [3] lr, [4] beta1, [5] beta2, [6] eps, [7] weight decay, [8] 1 - beta1^t,
// [9] 1 - beta2^t, [10] decoupled weight decay (u32: AdamW). state1: exp_avg, state2: exp_avg_sq.
@compute @workgroup_size(256)
fn adam(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let i = element(wg, nwg, li);
    if (i >= p[0]) { return; }
    let at = p[1] + i;
    let lr = pf(3u);
    let beta1 = pf(4u);
    let beta2 = pf(5u);
    var w = param[at];
    var g = grad[p[2] + i];
    if (p[10] == 1u) {
        w *= 1.0 - lr * pf(7u);
    } else {
        g += pf(7u) * w;
    }
    let m = beta1 * state1[i] + (1.0 - beta1) * g;
    let v = beta2 * state2[i] + (1.0 - beta2) * g * g;
    state1[i] = m;
    state2[i] = v;
    let denom = sqrt(v) / sqrt(pf(9u)) + pf(6u);
    param[at] = w - (lr / pf(8u)) * m / denom;
}
