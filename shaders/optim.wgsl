// Fused optimizer updates: one dispatch updates many parameter tensors (all those of a param group,
// up to what one dispatch can bind), one thread per element, reading the gradient and updating the
// parameter and its state in place with torch.optim's formulas (those of its single-tensor updates,
// in their order of operations).
//
// The parameters and their state live in a flat arena (webgrad/optim/arena.py): the parameters'
// region first, then one region per state buffer, laid out alike, region r at r * `region_stride`
// (all in one buffer, arena_0, or each at the start of its own, arena_r, stride 0). The updated
// tensors are segments: segment s of the dispatch's SEGMENTS covers its elements up to `ends[s]`
// (running ends), at element `starts[s]` of each region on, its gradient in grad_of(s, ...) from
// element `grad_offsets[s]` on. A gradient stays in the buffer the backward pass wrote it to: each is
// bound as it is (segments may share a binding), so no gradient is copied.
//
// Each kind of update is one function below, of one element. Its parameters are named after what
// kernels/optim.py passes them by name: `param` (a pointer, updated in place), `grad`, the state
// buffers (pointers) and the hyperparameters, all as the kind's FusedUpdate declares them
// (webgrad/optim/fused.py; flags arrive as bool). A state buffer that the optimizer's settings
// leave out is a zero that is not kept. Generated per kind, set of state buffers and gradient
// bindings ({{...}} below): the bindings and grad_of, and the entry point's loads, its call of the
// function and its stores. Parameters: kernels/optim.py's optim_params.
//
// A gated update (a GradScaler's step: nothing is read back) also binds `gate`, three f32 at
// `gate_offset`: whether the gradients overflowed (then the entry point returns, leaving parameters and
// state as they were, as torch skips the step), the step count after this step, kept on the device
// because a skipped step does not advance it, and the factor each gradient is read times (the
// scaler's 1 / scale where the gradients are still scaled, else 1; where it is not 1 the gradient is
// written back times it, as torch's fused updates leave the gradients unscaled). There a
// hyperparameter that depends on the count comes from the function `<kind>_<name>` below, given
// `step_count` and the other hyperparameters by name, in f32 (the record's value, worked out on the
// host in double precision, is the ungated update's).

{{bindings}}

// torch's lerp: start + weight * (end - start), computed from the nearer end
fn lerp(start: f32, end: f32, weight: f32) -> f32 {
    if (abs(weight) < 0.5) {
        return start + weight * (end - start);
    }
    return end - (end - start) * (1.0 - weight);
}

// torch.optim.SGD. first_step: the momentum buffer is new and starts as the gradient.
fn sgd(param: ptr<function, f32>, grad: f32, momentum_buffer: ptr<function, f32>, lr: f32, weight_decay: f32,
       momentum: f32, dampening: f32, nesterov: bool, maximize: bool, first_step: bool) {
    var g = select(grad, -grad, maximize);
    if (weight_decay != 0.0) {
        g += weight_decay * *param;
    }
    if (momentum != 0.0) {
        var buf = g;
        if (!first_step) {
            buf = *momentum_buffer * momentum + (1.0 - dampening) * g;
        }
        *momentum_buffer = buf;
        g = select(buf, g + momentum * buf, nesterov);
    }
    *param -= lr * g;
}

// torch.optim.Adam and AdamW (decoupled_weight_decay). step_size = lr / (1 - beta1^t) and
// bias_correction2_sqrt = sqrt(1 - beta2^t) come worked out in double precision.
fn adam(param: ptr<function, f32>, grad: f32, exp_avg: ptr<function, f32>, exp_avg_sq: ptr<function, f32>,
        max_exp_avg_sq: ptr<function, f32>, lr: f32, beta1: f32, beta2: f32, eps: f32, weight_decay: f32,
        step_size: f32, bias_correction2_sqrt: f32, amsgrad: bool, maximize: bool, decoupled_weight_decay: bool) {
    var g = select(grad, -grad, maximize);
    if (weight_decay != 0.0) {
        if (decoupled_weight_decay) {
            *param *= 1.0 - lr * weight_decay;
        } else {
            g += weight_decay * *param;
        }
    }
    *exp_avg = lerp(*exp_avg, g, 1.0 - beta1);
    *exp_avg_sq = *exp_avg_sq * beta2 + (1.0 - beta2) * g * g;
    var v = *exp_avg_sq;
    if (amsgrad) {
        *max_exp_avg_sq = max(*max_exp_avg_sq, v);
        v = *max_exp_avg_sq;
    }
    *param -= step_size * *exp_avg / (sqrt(v) / bias_correction2_sqrt + eps);
}

