// fold: the adjoint of the sliding-window view that convolution and pooling read through.
// g has the window layout (N, C, kh, kw, Ho, Wo); each output pixel (n, c, y, x) of the
// (N, C, H, W) result sums the window entries that looked at it, so no atomics are needed. The
// windows may have read the input padded: the result is the unpadded part.
// Parameters (kernels/conv.py's FOLD_PARAMS): `numel` outputs of shape (N, `channels`, `height`,
// `width`); g is read at `g_offset` through its 6 `g_strides`. Per axis (y, then x): the windows'
// `kernel` size, their count (`windows`: Ho, Wo), `stride`, `dilation` and the input's `padding`.
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> g: array<f32>;

const NO_WINDOW: u32 = 0xffffffffu;

// The window along axis (0: y, 1: x) whose tap k lies on pixel `at` of the padded input, if any.
fn window_of(at: u32, k: u32, axis: u32) -> u32 {
    let tap = k * params_dilation(axis);
    if (tap > at || (at - tap) % params_stride(axis) != 0u) { return NO_WINDOW; }
    let window = (at - tap) / params_stride(axis);
    return select(NO_WINDOW, window, window < params_windows(axis));
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let i = element_id(wg, nwg, li);
    if (i >= params.numel) { return; }
    let plane = params.height * params.width;
    let x = i % params.width + params_padding(1u);   // in the padded input
    let y = (i / params.width) % params.height + params_padding(0u);
    let c = (i / plane) % params.channels;
    let n = i / (plane * params.channels);
    let base = params_g_offset(0u) + n * params_g_strides(0u) + c * params_g_strides(1u);
    var acc = 0.0;
    for (var ky = 0u; ky < params_kernel(0u); ky++) {
        let oy = window_of(y, ky, 0u);
        if (oy == NO_WINDOW) { continue; }
        for (var kx = 0u; kx < params_kernel(1u); kx++) {
            let ox = window_of(x, kx, 1u);
            if (ox == NO_WINDOW) { continue; }
            acc += g[base + ky * params_g_strides(2u) + kx * params_g_strides(3u) + oy * params_g_strides(4u)
                     + ox * params_g_strides(5u)];
        }
    }
    out[i] = acc;
}
