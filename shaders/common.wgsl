// Shared by every kernel. Binding 0 is the dispatch's parameter block: u32 words whose layout
// each kernel family documents. Grids past 65535 workgroups spill into y, so `flat_id` is the
// workgroup's linear number.
@group(0) @binding(0) var<storage, read> p: array<u32>;

fn flat_id(wg: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wg.x + wg.y * nwg.x;
}

// The f32 with these bits. Being a function call keeps it out of constant evaluation, where Chrome's
// WGSL compiler (Tint) rejects infinities and NaN (naga accepts them): write inf/NaN through this.
fn f32_from_bits(bits: u32) -> f32 {
    return bitcast<f32>(bits);
}

// Byte i of a uint8 tensor, whose bytes are packed four to a u32 word (`word` holds byte i).
fn byte_at(word: u32, i: u32) -> u32 {
    return (word >> ((i & 3u) * 8u)) & 0xffu;
}

fn pf(k: u32) -> f32 {
    return bitcast<f32>(p[k]);
}

// Element index of the multi-index of linear index `i` (over the shape at p[shape_at..]) in a
// tensor whose layout is at p[layout_at]: its offset, then one stride per dim.
fn strided(i: u32, ndim: u32, shape_at: u32, layout_at: u32) -> u32 {
    var rest = i;
    var at = p[layout_at];
    for (var d = ndim; d > 0u; d--) {
        let size = p[shape_at + d - 1u];
        at += (rest % size) * p[layout_at + d];
        rest /= size;
    }
    return at;
}
