// Where a row lies (included by shaders that work row by row along one dim: scan.wgsl, sort.wgsl;
// their parameter blocks have kernels/rows.py's ROW_FIELDS). Row r is the r-th combination, in
// row-major order, of the other dims; x is the input, out the output (contiguous, x's shape).
// Returns (row r's first element in x, its first element in out).
fn row_starts(r: u32) -> vec2<u32> {
    var at = vec2<u32>(params_offset(0u), 0u);
    var rest = r;
    for (var d = params.kept_ndim; d > 0u; d--) {
        let size = params_kept_shape(d - 1u);
        let pos = rest % size;
        rest /= size;
        at += pos * vec2<u32>(params_kept_in_strides(d - 1u), params_kept_out_strides(d - 1u));
    }
    return at;
}
