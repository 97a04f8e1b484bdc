"""The Optimizer base: torch.optim's param_groups, per-parameter state, state_dict, zero_grad and
the one update loop every optimizer shares.

step() does no tensor maths: each parameter with a gradient is updated by one fused kernel,
`param.backend.optimizer_step(update, param, grad, states, hyper)`, where `update` is the
optimizer's FusedUpdate (optim/fused.py: its hyperparameters and state buffers by name) and
hyper() gives that step's record. hyper() also advances per-step state (the step count), because
a replayed step (webgrad.jit) calls it again without running step().

An optimizer subclass declares `update` and supplies two methods:
    _init_state(param, group, state)   fills a parameter's empty state (its tensors, step = 0)
    _hyper(group, state, fresh)        that step's hyperparameters by name (a dict); fresh is
                                       True on the step that made the state
"""
from collections import defaultdict
from itertools import chain

from .. import dtypes
from .._tensor import Tensor
from ..autograd import enable_grad, no_grad
from ..ops.creation import tensor, zeros_like
from ..ops.movement import write_into


def check_settings(**settings):
    """torch's ValueError for a setting that must be >= 0 (NaN included), checked in the order given."""
    for name, value in settings.items():
        if not 0.0 <= value:
            what = {"lr": "learning rate", "eps": "epsilon value"}.get(name, f"{name} value")
            raise ValueError(f"Invalid {what}: {value}")


class Optimizer:
    update = None   # the FusedUpdate this optimizer runs per parameter

    def __init__(self, params, defaults):
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, "
                            "but got a Tensor")
        self.defaults = dict(defaults)
        self.state = defaultdict(dict)   # parameter -> its state dict (Tensor hashes by identity), as torch
        self.param_groups = []
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def add_param_group(self, param_group):
        """Adds the dict itself (as torch does), its missing settings filled from the defaults;
        params may be (name, tensor) pairs, as named_parameters() gives."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the ordering "
                            "of tensors in sets will change between runs. Please use a list instead.")
        params = list(params)
        names = [p[0] for p in params if isinstance(p, tuple)]
        params = [p[1] if isinstance(p, tuple) else p for p in params]
        if names:
            if len(names) != len(params):
                raise ValueError("all optimizer params should be with/without names. Some param names are missing")
            param_group["param_names"] = names
        param_group["params"] = params
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params is {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
            if not p.is_contiguous():
                raise ValueError("optimizer: parameters must be contiguous (the fused update reads them flat)")
        for group in self.param_groups:
            if ("param_names" in param_group) != ("param_names" in group):
                which = "with names" if "param_names" in param_group else "without names"
                raise ValueError(f"all optimizer param groups should be with/without names. cannot add param group "
                                 f"{which} to the optimizer")
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        for name, default in self.defaults.items():
            param_group.setdefault(name, default)
        self.param_groups.append(param_group)

    def zero_grad(self, set_to_none=True):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.grad = None if set_to_none else zeros_like(p.grad)

    def step(self, closure=None):
        """Update every parameter that has a gradient; returns closure()'s loss when given one."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        with no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        self._step_parameter(p, group)
        return loss

    def _step_parameter(self, param, group):
        state = self.state.get(param, {})
        fresh = not state
        if fresh:
            self._init_state(param, group, state)
            if state:   # as torch, no entry for a parameter without state (SGD without momentum)
                self.state[param] = state
        update = self.update

        def hyper():   # once per step, replays included
            nonlocal fresh
            record = update.record(**self._hyper(group, state, fresh))
            fresh = False
            return record
        states = {name: state[name]._view for name in update.states if name in state}
        param.backend.optimizer_step(update, param._view, param.grad.contiguous()._view, states, hyper)

    def _init_state(self, param, group, state):
        raise NotImplementedError

    def _hyper(self, group, state, fresh):
        raise NotImplementedError

    # ---- torch's state_dict format: parameters by their index over the groups ----
    def state_dict(self):
        """{'state': {index: {name: tensor, 'step': 0-d float32 tensor}}, 'param_groups': [group with
        'params': [indices]]}. The tensors are the optimizer's own, as in torch."""
        index, groups = {}, []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            for p in group["params"]:
                index.setdefault(id(p), len(index))
            packed["params"] = [index[id(p)] for p in group["params"]]
            groups.append(packed)
        state = {}
        for p, s in self.state.items():
            if isinstance(p, Tensor):
                # the step count is kept as a number, so that replays can advance it; torch's is a tensor
                state[index[id(p)]] = {k: tensor(v, dtype=dtypes.float32, device=p.device) if k == "step" else v
                                       for k, v in s.items()}
            else:   # loaded state of no parameter (load_state_dict), as it came
                state[p] = s
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Loads a state_dict of this optimizer or of torch's (tensors converted to webgrad's): the
        groups' settings and each parameter's state. Groups, state dicts and same-shaped state
        tensors are updated in place, so steps recorded by webgrad.jit keep working after a load."""
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(self.param_groups, saved_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match the size of "
                             "optimizer's group")
        params = dict(zip(chain.from_iterable(g["params"] for g in saved_groups),
                          chain.from_iterable(g["params"] for g in self.param_groups)))
        for key, saved in state_dict["state"].items():
            if key in params:
                self._load_state(params[key], saved)
            else:   # as torch: state of no parameter is kept as it is
                self.state[key] = saved
        for group, saved in zip(self.param_groups, saved_groups):
            loaded = dict(saved, params=group["params"])
            if "param_names" in group and "param_names" not in saved:
                loaded["param_names"] = group["param_names"]
            group.clear()
            group.update(loaded)
            for name, default in self.defaults.items():
                group.setdefault(name, default)

    def _load_state(self, param, saved):
        state = self.state.setdefault(param, {})
        loaded = {}
        for name, value in saved.items():
            if name == "step":
                loaded[name] = float(value)
            elif isinstance(value, Tensor):
                if tuple(value.shape) != tuple(param.shape):
                    raise ValueError(f"loaded state {name!r} has shape {tuple(value.shape)}, its parameter "
                                     f"{tuple(param.shape)}")
                current = state.get(name)
                if current is None:
                    current = zeros_like(param)
                write_into(current, value.to(dtype=param.dtype, device=param.device))
                loaded[name] = current
            elif value is not None:   # torch's SGD may hold momentum_buffer None
                loaded[name] = value
        state.clear()
        state.update(loaded)
        if not state:
            del self.state[param]

    def __repr__(self):
        lines = [type(self).__name__ + " ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines += [f"    {k}: {v}" for k, v in sorted(group.items()) if k != "params"]
        return "\n".join(lines) + "\n)"
