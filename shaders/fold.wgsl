// fold: the adjoint of the sliding-window view that convolution and pooling read through.
// g has the window layout (N, C, kh, kw, Ho, Wo); each output pixel (n, c, y, x) of the
// (N, C, H, W) result sums the window entries that looked at it, so no atomics are needed. The
// windows may have read the input padded: the result is the unpadded part.
// Params: [0] numel, [1] H, [2] W, [3] kh, [4] kw, [5] Ho, [6] Wo, [7] stride y, [8] stride x,
// [9] dilation y, [10] dilation x, [11] C, then g's layout: [12] offset, [13 .. 19) strides,
// then [19] padding y, [20] padding x.
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> g: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let i = flat_id(wg, nwg) * 256u + li;
    if (i >= p[0]) { return; }
    let x = i % p[2] + p[20];   // in the padded image
    let y = (i / p[2]) % p[1] + p[19];
    let c = (i / (p[1] * p[2])) % p[11];
    let n = i / (p[1] * p[2] * p[11]);
    let base = p[12] + n * p[13] + c * p[14];
    var acc = 0.0;
    for (var ky = 0u; ky < p[3]; ky++) {
        let dy = ky * p[9];
        if (dy > y || (y - dy) % p[7] != 0u || (y - dy) / p[7] >= p[5]) { continue; }
        let oy = (y - dy) / p[7];
        for (var kx = 0u; kx < p[4]; kx++) {
            let dx = kx * p[10];
            if (dx > x || (x - dx) % p[8] != 0u || (x - dx) / p[8] >= p[6]) { continue; }
            let ox = (x - dx) / p[8];
            acc += g[base + ky * p[15] + kx * p[16] + oy * p[17] + ox * p[18]];
        }
    }
    out[i] = acc;
}
