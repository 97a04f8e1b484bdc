// Elementwise map: out = EXPR(a, b, c) over strided (and broadcast, stride 0) operands.
// Parameters: kernels/map.py's map_params. Generated per op: the operand bindings, their loads
// and the expression ({{...}} below); for a uint8 result, the packing of a word's bytes.
alias T = {{compute}};

{{bindings}}

fn erf_f(x: f32) -> f32 {
    // Abramowitz & Stegun 7.1.26, |error| < 1.5e-7 (the cpu device uses the same formula)
    let t = 1.0 / (1.0 + 0.3275911 * abs(x));
    let poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
    return sign(x) * (1.0 - poly * exp(-x * x));
}

fn tanh_f(x: f32) -> f32 {
    // Not the builtin: drivers may compute it as (e^2x - 1) / (e^2x + 1), which keeps no relative
    // precision near 0 (lavapipe gave tanh(1e-30) = 3e-8). Near 0 Cephes' odd polynomial (tanhf, a few
    // ulp); elsewhere 1 - 2 / (e^2|x| + 1), with |x| capped where tanh is 1 in f32 so exp cannot overflow.
    let a = abs(x);
    if (a < 0.625) {
        let z = x * x;
        let poly = (((-5.70498872745e-3 * z + 2.06390887954e-2) * z - 5.37397155531e-2) * z
                    + 1.33314422036e-1) * z - 3.33332819422e-1;
        return x + x * z * poly;
    }
    let r = 1.0 - 2.0 / (exp(2.0 * min(a, 15.0)) + 1.0);
    return select(r, -r, x < 0.0);
}

fn log_f(x: f32) -> f32 {
    // Not the builtin near 1: WGSL lets log be off by 2^-21 absolute on [0.5, 2], so no relative
    // precision as log(x) nears 0 (lavapipe: 3e-6 at x = 0.992). There 2 atanh(s), s = (x-1)/(x+1),
    // as its odd series (|s| < 0.18, so six terms reach f32 precision; x - 1 is exact).
    if (x > 0.7 && x < 1.4) {
        let s = (x - 1.0) / (x + 1.0);
        let z = s * s;
        return 2.0 * s * (1.0 + z * (1.0 / 3.0 + z * (0.2 + z * (1.0 / 7.0 + z * (1.0 / 9.0 + z / 11.0)))));
    }
    return log(x);
}

fn sigmoid_f(x: f32) -> f32 {
    let e = exp(-abs(x));
    return select(e / (1.0 + e), 1.0 / (1.0 + e), x >= 0.0);
}

fn pow_f(a: f32, b: f32) -> f32 {
    // WGSL's pow is undefined for a < 0; like C's pow, odd integer exponents keep the sign
    if (b == 0.0) { return 1.0; }
    let r = pow(abs(a), b);
    if (a >= 0.0) { return r; }
    if (fract(b) != 0.0) { return f32_from_bits(0x7fc00000u); }
    return select(r, -r, fract(b * 0.5) != 0.0);
}

fn fmod_f(a: f32, b: f32) -> f32 {
    // C's fmod, as NumPy's on the cpu device: WGSL's float % is a - b * trunc(a / b) with the product
    // rounded, so 1 % 0.1 gives 0, not 0.09999998. Here each step takes q b off exactly (split
    // Dekker-style into p + e; one step per 24 bits of the quotient, exact below 2^24), and a
    // remainder left on the wrong side of zero steps back by |b|.
    // by bits, as wgsl_is_nan: compilers may assume a == a (a NaN or infinite a, a NaN b: NaN)
    let a_bits = bitcast<u32>(a) & 0x7fffffffu;
    if (b == 0.0 || a_bits >= 0x7f800000u || (bitcast<u32>(b) & 0x7fffffffu) > 0x7f800000u) {
        return f32_from_bits(0x7fc00000u);
    }
    let split_b = 4097.0 * b;
    let b_hi = split_b - (split_b - b);
    let b_lo = b - b_hi;
    var r = a;
    for (var i = 0; i < 12; i++) {
        let q = trunc(r / b);
        if (q == 0.0) { break; }
        let split_q = 4097.0 * q;
        let q_hi = split_q - (split_q - q);
        let q_lo = q - q_hi;
        let p = q * b;
        let e = ((q_hi * b_hi - p) + q_hi * b_lo + q_lo * b_hi) + q_lo * b_lo;
        r = (r - p) - e;
    }
    if (r != 0.0 && (r < 0.0) != (a < 0.0)) { r = r + select(-abs(b), abs(b), a >= 0.0); }
    return r;
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let i = element_id(wg, nwg, li);
    if (i >= params.numel) { return; }
{{body}}
}
