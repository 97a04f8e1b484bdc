// Batched matrix product out[b] = A[b] @ B[b] of strided f32 operands, 16x16 output tiles staged
// through workgroup memory. Grid: (ceil(N/16), ceil(M/16), batches).
// Params: [0] M, [1] N, [2] K, [3] batch ndim B, [4] A offset, [5] A row stride, [6] A col stride,
// [7] B offset, [8] B row stride, [9] B col stride, then batch shape (B), A's batch strides (B),
// B's batch strides (B).
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> a: array<f32>;
@group(0) @binding(3) var<storage, read> b: array<f32>;

const TILE: u32 = 16u;
var<workgroup> tile_a: array<array<f32, 16>, 16>;
var<workgroup> tile_b: array<array<f32, 16>, 16>;

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let m = p[0];
    let n = p[1];
    let k = p[2];
    let nb = p[3];
    var a_at = p[4];
    var b_at = p[7];
    var rest = wg.z;
    for (var d = nb; d > 0u; d--) {
        let size = p[10u + d - 1u];
        let idx = rest % size;
        a_at += idx * p[10u + nb + d - 1u];
        b_at += idx * p[10u + 2u * nb + d - 1u];
        rest /= size;
    }
    let row = wg.y * TILE + lid.y;
    let col = wg.x * TILE + lid.x;
    var acc = 0.0;
    for (var t = 0u; t < k; t += TILE) {
        let ka = t + lid.x;
        let kb = t + lid.y;
        tile_a[lid.y][lid.x] = select(0.0, a[a_at + min(row, m - 1u) * p[5] + min(ka, k - 1u) * p[6]], row < m && ka < k);
        tile_b[lid.y][lid.x] = select(0.0, b[b_at + min(kb, k - 1u) * p[8] + min(col, n - 1u) * p[9]], kb < k && col < n);
        workgroupBarrier();
        for (var i = 0u; i < TILE; i++) {
            acc += tile_a[lid.y][i] * tile_b[i][lid.x];
        }
        workgroupBarrier();
    }
    if (row < m && col < n) {
        out[wg.z * m * n + row * n + col] = acc;
    }
}
