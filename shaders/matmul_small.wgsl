// Batched matrix product out[b] = A[b] @ B[b] on a software adapter (SwiftShader, lavapipe): each
// thread computes TM x TN outputs, walking K one step at a time and reading its TM values of A and
// TN of B straight from the operands, with no workgroup memory and no barriers. Why: a CPU
// rasterizer runs a workgroup's invocations as the lanes of SIMD registers on one CPU thread and
// reads each lane's word separately (from workgroup memory too), so staging a tile only adds a copy
// and a barrier a step; what counts is multiply-adds per word read, TM x TN per TM + TN
// (bench/NOTES.md, "MNIST MLP in the page without staging"). A toy model's products take it at 4x4
// (kernels/matmul.py's MATMUL_SMALL, one pipeline for every layout): SwiftShader compiles it in well
// under a second, a tiled variant in 1-7 s (bench/NOTES.md, "Small products in one kernel").
// Its operands, parameters, grid, bias and epilogue are shaders/matmul.wgsl's (kernels/matmul.py
// fills both), so a product of any layout takes it: one pipeline per operand form, bias, element
// type and TM x TN, where each staging order and vec4 choice is a tiled variant of its own. Every
// form is read at addresses worked out before the loop and carried from k step to k step by adds
// (kernels/matmul_small.py): a convolution's windows too, with no division in the loop.
// A workgroup covers a BM x BN block of the output; a thread's rows are lid.y + i * WY, its columns
// lid.x + j * WX (neighbouring lanes read neighbouring words of B); workgroup z = split * batches +
// batch, as there.
{{bindings}}
{{bias}}
{{epilogue}}

const WX: u32 = {{wx}}u;
const WY: u32 = {{wy}}u;
const TM: u32 = {{tm}}u;
const TN: u32 = {{tn}}u;
const BM: u32 = WY * TM;
const BN: u32 = WX * TN;

@compute @workgroup_size(WX, WY)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let m = params.m;
    let n = params.n;
    let start = product_start(wg.z);   // shaders/matmul_batch.wgsl
    let k = start.k;   // where this piece of K ends
    let row0 = wg.y * BM;
    let col0 = wg.x * BN;
{{declare}}
    for (var t = start.k0; t < k; t++) {
{{multiply}}
    }
    let base = start.out_at;
{{store}}
}
