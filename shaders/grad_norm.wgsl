// The norm of many gradients together, in parts (torch.nn.utils.get_total_norm, which
// clip_grad_norm_ takes): each workgroup folds its share of every gradient the dispatch binds into
// one partial, out[`out_offset` + its number]; webgrad/nn/utils.py folds the partials (a sum, a max
// or a min) and takes the root. Gradient s of the dispatch (a segment) is `sizes[s]` elements from
// element `offsets[s]` of its binding (gradients may share one). A thread visits element j of each
// segment for j its number, then on by the dispatch's threads (kernels/optim.py sizes the grid so
// that no loop runs long: lavapipe ends loops past 65535 iterations).
// `order`: 0 the 2-norm (a sum of squares), 1 the 1-norm (a sum of |x|), 2 inf (the max of |x|),
// 3 -inf (the min of |x|), 4 `p` (a sum of |x|^p).
// Generated per set of bindings: the bindings, and one loop per segment in main.
// Parameters: kernels/optim.py's norm_params.

{{bindings}}

alias Partial = f32;
const PARTIALS: u32 = WORKGROUP_SIZE;   // shaders/workgroup.wgsl's reduction over a workgroup

fn is_nan(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

// a and b folded: the max or min for the orders inf and -inf (keeping NaN, as torch does), else a sum
fn merge(a: f32, b: f32, how: u32) -> f32 {
    if (params.order == 2u || params.order == 3u) {
        if (is_nan(a) || is_nan(b)) {
            return a + b;
        }
        return select(min(a, b), max(a, b), params.order == 2u);
    }
    return a + b;
}

// What element x adds to the norm.
fn term(x: f32) -> f32 {
    let a = abs(x);
    switch params.order {
        case 0u: { return x * x; }
        case 4u: { return select(pow(a, params.p), 0.0, a == 0.0); }
        default: { return a; }
    }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let first = element_id(wg, nwg, li);
    let threads = nwg.x * nwg.y * WORKGROUP_SIZE;
    var acc = select(0.0, f32_from_bits(0x7f800000u), params.order == 3u);   // the fold's identity
{{segments}}
    let total = workgroup_merge(acc, li, WORKGROUP_SIZE, 0u);
    if (li == 0u) {
        out[params.out_offset + flat_id(wg, nwg)] = total;
    }
}
