// Shared by every kernel. Binding 0 is the dispatch's parameter block, declared by its family in
// Python (kernels/params.py): `params.<name>`, `params_<name>(i)`. Grids past 65535 workgroups
// spill into y, so `flat_id` is the workgroup's linear number.
const WORKGROUP_SIZE: u32 = {{workgroup_size}}u;   // kernels/common.py's WORKGROUP_SIZE

fn flat_id(wg: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wg.x + wg.y * nwg.x;
}

// The element of a WORKGROUP_SIZE-thread kernel that gives each thread one element.
fn element_id(wg: vec3<u32>, nwg: vec3<u32>, li: u32) -> u32 {
    return flat_id(wg, nwg) * WORKGROUP_SIZE + li;
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

// Byte i of a uint8 tensor holding value's low byte, in its u32 word: byte_at's inverse.
fn byte_in_word(value: u32, i: u32) -> u32 {
    return (value & 0xffu) << ((i & 3u) * 8u);
}
