// Where a matmul workgroup's product starts (shaders/matmul.wgsl, shaders/matmul_small.wgsl): z
// walks the batch indices, the last dim fastest, and what is left past them is the piece of a split
// K. Returns (a's offset, b's offset, the piece).
fn batch_start(z: u32) -> vec3<u32> {
    var a_at = params.a_offset;
    var b_at = params.b_offset;
    var rest = z;
    for (var d = params.batch_ndim; d > 0u; d--) {
        let size = params_batch_shape(d - 1u);
        let idx = rest % size;
        a_at += idx * params_a_batch_strides(d - 1u);
        b_at += idx * params_b_batch_strides(d - 1u);
        rest /= size;
    }
    return vec3<u32>(a_at, b_at, rest);
}
