// Gradient clipping's scaling (torch.nn.utils.clip_grads_with_norm_): every gradient the dispatch
// binds, in place, times min(1, max_norm / (total + 1e-6)), worked out as torch does (the
// reciprocal of total + 1e-6, times max_norm, clamped to 1 keeping NaN); the total norm is read
// from `total` at `total_offset`. Segments and loops as in shaders/grad_norm.wgsl.
// Generated per set of bindings: the bindings, and one loop per segment in main.
// Parameters: kernels/optim.py's scale_params.

{{bindings}}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let first = element_id(wg, nwg, li);
    let threads = nwg.x * nwg.y * WORKGROUP_SIZE;
    let unclamped = params.max_norm * (1.0 / (f32(total[params.total_offset]) + 1e-6));
    let coef = select(unclamped, 1.0, unclamped > 1.0);
{{segments}}
}
