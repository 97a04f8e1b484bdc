"""Adadelta."""
from .fused import FusedUpdate
from .optimizer import Optimizer, check_settings


def _adadelta_numpy(np, param, grad, states, h):
    """shaders/optim.wgsl's adadelta."""
    g = -grad if h.maximize else grad
    if h.weight_decay != 0:
        g = g + h.weight_decay * param
    square_avg, acc_delta = states["square_avg"], states["acc_delta"]
    square_avg[...] = square_avg * h.rho + (1 - h.rho) * g * g
    delta = np.sqrt(acc_delta + h.eps) / np.sqrt(square_avg + h.eps) * g
    acc_delta[...] = acc_delta * h.rho + (1 - h.rho) * delta * delta
    param -= h.lr * delta


ADADELTA_UPDATE = FusedUpdate("adadelta", dict(lr="f32", rho="f32", eps="f32", weight_decay="f32", maximize="bool"),
                              ("square_avg", "acc_delta"), _adadelta_numpy)


class Adadelta(Optimizer):
    update = ADADELTA_UPDATE

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, *, maximize=False):
        check_settings(lr=lr)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        check_settings(eps=eps, weight_decay=weight_decay)
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize))

    def _initial(self, group):
        return dict(square_avg=0.0, acc_delta=0.0)

    def _hyper(self, group, step, fresh):
        return dict(lr=group["lr"], rho=group["rho"], eps=group["eps"], weight_decay=group["weight_decay"],
                    maximize=group["maximize"])
