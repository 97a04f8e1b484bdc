// Elementwise map: out = EXPR(a, b, c) over strided (and broadcast, stride 0) operands.
// Params: [0] numel, [1] ndim, [2 .. 2+ndim) shape, then a layout (offset, ndim strides) for the
// output and for each tensor operand in order, then scalar operands as raw words.
// Generated per op: the operand bindings, their loads and the expression ({{...}} below).
alias T = {{compute}};

{{bindings}}

fn erf_f(x: f32) -> f32 {
    // Abramowitz & Stegun 7.1.26, |error| < 1.5e-7 (the cpu device uses the same formula)
    let t = 1.0 / (1.0 + 0.3275911 * abs(x));
    let poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
    return sign(x) * (1.0 - poly * exp(-x * x));
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

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let i = flat_id(wg, nwg) * 256u + li;
    if (i >= p[0]) { return; }
    let nd = p[1];
{{body}}
}
