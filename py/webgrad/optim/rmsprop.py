"""RMSprop, optionally centered and with momentum."""
from .fused import FusedUpdate, lerp
from .optimizer import Optimizer, check_settings


def _rmsprop_numpy(np, param, grad, states, h):
    """shaders/optim.wgsl's rmsprop."""
    g = -grad if h.maximize else grad
    if h.weight_decay != 0:
        g = g + h.weight_decay * param
    square_avg = states["square_avg"]
    square_avg[...] = square_avg * h.alpha + (1 - h.alpha) * g * g
    if h.centered:
        grad_avg = states["grad_avg"]
        grad_avg[...] = lerp(grad_avg, g, 1 - h.alpha)
        avg = np.sqrt(square_avg - grad_avg * grad_avg) + h.eps
    else:
        avg = np.sqrt(square_avg) + h.eps
    if h.momentum > 0:
        buf = states["momentum_buffer"]
        buf[...] = buf * h.momentum + g / avg
        param -= h.lr * buf
    else:
        param -= h.lr * g / avg


# momentum_buffer only with momentum, grad_avg only when centered
RMSPROP_UPDATE = FusedUpdate("rmsprop", dict(lr="f32", alpha="f32", eps="f32", weight_decay="f32", momentum="f32",
                                             centered="bool", maximize="bool"),
                             ("square_avg", "momentum_buffer", "grad_avg"), _rmsprop_numpy)


class RMSprop(Optimizer):
    update = RMSPROP_UPDATE

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False, *,
                 maximize=False):
        check_settings(lr=lr, eps=eps, momentum=momentum, weight_decay=weight_decay, alpha=alpha)
        super().__init__(params, dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                                      weight_decay=weight_decay, maximize=maximize))

    def _initial(self, group):
        return dict(square_avg=0.0, **({"momentum_buffer": 0.0} if group["momentum"] > 0 else {}),
                    **({"grad_avg": 0.0} if group["centered"] else {}))

    def _hyper(self, group, step, fresh):
        return dict(lr=group["lr"], alpha=group["alpha"], eps=group["eps"], weight_decay=group["weight_decay"],
                    momentum=group["momentum"], centered=group["centered"], maximize=group["maximize"])
