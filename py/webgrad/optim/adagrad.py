"""Adagrad, with learning-rate decay."""
from .fused import FusedUpdate
from .optimizer import Optimizer, check_settings


def _adagrad_numpy(np, param, grad, states, h):
    """shaders/optim.wgsl's adagrad."""
    g = -grad if h.maximize else grad
    if h.weight_decay != 0:
        g = g + h.weight_decay * param
    state_sum = states["sum"]
    state_sum += g * g
    param -= h.clr * g / (np.sqrt(state_sum) + h.eps)


# clr = lr / (1 + (step - 1) * lr_decay), worked out in double precision each step, as torch does (a
# gated step's kernel works it out from lr and lr_decay)
ADAGRAD_UPDATE = FusedUpdate("adagrad", dict(clr="f32", weight_decay="f32", eps="f32", maximize="bool", lr="f32",
                                             lr_decay="f32"), ("sum",), _adagrad_numpy)


class Adagrad(Optimizer):
    update = ADAGRAD_UPDATE

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10, *,
                 maximize=False):
        check_settings(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                       initial_accumulator_value=initial_accumulator_value, eps=eps)
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value, maximize=maximize))
        for group in self.param_groups:   # as torch, the state exists from the start
            arenas = self._arenas_of(group)
            for p in group["params"]:
                if not self.state.get(p):
                    self._new_state(p, arenas)

    def _initial(self, group):
        # as torch: the constructor's initial_accumulator_value, whatever the group's
        return {"sum": self.defaults["initial_accumulator_value"]}

    def _hyper(self, group, step, fresh):
        return dict(clr=float(group["lr"]) / (1 + (step - 1) * group["lr_decay"]),
                    weight_decay=group["weight_decay"], eps=group["eps"], maximize=group["maximize"],
                    lr=group["lr"], lr_decay=group["lr_decay"])
