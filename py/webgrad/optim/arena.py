"""Flat arenas: an optimizer keeps a param group's parameters and their state in one buffer per
device and dtype, each parameter and state tensor a view into it, so that one fused kernel updates
them all (PyTorch's fused and foreach optimizers reach the same end with tensor lists).

An arena's first region holds its parameters one after another; then comes one region per state
buffer that the group's settings keep (Adam's exp_avg, exp_avg_sq, ...), each laid out like the
first, so a parameter's state lies at its own offset in each region. The regions share one buffer,
unless together they pass the largest buffer a kernel may bind: then each has its own (and where
one region would pass it, the group's parameters take more than one arena). Gradients are not
copied in: the kernel reads each where the backward pass wrote it (backends/webgpu/kernels/optim.py).

An arena is made at the group's first step, or earlier where state needs a home (load_state_dict,
Adagrad's state from the start), and again whenever what it holds changes under it: a parameter
given other storage (`p.data = t`, Module.to), a state tensor replaced, parameters added to the
group, or other state buffers for its settings. Making one copies the current values in and points
the tensors at their views (the same Tensor objects, so the model and the optimizer's state see it).
A parameter and a state tensor share the arena's version counter, as views of one tensor do in torch.
"""
import math

from .._tensor import Tensor
from ..autograd import no_grad
from ..backends.base import FILL
from ..ops.creation import zeros
from ..ops.movement import write_into


def unique(params):
    """params without repeats (a tied weight listed twice), in order."""
    seen = set()
    return [p for p in params if not (id(p) in seen or seen.add(id(p)))]


def _fill(t, value):
    t.backend.map(FILL, (value,), t.shape, t.dtype, t.dtype, out=t._view)


class Arena:
    """Parameters of one device and dtype, and their state buffers `initial` (name -> the value a new
    state starts at): regions of `length` elements, the parameters' and one per state buffer, in
    one buffer where they fit in what a kernel may bind, else a buffer each."""

    def __init__(self, params, initial, state, max_elements):
        self.params, self.initial = tuple(params), dict(initial)
        self.names = tuple(initial)
        self.start, self.numel, self.length = {}, {}, 0
        for p in params:
            self.start[id(p)], self.numel[id(p)] = self.length, p.numel()
            self.length += p.numel()
        first, count, length = params[0], 1 + len(self.names), max(1, self.length)
        with no_grad():
            if count * length <= max_elements:
                flat = zeros(count * length, dtype=first.dtype, device=first.device)
                self.regions = [flat[r * length:(r + 1) * length] for r in range(count)]
            else:
                self.regions = [zeros(length, dtype=first.dtype, device=first.device) for _ in range(count)]
            for region, value in zip(self.regions[1:], self.initial.values()):
                if value != 0:
                    _fill(region, value)
            for p in params:
                view = self.view(p, 0)
                write_into(view, p)
                p._set_data(view)
                kept = state.get(p)
                if kept:   # its state moves in too; a buffer its settings now keep starts anew
                    for r, name in enumerate(self.names, start=1):
                        view, old = self.view(p, r), kept.get(name)
                        if isinstance(old, Tensor):
                            write_into(view, old)
                            old._set_data(view)
                        else:
                            kept[name] = view
        self.storages = {id(region._storage) for region in self.regions}
        self.pristine = {id(p) for p in params if not state.get(p)}   # state regions as made: initial

    def view(self, p, region):
        """p's elements in region (0: the parameter, then the state buffers in order), shaped like p."""
        whole = self.regions[region]
        return Tensor(whole._storage, p.shape, p.dtype, p.device, None, whole._offset + self.start[id(p)])

    def holds(self, p, kept):
        """Whether p, and the state tensors in kept, are still the views this arena gave them."""
        start = self.start[id(p)]
        for r, t in enumerate([p] + [kept.get(name) for name in (self.names if kept else ())]):
            if (not isinstance(t, Tensor) or t._storage is not self.regions[r]._storage
                    or t._offset != self.regions[r]._offset + start):
                return False
        return p.numel() == self.numel[id(p)] and p.is_contiguous()

    def new_state(self, p):
        """The state tensors of p's first step: its views, at their initial values."""
        views = {name: self.view(p, region) for region, name in enumerate(self.names, start=1)}
        if id(p) not in self.pristine:   # its regions served a state since dropped
            with no_grad():
                for name, view in views.items():
                    _fill(view, self.initial[name])
        self.pristine.discard(id(p))
        return views


class GroupArenas:
    """A param group's arenas: one per device and dtype, more where one would exceed the largest
    buffer a kernel may bind."""

    def __init__(self, params, initial, state):
        self.ids, self.names = tuple(map(id, params)), tuple(initial)
        parts = {}
        for p in params:
            parts.setdefault((p.device, p.dtype), []).append(p)
        self.arenas, self.of = [], {}
        for part in parts.values():
            limit = _max_elements(part[0])
            for run in _runs(part, limit):
                arena = Arena(run, initial, state, limit)
                self.arenas.append(arena)
                self.of.update((id(p), arena) for p in run)

    def current(self, params, initial, state):
        """Whether these arenas still hold exactly params, with the state buffers `initial` names."""
        return (tuple(map(id, params)) == self.ids and tuple(initial) == self.names
                and all(self.of[id(p)].holds(p, state.get(p)) for p in params))


def _max_elements(p):
    """The most elements of p's dtype a kernel may bind in one buffer (the webgpu runtime's limit;
    cpu has none)."""
    runtime = getattr(p.backend, "runtime", None)
    return math.inf if runtime is None else runtime.max_tensor_bytes // p.dtype.itemsize


def _runs(params, limit):
    """params in runs whose regions each fit one binding."""
    run, size = [], 0
    for p in params:
        if run and size + p.numel() > limit:
            yield run
            run, size = [], 0
        run.append(p)
        size += p.numel()
    yield run
