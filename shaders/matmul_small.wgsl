// Batched matrix product out[b] = A[b] @ B[b] for small products on a software adapter: one thread
// per output element, walking K one step at a time, with no workgroup memory and nothing unrolled.
// Its operands, parameters, grid, bias and epilogue are shaders/matmul.wgsl's (kernels/matmul.py
// fills both; the loaders load_a / load_b are the tiled kernel's, read one element at a time), so a
// product of any layout takes it: one pipeline per operand form, bias and element type, where each
// staging order and vec4 choice is a tiled variant of its own. Why: SwiftShader compiles a tiled
// variant in 1-7 s and this kernel in ~0.2 s, and a toy model's products are too small for tiling
// to matter (bench/NOTES.md, "Small products in one kernel").
// A workgroup covers a WY x WX block of the output; workgroup z = split * batches + batch, as there.
{{bindings}}
{{bias}}
{{epilogue}}

const WX: u32 = {{wx}}u;
const WY: u32 = {{wy}}u;
// The loaders' slot functions (unused here) speak of a staged slice: one element.
const BM: u32 = WY;
const BN: u32 = WX;
const BK: u32 = 1u;
const THREADS: u32 = WX * WY;

{{loaders}}

@compute @workgroup_size(WX, WY)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let m = params.m;
    let n = params.n;
    let start = product_start(wg.z);   // shaders/matmul_batch.wgsl
    let a_at = start.a_at;
    let b_at = start.b_at;
    let split = start.split;
    let k0 = start.k0;
    let k = start.k;
    let row0 = wg.y * WY;
    let col0 = wg.x * WX;
    let row = row0 + lid.y;
    let col = col0 + lid.x;
    var sum = 0.0;
    for (var t = k0; t < k; t++) {
        let a_rk = load_a(vec2(lid.y, 0u), row0, col0, t, a_at, m, n, k);
        let b_kc = load_b(vec2(0u, lid.x), row0, col0, t, b_at, m, n, k);
        sum = fma(a_rk, b_kc, sum);
    }
    if (row < m && col < n) {
        let at = wg.z * m * n + row * n;
        {{store}}
    }
}
