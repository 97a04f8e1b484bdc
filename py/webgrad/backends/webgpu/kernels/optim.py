"""The optim family (shaders/optim.wgsl): one fused update per parameter tensor.

The optimizer passes down its FusedUpdate (webgrad/optim/fused.py), which names the update's
hyperparameters and state buffers. From it come the kernel's parameter block and its entry point,
which calls the WGSL function of the update's kind with every argument matched by name to that
function's parameters, so the declaration and the WGSL cannot disagree on an order."""
import functools
import re

from .common import fill, groups, shader
from .params import Field, ParamBlock, u32

_WORD = {"f32": "f32", "bool": "u32"}   # a flag is a u32 word (a storage buffer holds no bool)


@functools.lru_cache(maxsize=None)
def optim_params(update, bound):
    """The parameter block of update's kernel binding the state buffers `bound`: the element count
    and each buffer's offset, then the hyperparameters (what changes at each step)."""
    return ParamBlock(u32("numel"), u32("param_offset"), u32("grad_offset"), *(u32(f"{s}_offset") for s in bound),
                      *(Field(name, _WORD[kind]) for name, kind in update.hyper.items()))


@functools.lru_cache(maxsize=None)
def _parameters(kind):
    """The parameter names of `fn <kind>` in shaders/optim.wgsl, in order."""
    found = re.search(rf"\bfn {kind}\(([^)]*)\)", shader("optim"))
    if found is None:
        raise RuntimeError(f"shaders/optim.wgsl has no fn {kind}")
    return tuple(re.findall(r"(\w+)\s*:", found.group(1)))


def _optim_source(update, bound):
    """update's kernel: the buffers' bindings, and the entry point's body, which loads the element of
    each, calls fn <kind> and stores the parameter and the bound states back."""
    parameters = _parameters(update.kind)
    declared = {"param", "grad", *update.states, *update.hyper}
    if set(parameters) != declared:
        raise RuntimeError(f"shaders/optim.wgsl: fn {update.kind} takes {sorted(parameters)}, but its FusedUpdate "
                           f"declares {sorted(declared)}")
    bindings = ["@group(0) @binding(1) var<storage, read_write> param_buffer: array<f32>;",
                "@group(0) @binding(2) var<storage, read> grad_buffer: array<f32>;"]
    bindings += [f"@group(0) @binding({3 + k}) var<storage, read_write> {s}_buffer: array<f32>;"
                 for k, s in enumerate(bound)]
    body = [f"    var {s} = {s}_buffer[params.{s}_offset + i];" for s in ("param", *bound)]
    body += [f"    var {s}: f32 = 0.0;   // not bound: this optimizer's settings leave it out"
             for s in update.states if s not in bound]
    arguments = {"param": "&param", "grad": "grad_buffer[params.grad_offset + i]"}
    arguments.update({s: f"&{s}" for s in update.states})
    arguments.update({name: f"params.{name}" if kind == "f32" else f"params.{name} != 0u"
                      for name, kind in update.hyper.items()})
    body.append(f"    {update.kind}({', '.join(arguments[p] for p in parameters)});")
    body += [f"    {s}_buffer[params.{s}_offset + i] = {s};" for s in ("param", *bound)]
    return fill("optim", optim_params(update, bound), bindings="\n".join(bindings), body="\n".join(body))


class OptimKernels:
    def optimizer_step(self, update, param, grad, states, hyper):
        """Backend.optimizer_step: one dispatch over the parameter's elements; the words of its
        hyperparameters come from hyper() again at each replay of a recording."""
        for what, view in (("parameter", param), ("gradient", grad), *states.items()):
            if view.dtype.name != "float32":
                raise TypeError(f"webgpu: optimizers update float32 tensors; the {what} is {view.dtype.name}")
            if not view.is_contiguous():
                raise ValueError(f"webgpu: the optimizer's {what} must be contiguous")
        unknown = set(states) - set(update.states)
        if unknown:
            raise ValueError(f"{update.kind} keeps no state {sorted(unknown)}")
        bound = tuple(s for s in update.states if s in states)
        params = optim_params(update, bound)
        pipeline = self.runtime.pipeline(("optim", update, bound), lambda: _optim_source(update, bound),
                                         bindings=("read_write", "read") + ("read_write",) * len(bound))
        numel = param.numel()
        where = dict(numel=numel, param_offset=param.offset, grad_offset=grad.offset,
                     **{f"{s}_offset": states[s].offset for s in bound})

        def words():
            return params.pack(**where, **hyper()._asdict())
        self.runtime.dispatch(pipeline, [param.storage, grad.storage] + [states[s].storage for s in bound], words(),
                              groups(numel), refresh=words)
