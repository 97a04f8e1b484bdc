// Batched matrix product out[b] = A[b] @ B[b] of strided f32 operands, register-tiled (f16 operands
// are read into f32 and the result rounded to f16 as it is stored: the sums are f32 either way).
//
// A workgroup of WX x WY threads computes a BM x BN output tile (BM = WY*TM, BN = WX*TN), walking
// K in steps of BK: each step stages A's BM x BK and B's BK x BN slices in workgroup memory
// (loaded from global memory into registers one step ahead, so the loads overlap the arithmetic),
// then every thread multiplies its TM x TN block with vec4 reads of the staged slices. A thread's
// rows are TM/4 runs of 4 (run g starts at g*WY*4 + ty*4), its columns likewise, so neighbouring
// threads read neighbouring 16-byte words: no bank conflicts. Tile sizes and the load order
// (along K, or along M / N, whichever of an operand's strides is 1) are filled in per kernel, and
// so are the loads: an operand that is contiguous along the dim it is staged by, with every other
// stride and its offset a multiple of 4, is bound as vec4s and read 16 bytes at a time ("wide":
// a transposed view such as Linear's weight or a weight gradient's activations too); others a
// float at a time.
// Besides strided views, A may have a K made of two dims and B may be a convolution's windows
// (implicit im2col, padding read as zeros): see kernels/matmul.py's MatmulOperand.
// Split K: with S splits, workgroup z = split * batches + batch sums the split's K range into
// out[split] of an (S, batches, M, N) result, which the backend sums over S (bias in split 0 only).
// A small output has too few tiles to fill a GPU, and a software adapter's loops must stay short.
// Grid: (ceil(N/BN), ceil(M/BM), batches * S). Parameters: kernels/matmul.py's matmul_params.
// Buffers: out, a, b (f32, or vec4s where read wide), bias where there is one, then an epilogue's.
// Epilogue (an unsplit product under wg.jit's fusion, fusion.py): each element goes through
// store_epilogue(i, value) instead of out[i] = value; it runs elementwise ops on the value, stores
// their results, and stores the value too where something else reads it.
{{bindings}}
{{bias}}
{{epilogue}}

const WX: u32 = {{wx}}u;
const WY: u32 = {{wy}}u;
const TM: u32 = {{tm}}u;
const TN: u32 = {{tn}}u;
const BK: u32 = {{bk}}u;
const BM: u32 = WY * TM;
const BN: u32 = WX * TN;
const THREADS: u32 = WX * WY;

// Staged slices, [half][k][m] and [half][k][n] in runs of 4; each k's row is padded by one vec4 so
// that threads storing along K hit different banks. Two halves: step t fills one while slower
// threads may still read the other for step t - BK, so one barrier per step is enough. Arrays of
// arrays rather than one flat index: the inner index of a thread's reads is the same at every k
// and the k is a constant where unrolled, so the bounds checks naga puts on each workgroup-array
// index are hoisted or dropped instead of costing integer work on every read.
const ROW_A: u32 = BM / 4u + 1u;
const ROW_B: u32 = BN / 4u + 1u;
var<workgroup> tile_a: array<array<array<vec4<f32>, ROW_A>, BK>, 2>;
var<workgroup> tile_b: array<array<array<vec4<f32>, ROW_B>, BK>, 2>;

{{loaders}}

// Causal attention's products (ops/attention.py's _KeptWeights) leave out what is zero or never read,
// by `triangle`: 1, a result read only on and below its diagonal (main skips its tiles wholly above
// it); 2, A zero above its diagonal (K stops past the tile's last row); 3, A zero below its diagonal
// (K starts at the tile's first row); 0, none. A K range left empty stores zeros.
fn causal_range(start: ProductStart, row0: u32) -> ProductStart {
    var piece = start;
    if (params.triangle == 2u) {
        piece.k = min(piece.k, row0 + BM);
    }
    if (params.triangle == 3u) {
        piece.k0 = max(piece.k0, row0);
    }
    return piece;
}

@compute @workgroup_size(WX, WY)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let m = params.m;
    let n = params.n;
    let row0 = wg.y * BM;
    let col0 = wg.x * BN;
    if (params.triangle == 1u && col0 >= row0 + BM) {
        return;   // a causal result's tile wholly above its diagonal, never read
    }
    let start = causal_range(product_start(wg.z), row0);   // shaders/matmul_batch.wgsl
    let tid = lid.y * WX + lid.x;

    // A thread's accumulators, loaded values and tile slots are named variables rather than arrays
    // (the slots below are unrolled when the kernel is filled in): arrays indexed in loops end up
    // in slow local memory on some drivers.
{{declare}}
    // Step t's slices are in registers before step t starts, so their loads overlap step t - BK.
{{load_first}}
    for (var t = start.k0; t < start.k; t += BK) {
        let half = (t / BK) % 2u;
{{stage}}
        workgroupBarrier();
        // Unconditional: the last step's loads read clamped addresses past K that the loaders select
        // away. Under an `if`, the H100's compiler ran every product 15-30% slower (bench/NOTES.md).
{{load_next}}
{{multiply}}
    }
    let base = start.out_at;
{{store}}
}
