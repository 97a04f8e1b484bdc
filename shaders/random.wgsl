// Counter-based random numbers: element n of a draw is a hash of (offset + n) and the seed, so
// any element can be made independently and the cpu device (NumPy) makes the same numbers.
// Parameters (kernels/random.py's RANDOM_PARAMS): `numel` elements from the generator's `draw`
// (its seed, then its offset). main: standard normal (Box-Muller) where `normal` is 1, else
// uniform on [0, 1). permutation: `numel` is randperm's n, `half` as described there.
@group(0) @binding(1) var<storage, read_write> out: array<f32>;

// Rounds of permutation's Feistel network: backends/base.py's PERMUTATION_ROUNDS, as on cpu.
const ROUNDS: u32 = {{rounds}}u;

fn pcg_hash(v: u32) -> u32 {
    let state = v * 747796405u + 2891336453u;
    let word = ((state >> ((state >> 28u) + 4u)) ^ state) * 277803737u;
    return (word >> 22u) ^ word;
}

// Random word k of this draw.
fn random_word(k: u32) -> u32 {
    let seed = params_draw(0u);
    let offset = params_draw(1u);
    return pcg_hash(pcg_hash(offset + k) ^ pcg_hash(seed));
}

fn uniform(n: u32) -> f32 {
    return f32(random_word(n) >> 8u) * (1.0 / 16777216.0);
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let i = element_id(wg, nwg, li);
    if (i >= params.numel) { return; }
    if (params.normal == 1u) {
        let u1 = uniform(2u * i);
        let u2 = uniform(2u * i + 1u);
        out[i] = sqrt(-2.0 * log(1.0 - u1)) * cos(6.2831853071795864 * u2);
    } else {
        out[i] = uniform(i);
    }
}

// A bijection of [0, 4^half): a Feistel network of ROUNDS rounds whose round keys are the draw's
// first random words.
fn feistel(v: u32, half: u32) -> u32 {
    let mask = (1u << half) - 1u;
    var left = v >> half;
    var right = v & mask;
    for (var round = 0u; round < ROUNDS; round++) {
        let next = left ^ (pcg_hash(right ^ random_word(round)) & mask);
        left = right;
        right = next;
    }
    return (left << half) | right;
}

// randperm: out[i] = element i of a pseudo-random permutation of [0, n), as int32 bits. The Feistel
// network permutes [0, 4^half), the smallest such range holding n, and each value is walked through
// it until it lands inside [0, n) again ("cycle walking" keeps it a bijection of [0, n)). Every
// element is made independently: no sort, no host work, the same numbers as the cpu device.
@compute @workgroup_size(WORKGROUP_SIZE)
fn permutation(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) li: u32) {
    let i = element_id(wg, nwg, li);
    let n = params.numel;
    if (i >= n) { return; }
    var v = feistel(i, params.half);
    while (v >= n) {
        v = feistel(v, params.half);
    }
    out[i] = bitcast<f32>(v);
}
