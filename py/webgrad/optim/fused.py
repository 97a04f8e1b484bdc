"""An optimizer's fused update, declared once.

Each step updates a param group's parameters with one kernel: on the webgpu device one that calls
the WGSL function named `kind` in shaders/optim.wgsl for each element of them all (one thread per
element), on cpu its NumPy twin on each parameter's slice of the arena (optim/arena.py). A
FusedUpdate names everything that function is given, and both devices take it by those names:

    hyper   the step's hyperparameters and flags, name -> "f32" or "bool". The optimizer gives
            them as a record (`update.record(**values)`) each step, and again at each replay of a
            recorded step (webgrad.jit), which is how learning-rate changes and step counts reach
            replayed steps. The webgpu kernel's parameter block is made from these names
            (backends/webgpu/kernels/optim.py) and its WGSL function takes them by name.
    states  the state buffers, by torch's names (the optimizer's state[name], shaped like the
            parameter). An optimizer keeps only those its settings use (Adam keeps no
            max_exp_avg_sq without amsgrad); the others are zeros the kernel does not keep.
    numpy   the cpu twin: numpy(np, param, grad, states, h) updates the arrays param and
            states[name] in place with the WGSL function's formulas; h is the record, its floats
            rounded to the parameter's dtype.

Backends receive the FusedUpdate with the views (Backend.optimizer_step) and never import it.
"""
from collections import namedtuple

TYPES = ("f32", "bool")


class FusedUpdate:
    def __init__(self, kind, hyper, states, numpy):
        self.kind = kind
        self.hyper = dict(hyper)
        for name, kind_of in self.hyper.items():
            if kind_of not in TYPES:
                raise ValueError(f"{kind}: hyperparameter {name!r} has type {kind_of!r}, not one of {TYPES}")
        self.states = tuple(states)
        self.numpy = numpy
        self.Record = namedtuple(f"{kind}_hyper", self.hyper)
        self._as_types = [(name, float if kind_of == "f32" else bool) for name, kind_of in self.hyper.items()]

    def record(self, **values):
        """One step's hyperparameters: every declared name, as float or bool (a 0-d tensor lr too)."""
        if values.keys() != self.hyper.keys():
            raise TypeError(f"{self.kind}: hyperparameters missing {sorted(self.hyper.keys() - values.keys())}, "
                            f"unknown {sorted(values.keys() - self.hyper.keys())}")
        return self.Record._make([as_type(values[name]) for name, as_type in self._as_types])

    def __repr__(self):
        return f"FusedUpdate({self.kind})"


def lerp(start, end, weight):
    """torch's lerp, from the nearer end (shaders/optim.wgsl's lerp), for the NumPy twins."""
    if abs(weight) < 0.5:
        return start + weight * (end - start)
    return end - (end - start) * (1 - weight)
