"""Adam and AdamW (Adam with weight decay decoupled from the gradient)."""
from ..ops.creation import zeros_like
from .optimizer import Optimizer


class Adam(Optimizer):
    decoupled_weight_decay = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0):
        if lr < 0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if eps < 0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        for i, beta in enumerate(betas):
            if not 0.0 <= beta < 1.0:
                raise ValueError(f"Invalid beta parameter at index {i}: {beta}")
        if weight_decay < 0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay))

    def _update(self, param, grad, group, state):
        if not state:
            state.update(step=0, exp_avg=zeros_like(param), exp_avg_sq=zeros_like(param))

        def hyper():   # runs once per step, replays included (see Backend.optimizer_step)
            state["step"] += 1
            beta1, beta2 = (float(b) for b in group["betas"])
            return [float(group["lr"]), beta1, beta2, float(group["eps"]), float(group["weight_decay"]),
                    1 - beta1 ** state["step"], 1 - beta2 ** state["step"], int(self.decoupled_weight_decay)]
        param.backend.optimizer_step("adam", param._view, grad._view, [state["exp_avg"]._view, state["exp_avg_sq"]._view], hyper)


class AdamW(Adam):
    decoupled_weight_decay = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        super().__init__(params, lr, betas, eps, weight_decay)
