// Counter-based random numbers: element n of a draw is a hash of (offset + n) and the seed, so
// any element can be made independently and the cpu device (NumPy) makes the same numbers.
// main: Params: [0] numel, [1] seed, [2] offset, [3] 1 for standard normal (Box-Muller), 0 for uniform.
// permutation: see there.
@group(0) @binding(1) var<storage, read_write> out: array<f32>;

fn pcg_hash(v: u32) -> u32 {
    let state = v * 747796405u + 2891336453u;
    let word = ((state >> ((state >> 28u) + 4u)) ^ state) * 277803737u;
    return (word >> 22u) ^ word;
}

fn uniform(n: u32) -> f32 {
    let bits = pcg_hash(pcg_hash(p[2] + n) ^ pcg_hash(p[1]));
    return f32(bits >> 8u) * (1.0 / 16777216.0);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let i = flat_id(wg, nwg) * 256u + li;
    if (i >= p[0]) { return; }
    if (p[3] == 1u) {
        let u1 = uniform(2u * i);
        let u2 = uniform(2u * i + 1u);
        out[i] = sqrt(-2.0 * log(1.0 - u1)) * cos(6.2831853071795864 * u2);
    } else {
        out[i] = uniform(i);
    }
}

// A bijection of [0, 4^half): a 16-round Feistel network whose round keys hash (seed, offset + round)
// (fewer rounds leave small permutations measurably non-uniform).
fn feistel(v: u32, half: u32) -> u32 {
    let mask = (1u << half) - 1u;
    var left = v >> half;
    var right = v & mask;
    for (var round = 0u; round < 16u; round++) {
        let key = pcg_hash(pcg_hash(p[2] + round) ^ pcg_hash(p[1]));
        let next = left ^ (pcg_hash(right ^ key) & mask);
        left = right;
        right = next;
    }
    return (left << half) | right;
}

// randperm: out[i] = element i of a pseudo-random permutation of [0, n), as int32 bits. The Feistel
// network permutes [0, 4^half), the smallest such range holding n, and each value is walked through
// it until it lands inside [0, n) again ("cycle walking" keeps it a bijection of [0, n)). Every
// element is made independently: no sort, no host work, the same numbers as the cpu device.
// Params: [0] n, [1] seed, [2] offset, [3] half.
@compute @workgroup_size(256)
fn permutation(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) li: u32) {
    let i = flat_id(wg, nwg) * 256u + li;
    if (i >= p[0]) { return; }
    var v = feistel(i, p[3]);
    while (v >= p[0]) {
        v = feistel(v, p[3]);
    }
    out[i] = bitcast<f32>(v);
}