// torch.optim.RMSprop: centered subtracts the squared mean gradient (grad_avg) from square_avg.
fn rmsprop(param: ptr<function, f32>, grad: f32, square_avg: ptr<function, f32>, momentum_buffer: ptr<function, f32>,
           grad_avg: ptr<function, f32>, lr: f32, alpha: f32, eps: f32, weight_decay: f32, momentum: f32,
           centered: bool, maximize: bool) {
    var g = select(grad, -grad, maximize);
    if (weight_decay != 0.0) {
        g += weight_decay * *param;
    }
    *square_avg = *square_avg * alpha + (1.0 - alpha) * g * g;
    var avg: f32;
    if (centered) {
        *grad_avg = lerp(*grad_avg, g, 1.0 - alpha);
        avg = sqrt(*square_avg - *grad_avg * *grad_avg) + eps;
    } else {
        avg = sqrt(*square_avg) + eps;
    }
    if (momentum > 0.0) {
        *momentum_buffer = *momentum_buffer * momentum + g / avg;
        *param -= lr * *momentum_buffer;
    } else {
        *param -= lr * g / avg;
    }
}

// torch.optim.Adagrad. clr = lr / (1 + (t - 1) * lr_decay) comes worked out in double precision.
fn adagrad(param: ptr<function, f32>, grad: f32, sum: ptr<function, f32>, clr: f32, weight_decay: f32, eps: f32,
           maximize: bool) {
    var g = select(grad, -grad, maximize);
    if (weight_decay != 0.0) {
        g += weight_decay * *param;
    }
    *sum += g * g;
    *param -= clr * g / (sqrt(*sum) + eps);
}

// torch.optim.Adadelta.
fn adadelta(param: ptr<function, f32>, grad: f32, square_avg: ptr<function, f32>, acc_delta: ptr<function, f32>,
            lr: f32, rho: f32, eps: f32, weight_decay: f32, maximize: bool) {
    var g = select(grad, -grad, maximize);
    if (weight_decay != 0.0) {
        g += weight_decay * *param;
    }
    *square_avg = *square_avg * rho + (1.0 - rho) * g * g;
    let delta = sqrt(*acc_delta + eps) / sqrt(*square_avg + eps) * g;
    *acc_delta = *acc_delta * rho + (1.0 - rho) * delta * delta;
    *param -= lr * delta;
}

// The step-dependent hyperparameters of a gated update, at step count `step_count` (see above).

// base^count for a whole count, by squaring: pow() (exp2 of log2, inexact near 1, as beta2 = 0.999
// is) put Adam's parameters 4e-5 off torch's after a few steps on lavapipe, past float tolerance
fn power(base: f32, count: f32) -> f32 {
    var result = 1.0;
    var square = base;
    for (var n = u32(count); n != 0u; n >>= 1u) {
        if ((n & 1u) != 0u) {
            result *= square;
        }
        square *= square;
    }
    return result;
}

fn sgd_first_step(step_count: f32) -> bool {
    return step_count == 1.0;
}

fn adam_step_size(lr: f32, beta1: f32, step_count: f32) -> f32 {
    return lr / (1.0 - power(beta1, step_count));
}

fn adam_bias_correction2_sqrt(beta2: f32, step_count: f32) -> f32 {
    return sqrt(1.0 - power(beta2, step_count));
}

fn adagrad_clr(lr: f32, lr_decay: f32, step_count: f32) -> f32 {
    return lr / (1.0 + (step_count - 1.0) * lr_decay);
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let i = element_id(wg, nwg, li);
    if (i >= params_ends(SEGMENTS - 1u)) { return; }
    var s = 0u;          // the segment that holds element i (a few per dispatch: a short scan)
    var begin = 0u;      // where it begins among the dispatch's elements
    while (i >= params_ends(s)) {
        begin = params_ends(s);
        s++;
    }
    let at = params_starts(s) + i - begin;   // the element's place in each region of the arena
    let grad = grad_of(s, params_grad_offsets(s) + i - begin);
{{body}}
}
