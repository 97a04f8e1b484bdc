"""Adam, and AdamW (Adam with its weight decay decoupled from the gradient)."""
from .fused import FusedUpdate, lerp
from .optimizer import Optimizer, check_settings


def _adam_numpy(np, param, grad, states, h):
    """shaders/optim.wgsl's adam."""
    g = -grad if h.maximize else grad
    if h.weight_decay != 0:
        if h.decoupled_weight_decay:
            param *= 1 - h.lr * h.weight_decay
        else:
            g = g + h.weight_decay * param
    exp_avg, exp_avg_sq = states["exp_avg"], states["exp_avg_sq"]
    exp_avg[...] = lerp(exp_avg, g, 1 - h.beta1)
    exp_avg_sq[...] = exp_avg_sq * h.beta2 + (1 - h.beta2) * g * g
    v = exp_avg_sq
    if h.amsgrad:
        np.maximum(states["max_exp_avg_sq"], exp_avg_sq, out=states["max_exp_avg_sq"])
        v = states["max_exp_avg_sq"]
    param -= h.step_size * exp_avg / (np.sqrt(v) / h.bias_correction2_sqrt + h.eps)


# step_size = lr / (1 - beta1^t) and bias_correction2_sqrt = sqrt(1 - beta2^t) are worked out in
# double precision each step, as torch does
ADAM_UPDATE = FusedUpdate("adam", dict(lr="f32", beta1="f32", beta2="f32", eps="f32", weight_decay="f32",
                                       step_size="f32", bias_correction2_sqrt="f32", amsgrad="bool",
                                       maximize="bool", decoupled_weight_decay="bool"),
                          ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"), _adam_numpy)


class Adam(Optimizer):
    update = ADAM_UPDATE

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
                 maximize=False, decoupled_weight_decay=False):
        check_settings(lr=lr, eps=eps)
        for i, beta in enumerate(betas):
            if not 0.0 <= beta < 1.0:
                raise ValueError(f"Invalid beta parameter at index {i}: {beta}")
        check_settings(weight_decay=weight_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize, decoupled_weight_decay=decoupled_weight_decay))

    def _initial(self, group):
        return dict(exp_avg=0.0, exp_avg_sq=0.0, **({"max_exp_avg_sq": 0.0} if group["amsgrad"] else {}))

    def _hyper(self, group, step, fresh):
        beta1, beta2 = (float(b) for b in group["betas"])
        return dict(lr=group["lr"], beta1=beta1, beta2=beta2, eps=group["eps"], weight_decay=group["weight_decay"],
                    step_size=float(group["lr"]) / (1 - beta1 ** step),
                    bias_correction2_sqrt=(1 - beta2 ** step) ** 0.5, amsgrad=group["amsgrad"],
                    maximize=group["maximize"], decoupled_weight_decay=group["decoupled_weight_decay"])


class AdamW(Adam):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize,
                         decoupled_weight_decay=True)
