"""The Optimizer base: torch.optim's param_groups, per-parameter state, state_dict, zero_grad and
the one update loop every optimizer shares.

step() does no tensor maths: each param group's parameters and their state live in flat arenas
(optim/arena.py), and the parameters with a gradient are updated together by fused kernels,
`backend.optimizer_step(update, regions, states, segments, hyper)`: one call per arena and
per set of parameters at the same step count (torch keeps one per parameter: a parameter without
a gradient at some step falls behind), each one dispatch unless more parameters than one dispatch
can bind. `update` is the optimizer's FusedUpdate (optim/fused.py: its hyperparameters and state
buffers by name) and hyper() gives that step's record. hyper() also advances the step counts,
because a replayed step (webgrad.jit) calls it again without running step().

A GradScaler's step is gated instead (torch's fused optimizers take its overflow check the same
way, as the tensor `found_inf`): nothing is read back, so the step is skipped on the device where
the gradients overflowed, and the step count lives there, in a gate shared by the parameters that
step together: three float32 [overflowed, step count, gradient factor], state["step"] a view of the
second. The factor is the GradScaler's 1 / scale where it has not unscaled the gradients itself
(`inv_grad_scale`; torch's fused optimizers take the scale as `grad_scale`), else 1: the fused
update multiplies each gradient by it as it reads it, and leaves it so, as torch's do. A
parameter whose count has moved to the device keeps it there, and its later steps are gated too.

An optimizer subclass declares `update` (and counts_steps, where torch keeps no step) and supplies:
    _initial(group)               the state buffers the group's settings keep: name -> the value a
                                  new one starts at (its tensors are arena views shaped like the
                                  parameter)
    _hyper(group, step, fresh)    that step's hyperparameters by name (a dict); step is the count
                                  after this step, fresh True on the step that made the state
"""
from collections import defaultdict
from itertools import chain

from .. import dtypes
from .._tensor import Tensor
from ..autograd import enable_grad, no_grad
from ..ops.creation import tensor, zeros, zeros_like
from ..ops.movement import write_into
from .arena import GroupArenas, unique


def check_settings(**settings):
    """torch's ValueError for a setting that must be >= 0 (NaN included), checked in the order given."""
    for name, value in settings.items():
        if not 0.0 <= value:
            what = {"lr": "learning rate", "eps": "epsilon value"}.get(name, f"{name} value")
            raise ValueError(f"Invalid {what}: {value}")


