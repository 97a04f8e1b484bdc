"""Stochastic gradient descent with optional momentum, dampening, Nesterov, weight decay and maximize."""
from .fused import FusedUpdate
from .optimizer import Optimizer, check_settings


def _sgd_numpy(np, param, grad, states, h):
    """shaders/optim.wgsl's sgd."""
    g = -grad if h.maximize else grad
    if h.weight_decay != 0:
        g = g + h.weight_decay * param
    if h.momentum != 0:
        buf = states["momentum_buffer"]
        buf[...] = g if h.first_step else buf * h.momentum + (1 - h.dampening) * g
        g = g + h.momentum * buf if h.nesterov else buf
    param -= h.lr * g


# momentum_buffer only with momentum; first_step: the buffer is new and starts as the gradient
SGD_UPDATE = FusedUpdate("sgd", dict(lr="f32", weight_decay="f32", momentum="f32", dampening="f32", nesterov="bool",
                                     maximize="bool", first_step="bool"),
                         ("momentum_buffer",), _sgd_numpy)


class SGD(Optimizer):
    update = SGD_UPDATE
    counts_steps = False

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *,
                 maximize=False):
        check_settings(lr=lr, momentum=momentum, weight_decay=weight_decay)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                                      nesterov=nesterov, maximize=maximize))

    def _initial(self, group):
        return {"momentum_buffer": 0.0} if group["momentum"] != 0 else {}

    def _hyper(self, group, step, fresh):
        return dict(lr=group["lr"], weight_decay=group["weight_decay"], momentum=group["momentum"],
                    dampening=group["dampening"], nesterov=group["nesterov"], maximize=group["maximize"],
                    first_step=fresh)
