"""Stochastic gradient descent with optional momentum, dampening, Nesterov and weight decay."""
from ..ops.creation import zeros_like
from .optimizer import Optimizer


class SGD(Optimizer):
    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False):
        if lr < 0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov))

    def _update(self, param, grad, group, state):
        if group["momentum"] == 0:
            param.backend.optimizer_step("sgd", param._view, grad._view, [], lambda: [
                float(group["lr"]), float(group["weight_decay"])])
            return
        first_step = "momentum_buffer" not in state   # the kernel then starts the buffer as the gradient
        if first_step:
            state["momentum_buffer"] = zeros_like(param)

        def hyper():   # runs once per step, replays included (see Backend.optimizer_step)
            nonlocal first_step
            flag, first_step = first_step, False
            return [float(group["lr"]), float(group["weight_decay"]), float(group["momentum"]),
                    float(group["dampening"]), int(bool(group["nesterov"])), int(flag)]
        param.backend.optimizer_step("sgd_momentum", param._view, grad._view, [state["momentum_buffer"]._view], hyper)
