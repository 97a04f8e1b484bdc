// gather: out[pos] = x[pos with pos[dim] := index[pos]], out having the index's shape.
// scatter_add: gather's adjoint, out (the input's shape) collects grad at the gathered positions;
// each output sums over the index's dim itself, so no atomics are needed.
// Params, gather: [0] numel, [1] ndim, [2] dim, [3] x's size at dim, [4] elements after dim
// (product of the index shape past dim), [5 .. 5+nd) index shape, then x's layout and the index's
// layout (offset, nd strides each). Negative indices count from the end; out-of-range ones read 0.
// Params, scatter_add: [0] numel, [1] ndim, [2] dim, [3] index size at dim, [4] 1 to add to out's
// values (a long index is summed in pieces), [5 .. 5+nd) out shape, [5+nd .. 5+2nd) index shape,
// then the index's layout and grad's layout.
@group(0) @binding(1) var<storage, read_write> out: array<{{type}}>;
@group(0) @binding(2) var<storage, read> src: array<{{type}}>;
@group(0) @binding(3) var<storage, read> index: array<i32>;

@compute @workgroup_size(256)
fn gather(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) li: u32) {
    let i = flat_id(wg, nwg) * 256u + li;
    if (i >= p[0]) { return; }
    let nd = p[1];
    let dim = p[2];
    let x_layout = 5u + nd;
    let i_layout = x_layout + 1u + nd;
    let pos_dim = (i / p[4]) % p[5u + dim];
    var picked = index[strided(i, nd, 5u, i_layout)];
    if (picked < 0) { picked += i32(p[3]); }   // negative indices count from the end, as on cpu
    if (picked < 0 || u32(picked) >= p[3]) {
        out[i] = {{type}}(0);
        return;
    }
    let stride = p[x_layout + 1u + dim];
    out[i] = src[strided(i, nd, 5u, x_layout) - pos_dim * stride + u32(picked) * stride];
}

@compute @workgroup_size(256)
fn scatter_add(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) li: u32) {
    let i = flat_id(wg, nwg) * 256u + li;
    if (i >= p[0]) { return; }
    let nd = p[1];
    let dim = p[2];
    let i_layout = 5u + 2u * nd;
    let g_layout = i_layout + 1u + nd;
    var rest = i;
    var i_at = p[i_layout];
    var g_at = p[g_layout];
    var j = 0u;
    var inside = true;
    for (var d = nd; d > 0u; d--) {
        let size = p[5u + d - 1u];
        let pos = rest % size;
        rest /= size;
        if (d - 1u == dim) {
            j = pos;
        } else {
            inside = inside && pos < p[5u + nd + d - 1u];
            i_at += pos * p[i_layout + d];
            g_at += pos * p[g_layout + d];
        }
    }
    var acc = {{type}}(0);
    if (inside) {
        let i_step = p[i_layout + 1u + dim];
        let g_step = p[g_layout + 1u + dim];
        let size = i32(p[5u + dim]);
        for (var k = 0u; k < p[3]; k++) {
            let picked = index[i_at + k * i_step];
            if (select(picked, picked + size, picked < 0) == i32(j)) {
                acc += src[g_at + k * g_step];
            }
        }
    }
    if (p[4] == 1u) {
        acc += out[i];
    }
    out[i] = acc;
}