class Optimizer:
    update = None         # the FusedUpdate this optimizer runs
    counts_steps = True   # its state keeps a step count, as torch's does (SGD's keeps none)

    def __init__(self, params, defaults):
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, "
                            "but got a Tensor")
        self.defaults = dict(defaults)
        self.state = defaultdict(dict)   # parameter -> its state dict (Tensor hashes by identity), as torch
        self.param_groups = []
        self._arenas = {}   # id(group) -> its GroupArenas
        self._gates = {}    # id(parameter) -> its gate, once it has stepped gated
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

    @property
    def _step_supports_amp_scaling(self):
        """torch's flag for an optimizer that GradScaler.step hands its overflow check (found_inf)
        rather than reading it: those whose step is this fused one."""
        return type(self).step is Optimizer.step

    def step(self, closure=None):
        """Update every parameter that has a gradient; returns closure()'s loss when given one."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        # set by GradScaler.step for this call: the overflow check, and 1 / scale where it left the gradients scaled
        found_inf, inv_grad_scale = getattr(self, "found_inf", None), getattr(self, "inv_grad_scale", None)
        with no_grad():
            for group in self.param_groups:
                self._step_group(group, found_inf, inv_grad_scale)
        return loss

    def _step_group(self, group, found_inf, inv_grad_scale):
        params = [p for p in unique(group["params"]) if p.grad is not None]
        if not params:
            return
        arenas = self._arenas_of(group)
        together = {}   # (arena, step count, fresh) -> [(parameter, its state)]: one fused call each
        gated = {}      # (arena, its gate, or the count it starts at) -> [(parameter, its state)]
        for p in params:
            state = self.state.get(p)
            fresh = not state
            if fresh:
                state = self._new_state(p, arenas)
            arena, gate = arenas.of[id(p)], self._gates.get(id(p))
            if found_inf is None and inv_grad_scale is None and gate is None:
                together.setdefault((arena, state.get("step"), fresh), []).append((p, state))
            else:   # SGD counts no steps: its gate's count starts at whether it has stepped
                start = ("gate", id(gate)) if gate is not None else ("count", state.get("step", float(not fresh)))
                gated.setdefault((arena, start), []).append((p, state))
        for (arena, _, fresh), members in together.items():
            self._update(group, arena, members, fresh)
        for (arena, (_, start)), members in gated.items():
            self._update_gated(group, arena, members, start, found_inf, inv_grad_scale)

    def _update(self, group, arena, members, fresh):
        update, states = self.update, [state for _, state in members]

        def hyper():   # once per step, replays included
            nonlocal fresh
            if self.counts_steps:
                for state in states:
                    state["step"] += 1
            record = update.record(**self._hyper(group, states[0].get("step"), fresh))
            fresh = False
            return record
        segments = [(arena.start[id(p)], _gradient(p, arena)._view) for p, _ in members]
        arena.regions[0].backend.optimizer_step(update, [r._view for r in arena.regions], arena.names, segments, hyper)

    def _update_gated(self, group, arena, members, start, found_inf, inv_grad_scale):
        """members' update, skipped on the device where found_inf is nonzero, their gradients read
        times inv_grad_scale (where given)."""
        gate = self._gate_of(group, members, start)
        overflowed, step_count, grad_factor = gate[0], gate[1], gate[2]
        if found_inf is None:
            overflowed.fill_(0.0)
            step_count.add_(1.0)
        else:   # the gate holds 1 or 0 (a NaN found_inf is an overflow, whatever a kernel makes of NaN)
            clean = (found_inf.to(gate.device) == 0).float()
            overflowed.copy_(1 - clean)
            step_count.add_(clean)
        if inv_grad_scale is None:
            grad_factor.fill_(1.0)
        else:
            grad_factor.copy_(inv_grad_scale.to(gate.device).reshape(()))

        def hyper(step_count=1.0):   # the record at a count read back (cpu); webgpu's kernel reads the gate
            return self.update.record(**self._hyper(group, step_count, step_count == 1))
        read = [(p, _gradient(p, arena)) for p, _ in members]
        arena.regions[0].backend.optimizer_step(self.update, [r._view for r in arena.regions], arena.names,
                                                [(arena.start[id(p)], g._view) for p, g in read], hyper,
                                                gate=gate._view)
        if inv_grad_scale is not None:   # the update left the gradients it read unscaled: copies too
            for p, g in read:
                if g is not p.grad:
                    write_into(p.grad, g)

    def _gate_of(self, group, members, start):
        """The gate members step with: theirs, or a new one at step count `start` where they have
        none, or a copy where they share theirs with parameters not stepping now (which keep it)."""
        first = members[0][0]
        gate = self._gates.get(id(first))
        if gate is not None and sum(self._gates.get(id(p)) is gate for p in unique(group["params"])) == len(members):
            return gate
        made = zeros(3, dtype=dtypes.float32, device=first.device)
        if gate is None:
            made[1].fill_(start)
        else:
            made.copy_(gate)
        for p, state in members:
            self._gates[id(p)] = made
            if self.counts_steps:
                state["step"] = made[1]
        return made

    def _arenas_of(self, group):
        """The group's arenas, made anew where they no longer hold what the group has."""
        params, initial = unique(group["params"]), self._initial(group)
        arenas = self._arenas.get(id(group))
        if arenas is None or not arenas.current(params, initial, self.state):
            with no_grad():
                arenas = self._arenas[id(group)] = GroupArenas(params, initial, self.state)
        return arenas

    def _new_state(self, param, arenas):
        """param's state at its first step (kept in self.state unless it has none, as torch)."""
        state = {"step": 0.0} if self.counts_steps else {}
        state.update(arenas.of[id(param)].new_state(param))
        if state:
            self.state[param] = state
        return state

    def _initial(self, group):
        raise NotImplementedError

    def _hyper(self, group, step, fresh):
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
                # a step count is kept as a number, so that replays can advance it (a gated one is a
                # tensor on the device already); torch's is a tensor
                state[index[id(p)]] = {k: tensor(v, dtype=dtypes.float32, device=p.device)
                                       if k == "step" and not isinstance(v, Tensor) else v for k, v in s.items()}
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
                    current = self._arena_view(param, name) or zeros_like(param)
                write_into(current, value.to(dtype=param.dtype, device=param.device))
                loaded[name] = current
            elif value is not None:   # torch's SGD may hold momentum_buffer None
                loaded[name] = value
        gate = self._gates.get(id(param))
        if gate is not None:   # the count stays on the device (a gate several parameters share takes the last)
            gate[1].fill_(loaded.get("step", float(bool(loaded))))
            if "step" in loaded:
                loaded["step"] = gate[1]
        state.clear()
        state.update(loaded)
        if not state:
            del self.state[param]

    def _arena_view(self, param, name):
        """param's state tensor `name` in the arena that holds param, or None (the next step makes
        an arena that holds it, and copies the tensor in)."""
        for arenas in self._arenas.values():
            arena = arenas.of.get(id(param))
            if arena is not None and name in arena.names and arena.holds(param, None):
                arena.pristine.discard(id(param))
                return arena.view(param, 1 + arena.names.index(name))
        return None

    def __repr__(self):
        lines = [type(self).__name__ + " ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines += [f"    {k}: {v}" for k, v in sorted(group.items()) if k != "params"]
        return "\n".join(lines) + "\n)"


def _gradient(param, arena):
    """param's gradient as the fused kernel reads it: contiguous, in a buffer other than the arena."""
    grad = param.grad
    if grad.shape != param.shape or grad.device != param.device:
        raise RuntimeError(f"optimizer: a parameter of shape {tuple(param.shape)} on {param.device} has a gradient "
                           f"of shape {tuple(grad.shape)} on {grad.device}")
    grad = grad.contiguous()
    return grad.clone() if id(grad._storage) in arena.storages else grad
