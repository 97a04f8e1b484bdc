// Embedding: rows of an (R, C) weight picked by N int32 indices, and the weight's gradient.
// forward: one thread per output element (n, c): out[n, c] = weight[index[n], c]. An index outside
//          [0, R) is reported (shaders/index_error.wgsl: the runtime raises it at the next read) and
//          reads row 0.
// backward: out[p, r, c] = the sum of grad[n, c] over the positions n of piece p (`span` of them)
//          with index[n] == r, in n's order (deterministic, no atomics on floats; the backend sums the
//          pieces where there are several): a workgroup per (piece p, row r, block of WORKGROUP_SIZE
//          columns) reads the piece's indices a chunk of WORKGROUP_SIZE at a time, marks the chunk's
//          hits as bits of workgroup words and visits only those, so chunks without r cost one read
//          each. Row `padding` (-1: none) gets 0; with `scale_by_freq` (one piece) the sum is divided
//          by r's count. An index outside [0, R) adds nowhere (the forward reported it).
// Parameters (kernels/embedding.py's EMBEDDING_PARAMS): out is contiguous, `rows` R by `cols` C
// (forward: N by C; backward: (pieces, R, C)); `count` N indices at offsets(1) + n * `index_stride`,
// `span` of them a piece (backward); src (the weight forward,
// the (N, C) gradient backward) at offsets(0) through its two `src_strides`.
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> src: array<f32>;
@group(0) @binding(3) var<storage, read> index: array<i32>;
@group(0) @binding(4) var<storage, read_write> index_error: IndexErrorRecord;

const EMBEDDING_ERROR: u32 = {{embedding_error}}u;   // kernels/embedding.py's code for index_errors

const WORDS: u32 = WORKGROUP_SIZE / 32u;   // hit bits of one chunk
// Two banks: a chunk sets its bank's bits while the other, read by the chunk before, is cleared.
var<workgroup> hits: array<array<atomic<u32>, WORDS>, 2>;

fn src_at(row: u32, c: u32) -> f32 {
    return src[params_offsets(0u) + row * params_src_strides(0u) + c * params_src_strides(1u)];
}

fn index_at(n: u32) -> i32 {
    return index[params_offsets(1u) + n * params.index_stride];
}

// The row index n picks. Unlike gather's (checked_index), torch's embedding counts no index from
// the end: a negative one is out of range too.
fn picked_row(n: u32) -> u32 {
    let picked = index_at(n);
    if (picked < 0 || u32(picked) >= params.rows) {
        report_index_error(EMBEDDING_ERROR, picked, params.rows, 0u);
        return 0u;
    }
    return u32(picked);
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn forward(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) li: u32) {
    let i = element_id(wg, nwg, li);
    if (i >= params.count * params.cols) { return; }
    out[i] = src_at(picked_row(i / params.cols), i % params.cols);
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn backward(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) li: u32) {
    let blocks = (params.cols + WORKGROUP_SIZE - 1u) / WORKGROUP_SIZE;
    let id = flat_id(wg, nwg);
    let piece = id / (params.rows * blocks);
    let r = id / blocks % params.rows;
    let c = (id % blocks) * WORKGROUP_SIZE + li;
    let end = min(params.count, (piece + 1u) * params.span);
    if (li < WORDS) {
        atomicStore(&hits[0][li], 0u);
        atomicStore(&hits[1][li], 0u);
    }
    workgroupBarrier();
    var sum = 0.0;
    var count = 0u;
    var bank = 0u;
    for (var start = piece * params.span; start < end; start += WORKGROUP_SIZE) {
        let n = start + li;
        if (n < end && index_at(n) == i32(r)) {
            atomicOr(&hits[bank][li / 32u], 1u << (li % 32u));
        }
        workgroupBarrier();
        for (var w = 0u; w < WORDS; w++) {
            var bits = atomicLoad(&hits[bank][w]);
            count += countOneBits(bits);
            while (bits != 0u && c < params.cols) {
                sum += src_at(start + w * 32u + countTrailingZeros(bits), c);
                bits &= bits - 1u;
            }
        }
        if (li < WORDS) {
            atomicStore(&hits[1u - bank][li], 0u);
        }
        bank = 1u - bank;
        workgroupBarrier();
    }
    if ((piece == 0u || piece * params.span < params.count) && c < params.cols) {   // (past the pieces: none)
        let scale = select(1.0, 1.0 / f32(max(count, 1u)), params.scale_by_freq == 1u);
        out[(piece * params.rows + r) * params.cols + c] = select(sum * scale, 0.0, i32(r) == params.padding);
    }
}
