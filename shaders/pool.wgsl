// Max pooling of an (N, C, H, W) input read through its strides, one kernel each way (the window
// view + max reduce path took six dispatches for the gradient alone).
// max_forward: one thread per output (n, c, oy, ox) writes the window's maximum and the position
// y * W + x of the element it picked in the input plane (torch's return_indices). PyTorch's CPU
// rule: the first maximum in window order (ky outer, kx inner) wins, any NaN beats a number and a
// later NaN an earlier one. Padding is skipped: the first real pixel is picked even if it is the
// lowest value, and a window of padding only (dilation can step over every real pixel) gives the
// lowest value and index -1 (torch: -inf and an index outside the plane).
// max_backward: one thread per input pixel sums grad over the windows that picked it. It visits
// only the windows with a tap on the pixel, in ascending (oy, ox) order (PyTorch's order of
// summation, so ties give the same gradient bit for bit), and needs no atomics.
// Params: [0] numel (outputs forward, inputs backward), [1] C, [2] H, [3] W, [4] Ho, [5] Wo,
// [6] kh, [7] kw, [8] stride y, [9] stride x, [10] padding y, [11] padding x, [12] dilation y,
// [13] dilation x, then the layout of src (x forward, grad backward): [14] offset, [15 .. 19)
// strides. `picked` is contiguous (N, C, Ho, Wo).
alias T = {{type}};

@group(0) @binding(1) var<storage, read_write> out: array<T>;        // values (forward), d x (backward)
@group(0) @binding(2) var<storage, read_write> picked: array<i32>;   // written forward, read backward
@group(0) @binding(3) var<storage, read> src: array<T>;

// By bits, not v != v: GPU compilers may assume finite maths.
fn is_nan(v: T) -> bool {
    return {{is_nan}};
}

@compute @workgroup_size(256)
fn max_forward(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) li: u32) {
    let i = flat_id(wg, nwg) * 256u + li;
    if (i >= p[0]) { return; }
    let ox = i % p[5];
    let oy = (i / p[5]) % p[4];
    let c = (i / (p[4] * p[5])) % p[1];
    let n = i / (p[4] * p[5] * p[1]);
    let base = p[14] + n * p[15] + c * p[16];
    var best = {{lowest}};
    var at = -1;   // nothing picked yet
    for (var ky = 0u; ky < p[6]; ky++) {
        let y = i32(oy * p[8] + ky * p[12]) - i32(p[10]);
        if (y < 0 || y >= i32(p[2])) { continue; }
        for (var kx = 0u; kx < p[7]; kx++) {
            let x = i32(ox * p[9] + kx * p[13]) - i32(p[11]);
            if (x < 0 || x >= i32(p[3])) { continue; }
            let v = src[base + u32(y) * p[17] + u32(x) * p[18]];
            if (at < 0 || is_nan(v) || (!is_nan(best) && v > best)) {
                best = v;
                at = y * i32(p[3]) + x;
            }
        }
    }
    out[i] = best;
    picked[i] = at;
}

@compute @workgroup_size(256)
fn max_backward(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) li: u32) {
    let i = flat_id(wg, nwg) * 256u + li;
    if (i >= p[0]) { return; }
    let x = i % p[3];
    let y = (i / p[3]) % p[2];
    let c = (i / (p[2] * p[3])) % p[1];
    let n = i / (p[2] * p[3] * p[1]);
    let plane = (n * p[1] + c) * p[4] * p[5];
    let base = p[14] + n * p[15] + c * p[16];
    let me = i32(y * p[3] + x);
    let py = y + p[10];   // = oy * stride + ky * dilation for the windows whose tap ky is on row y
    let px = x + p[11];
    var acc = T(0);
    for (var ky = p[6]; ky > 0u; ky--) {   // the last tap first: ascending oy
        let dy = (ky - 1u) * p[12];
        if (dy > py || (py - dy) % p[8] != 0u || (py - dy) / p[8] >= p[4]) { continue; }
        let oy = (py - dy) / p[8];
        for (var kx = p[7]; kx > 0u; kx--) {
            let dx = (kx - 1u) * p[13];
            if (dx > px || (px - dx) % p[9] != 0u || (px - dx) / p[9] >= p[5]) { continue; }
            let ox = (px - dx) / p[9];
            if (picked[plane + oy * p[5] + ox] == me) {
                acc += src[base + oy * p[17] + ox * p[18]];
            }
        }
    }
    out[i] = acc;
}
