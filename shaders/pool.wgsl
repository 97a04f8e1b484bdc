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
// max_backward_apart: where windows do not overlap (kernels/pool.py's windows_apart: every window
// within its own SY x SX cell of the input, shifted by the padding), one thread per cell reads its
// window's pick and gradient once and stores every pixel of the cell: the gradient at the pick, zero
// elsewhere (and in cells with no window, past the last one). A software adapter's lanes then do a
// quarter of the index arithmetic and no window search.
// The geometry is made constants of the kernel (integer division by a constant is cheap): C, H, W,
// Ho, Wo, the kernel, stride, padding and dilation. Parameters (kernels/pool.py's POOL_PARAMS):
// `numel` elements of out, a thread each (max_backward_apart: a thread per cell); src (x forward,
// grad backward) is read at `src_offset` through its 4 `src_strides`. `picked` is contiguous (N, C, Ho, Wo).
// Each thread stores its element of out through store_epilogue (kernels/epilogue.py): under wg.jit
// the maps after a pool (relu's gradient after the backward) run there, in the same thread.
alias T = {{type}};
const C: u32 = {{c}}u;
const H: u32 = {{h}}u;
const W: u32 = {{w}}u;
const HO: u32 = {{ho}}u;
const WO: u32 = {{wo}}u;
const KH: u32 = {{kh}}u;
const KW: u32 = {{kw}}u;
const SY: u32 = {{sy}}u;
const SX: u32 = {{sx}}u;
const PY: u32 = {{py}}u;
const PX: u32 = {{px}}u;
const DY: u32 = {{dy}}u;
const DX: u32 = {{dx}}u;
const CY: u32 = {{cy}}u;   // max_backward_apart's cells along y and x (kernels/pool.py's _cells)
const CX: u32 = {{cx}}u;

// out: values (forward), d x (backward); picked: written forward, read backward; src
{{bindings}}
{{epilogue}}

// By bits, not v != v: GPU compilers may assume finite maths.
fn is_nan(v: T) -> bool {
    return {{is_nan}};
}

// Where src's plane (n, c) starts.
fn src_plane(n: u32, c: u32) -> u32 {
    return params_src_offset(0u) + n * params_src_strides(0u) + c * params_src_strides(1u);
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn max_forward(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) li: u32) {
    let i = element_id(wg, nwg, li);
    if (i >= params.numel) { return; }
    let ox = i % WO;
    let oy = (i / WO) % HO;
    let c = (i / (HO * WO)) % C;
    let n = i / (HO * WO * C);
    let base = src_plane(n, c);
    var best = {{lowest}};
    var at = -1;   // nothing picked yet
    for (var ky = 0u; ky < KH; ky++) {
        let y = i32(oy * SY + ky * DY) - i32(PY);
        if (y < 0 || y >= i32(H)) { continue; }
        for (var kx = 0u; kx < KW; kx++) {
            let x = i32(ox * SX + kx * DX) - i32(PX);
            if (x < 0 || x >= i32(W)) { continue; }
            let v = src[base + u32(y) * params_src_strides(2u) + u32(x) * params_src_strides(3u)];
            if (at < 0 || is_nan(v) || (!is_nan(best) && v > best)) {
                best = v;
                at = y * i32(W) + x;
            }
        }
    }
    picked[i] = at;
    store_epilogue(i, best);
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn max_backward(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) li: u32) {
    let i = element_id(wg, nwg, li);
    if (i >= params.numel) { return; }
    let x = i % W;
    let y = (i / W) % H;
    let c = (i / (H * W)) % C;
    let n = i / (H * W * C);
    let plane = (n * C + c) * HO * WO;
    let base = src_plane(n, c);
    let me = i32(y * W + x);
    let py = y + PY;   // = oy * stride + ky * dilation for the windows whose tap ky is on row y
    let px = x + PX;
    var acc = T(0);
    for (var ky = KH; ky > 0u; ky--) {   // the last tap first: ascending oy
        let dy = (ky - 1u) * DY;
        if (dy > py || (py - dy) % SY != 0u || (py - dy) / SY >= HO) { continue; }
        let oy = (py - dy) / SY;
        for (var kx = KW; kx > 0u; kx--) {
            let dx = (kx - 1u) * DX;
            if (dx > px || (px - dx) % SX != 0u || (px - dx) / SX >= WO) { continue; }
            let ox = (px - dx) / SX;
            if (picked[plane + oy * WO + ox] == me) {
                acc += src[base + oy * params_src_strides(2u) + ox * params_src_strides(3u)];
            }
        }
    }
    store_epilogue(i, acc);
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn max_backward_apart(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                      @builtin(local_invocation_index) li: u32) {
    let i = element_id(wg, nwg, li);
    if (i >= params.numel / (H * W) * CY * CX) { return; }
    // a division each, remainders by multiplying back: a software adapter divides a lane at a time
    let row = i / CX;
    let cx = i - row * CX;
    let plane = row / CY;   // n * C + c
    let cy = row - plane * CY;
    var at = -1;   // no window in this cell
    var g = T(0);
    if (cy < HO && cx < WO) {
        let n = plane / C;
        at = picked[(plane * HO + cy) * WO + cx];
        g = src[src_plane(n, plane - n * C) + cy * params_src_strides(2u) + cx * params_src_strides(3u)];
    }
    for (var ry = 0u; ry < SY; ry++) {
        let y = i32(cy * SY + ry) - i32(PY);
        if (y < 0 || y >= i32(H)) { continue; }
        for (var rx = 0u; rx < SX; rx++) {
            let x = i32(cx * SX + rx) - i32(PX);
            if (x < 0 || x >= i32(W)) { continue; }
            let me = y * i32(W) + x;
            store_epilogue(plane * H * W + u32(me), select(T(0), g, me == at));
        }
    }
}
