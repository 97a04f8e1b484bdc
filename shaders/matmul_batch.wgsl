// Where a matmul workgroup's product starts (shaders/matmul.wgsl, shaders/matmul_small.wgsl): z
// walks the batch indices, the last dim fastest, and what is left past them is the piece of a split
// K, which walks K from k0 up to k (the loaders read zeros past the piece's end). out_at: where the
// result's matrix (the piece's, for a split K) starts.
struct ProductStart { a_at: u32, b_at: u32, out_at: u32, split: u32, k0: u32, k: u32 }

fn product_start(z: u32) -> ProductStart {
    var a_at = params.a_offset;
    var b_at = params.b_offset;
    var out_at = params.out_offset;
    var rest = z;
    for (var d = params.batch_ndim; d > 0u; d--) {
        let size = params_batch_shape(d - 1u);
        let idx = rest % size;
        a_at += idx * params_a_batch_strides(d - 1u);
        b_at += idx * params_b_batch_strides(d - 1u);
        out_at += idx * params_out_batch_strides(d - 1u);
        rest /= size;
    }
    let k0 = rest * params.split_k;
    return ProductStart(a_at, b_at, out_at + rest * params.out_split_stride, rest, k0,
                        min(params.k, k0 + params.split_k));
}
