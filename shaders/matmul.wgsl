// Batched matrix product out[b] = A[b] @ B[b] of strided f32 operands, register-tiled.
//
// A workgroup of WX x WY threads computes a BM x BN output tile (BM = WY*TM, BN = WX*TN), walking
// K in steps of BK: each step stages A's BM x BK and B's BK x BN slices in workgroup memory
// (loaded from global memory into registers one step ahead, so the loads overlap the arithmetic),
// then every thread multiplies its TM x TN block with vec4 reads of the staged slices. A thread's
// rows are TM/4 runs of 4 (run g starts at g*WY*4 + ty*4), its columns likewise, so neighbouring
// threads read neighbouring 16-byte words: no bank conflicts. Tile sizes and the load order
// (along K, or along M / N, whichever of an operand's strides is 1) are filled in per kernel.
// Grid: (ceil(N/BN), ceil(M/BM), batches).
// Params: [0] M, [1] N, [2] K, [3] batch ndim B, [4] A offset, [5] A row stride, [6] A col stride,
// [7] B offset, [8] B row stride, [9] B col stride, then batch shape (B), A's batch strides (B),
// B's batch strides (B), and with a bias its offset and stride (the store adds it, filled in below).
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> a: array<f32>;
@group(0) @binding(3) var<storage, read> b: array<f32>;
{{bias}}

const WX: u32 = {{wx}}u;
const WY: u32 = {{wy}}u;
const TM: u32 = {{tm}}u;
const TN: u32 = {{tn}}u;
const BK: u32 = {{bk}}u;
const BM: u32 = WY * TM;
const BN: u32 = WX * TN;
const THREADS: u32 = WX * WY;
const A_LOADS: u32 = BM * BK / THREADS;
const B_LOADS: u32 = BN * BK / THREADS;
const A_ALONG_K: bool = {{a_along_k}};   // A's column stride is 1: consecutive threads walk K
const B_ALONG_K: bool = {{b_along_k}};   // B's row stride is 1: likewise

// Staged slices, [k][m] and [k][n] in runs of 4; each k's row is padded by one vec4 so that
// threads storing along K hit different banks. Two of each: step t fills one half while slower
// threads may still read the other for step t - BK, so one barrier per step is enough.
const ROW_A: u32 = BM / 4u + 1u;
const ROW_B: u32 = BN / 4u + 1u;
var<workgroup> tile_a: array<vec4<f32>, 2u * BK * ROW_A>;
var<workgroup> tile_b: array<vec4<f32>, 2u * BK * ROW_B>;

// Thread tid's l-th element of a tile load: (row, k) of A's BM x BK slice, (k, col) of B's BK x BN.
fn a_slot(tid: u32, l: u32) -> vec2<u32> {
    let i = tid + l * THREADS;
    return select(vec2(i % BM, i / BM), vec2(i / BK, i % BK), A_ALONG_K);
}

fn b_slot(tid: u32, l: u32) -> vec2<u32> {
    let i = tid + l * THREADS;
    return select(vec2(i / BN, i % BN), vec2(i % BK, i / BK), B_ALONG_K);
}

// One element of A (of B) at tile-relative slot s of the slice at rows row0 (k t), zero past the edges.
fn load_a(s: vec2<u32>, row0: u32, t: u32, at: u32, m: u32, k: u32) -> f32 {
    let r = row0 + s.x;
    let c = t + s.y;
    return select(0.0, a[at + min(r, m - 1u) * p[5] + min(c, k - 1u) * p[6]], r < m && c < k);
}

fn load_b(s: vec2<u32>, col0: u32, t: u32, at: u32, n: u32, k: u32) -> f32 {
    let r = t + s.x;
    let c = col0 + s.y;
    return select(0.0, b[at + min(r, k - 1u) * p[8] + min(c, n - 1u) * p[9]], r < k && c < n);
}

@compute @workgroup_size(WX, WY)
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
    let row0 = wg.y * BM;
    let col0 = wg.x * BN;
    let tid = lid.y * WX + lid.x;

    // A thread's accumulators, loaded values and tile slots are named variables rather than arrays
    // (the slots below are unrolled when the kernel is filled in): arrays indexed in loops end up
    // in slow local memory on some drivers.
{{declare}}
    // Step t's slices are in registers before step t starts, so their loads overlap step t - BK.
{{load_first}}
    for (var t = 0u; t < k; t += BK) {
        let half_a = (t / BK) % 2u * BK * ROW_A;
        let half_b = (t / BK) % 2u * BK * ROW_B;
{{stage}}
        workgroupBarrier();
        if (t + BK < k) {
{{load_next}}
        }
        for (var kk = 0u; kk < BK; kk++) {
{{multiply}}
        }
    }
    let base = wg.z * m * n;
{{store}}
}
