"""The Optimizer base: PyTorch's param_groups, per-parameter state, zero_grad and step.

step() does no tensor maths: each parameter is updated by one fused kernel,
`param.backend.optimizer_step(kind, param, grad, states, hyper)` (shaders/optim.wgsl on webgpu,
its NumPy twin on cpu), where hyper() lists floats and int flags in the kernel's order. hyper()
also advances per-step state (step counts), because a replayed step (webgrad.jit) calls it again
without running step().
"""
from ..autograd import enable_grad, no_grad
from ..ops.creation import zeros_like
from .._tensor import Tensor


class Optimizer:
    def __init__(self, params, defaults):
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, "
                            "but got a Tensor")
        self.defaults = dict(defaults)
        self.state = {}          # parameter -> its state dict (Tensor hashes by identity)
        self.param_groups = []
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def add_param_group(self, param_group):
        group = dict(param_group)
        params = group["params"]
        group["params"] = [params] if isinstance(params, Tensor) else list(params)
        for p in group["params"]:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params is {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
            if not p.is_contiguous():
                raise ValueError("optimizer: parameters must be contiguous (the fused update reads them flat)")
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in group["params"]):
            raise ValueError("some parameters appear in more than one parameter group")
        for name, default in self.defaults.items():
            group.setdefault(name, default)
        self.param_groups.append(group)

    def zero_grad(self, set_to_none=True):
        for group in self.param_groups:
            for p in group["params"]:
                p.grad = None if set_to_none or p.grad is None else zeros_like(p.grad)

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
                        self._update(p, p.grad.contiguous(), group, self.state.setdefault(p, {}))
        return loss

    def _update(self, param, grad, group, state):
        raise NotImplementedError

    def __repr__(self):
        lines = [type(self).__name__ + " ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines += [f"    {k}: {v}" for k, v in sorted(group.items()) if k != "params"]
        return "\n".join(lines) + "\n)"
