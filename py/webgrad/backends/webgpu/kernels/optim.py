"""The optim family: fused optimizer updates (shaders/optim.wgsl) and gradient clipping's norm and
scaling (shaders/grad_norm.wgsl, shaders/grad_scale.wgsl), each one dispatch over many tensors.

The tensors a dispatch covers are segments: each a contiguous run of some buffer's elements. The
gradients stay in the buffers the backward pass wrote them to; a dispatch binds each distinct one
(segments may share a binding) and learns each segment's place from its parameter block, so a
dispatch covers as many tensors as the adapter lets a stage bind and the block holds; more take
more dispatches.

The update's parameter block and entry point come from the optimizer's FusedUpdate
(webgrad/optim/fused.py), which names the update's hyperparameters and state buffers: the entry
point calls the WGSL function of the update's kind with every argument matched by name to that
function's parameters, so the declaration and the WGSL cannot disagree on an order. A gated update
(a GradScaler's step) also binds a gate, which skips it on the device, holds its step count and the
factor each gradient is read times (the scaler's 1 / scale: the gradients are unscaled as read, and
left unscaled, as torch's fused updates leave them)."""
import functools
import re

from .... import dtypes
from .common import fill, groups, shader
from .params import ParamBlock, f32, u32
from ..runtime import PARAMS_WORDS

# The norm's loops: each thread visits at most this many elements of a segment (lavapipe ends loops
# past 65535 iterations), and a workgroup's threads at least this many each (fewer partials to fold).
NORM_SPAN, NORM_MIN = 4096, 8
NORM_ORDERS = {2.0: 0, 1.0: 1, float("inf"): 2, float("-inf"): 3}   # shaders/grad_norm.wgsl's order; else 4
# Optimizers' word packers kept (each an optimizer's run of segments); past this many the oldest go.
OPTIM_PACKERS_KEPT = 256


@functools.lru_cache(maxsize=None)
def optim_params(update, count, gated):
    """The parameter block of update's kernel over `count` segments: where region r starts (at
    r * region_stride), the float hyperparameters and the flags (what changes at each step: the
    flags as the bits of one word, in the order declared), where the gate is (gated), then the
    segments."""
    return ParamBlock(u32("region_stride"), *(f32(name) for name in _floats(update)), u32("flags"),
                      *([u32("gate_offset")] if gated else []),
                      u32("ends", count), u32("starts", count), u32("grad_offsets", count))


@functools.lru_cache(maxsize=OPTIM_PACKERS_KEPT)
def _scalar_packer(params, region_stride, at_gate, ends, starts, grad_offsets):
    """params.scalar_packer of a run's fixed fields (at_gate: the gate's as (name, value) pairs), kept:
    it compiles a function, which an eager loop's every step would do again (~300 us of an eager MNIST
    step's ~1.3 ms of host time)."""
    return params.scalar_packer(region_stride=region_stride, **dict(at_gate), ends=list(ends), starts=list(starts),
                                grad_offsets=list(grad_offsets))


def _floats(update):
    return [name for name, kind in update.hyper.items() if kind == "f32"]


def _flags(update):
    return [name for name, kind in update.hyper.items() if kind == "bool"]


@functools.lru_cache(maxsize=None)
def norm_params(count):
    return ParamBlock(u32("order"), f32("p"), u32("out_offset"), u32("sizes", count), u32("offsets", count))


@functools.lru_cache(maxsize=None)
def scale_params(count):
    return ParamBlock(f32("max_norm"), u32("total_offset"), u32("sizes", count), u32("offsets", count))


@functools.lru_cache(maxsize=None)
def _parameters(function):
    """The parameter names of `fn <function>` in shaders/optim.wgsl, in order (None where it has none)."""
    found = re.search(rf"\bfn {function}\(([^)]*)\)", shader("optim"))
    return None if found is None else tuple(re.findall(r"(\w+)\s*:", found.group(1)))


@functools.lru_cache(maxsize=None)
def _step_functions(update):
    """update's hyperparameters that a gated kernel computes from its step count: name -> the
    parameter names of their `fn <kind>_<name>` in shaders/optim.wgsl."""
    found = {name: _parameters(f"{update.kind}_{name}") for name in update.hyper}
    return {name: parameters for name, parameters in found.items() if parameters is not None}


def _grad_access(gated):
    """How update's kernel binds the gradients: gated, it writes them back unscaled."""
    return "read_write" if gated else "read"


def _grad_bindings(binding_of, first, access, element):
    """The gradients' bindings, from `first` on, one per distinct buffer (binding_of: each segment's),
    of WGSL element type `element`."""
    return [f"@group(0) @binding({first + b}) var<storage, {access}> grad_{b}: array<{element}>;"
            for b in range(max(binding_of) + 1)]


def _f32(value, element):
    """WGSL: a buffer's element (of WGSL type `element`) as the f32 the updates compute in."""
    return value if element == "f32" else f"f32({value})"


def _stored(value, element):
    """WGSL: an f32 as a buffer of WGSL element type `element` stores it (float16: rounded to f16)."""
    return value if element == "f32" else f"{element}({value})"


def _optim_source(update, states, region_binding, binding_of, element, gated):
    """update's kernel: the arena's (each region's: region_binding), the gradients' (binding_of) and,
    where gated, the gate's bindings, grad_of (gated, also set_grad), and the entry point's body,
    which loads the element of the parameter and each state, calls fn <kind> and stores them back
    (gated, the gradient's element too, times the gate's factor, where that is not 1). element: the
    parameters', states' and gradients' WGSL element type (f16 is computed in f32, rounded as it is
    stored, as torch does)."""
    parameters, step_functions = _parameters(update.kind), _step_functions(update)
    if parameters is None:
        raise RuntimeError(f"shaders/optim.wgsl has no fn {update.kind}")
    declared = {"param", "grad", *update.states, *update.hyper}
    taken = {*parameters, *(name for names in step_functions.values() for name in names)} - {"step_count"}
    if taken != declared:
        raise RuntimeError(f"shaders/optim.wgsl: fn {update.kind} takes {sorted(parameters)} (and its step functions "
                           f"{sorted(step_functions)} the rest of {sorted(taken)}), but its FusedUpdate declares "
                           f"{sorted(declared)}")
    arenas = max(region_binding) + 1
    lines = [f"@group(0) @binding({1 + b}) var<storage, read_write> arena_{b}: array<{element}>;"
             for b in range(arenas)]
    lines += [*_grad_bindings(binding_of, 1 + arenas, _grad_access(gated), element),
              f"const SEGMENTS: u32 = {len(binding_of)}u;"]
    last = max(binding_of)

    def by_segment(signature, statement):   # fn signature { switch on the segment's binding b: statement(b) }
        lines.extend([f"fn {signature} {{", "    switch s {"])
        for b in range(last + 1):
            cases = [f"{s}u" for s, of in enumerate(binding_of) if of == b] + (["default"] if b == last else [])
            lines.append(f"        case {', '.join(cases)}: {{ {statement(b)} }}")
        lines.extend(["    }", "}"])
    by_segment("grad_of(s: u32, at: u32) -> f32", lambda b: f"return {_f32(f'grad_{b}[at]', element)};")
    if gated:
        by_segment("set_grad(s: u32, at: u32, value: f32)", lambda b: f"grad_{b}[at] = {_stored('value', element)};")
        lines.append(f"@group(0) @binding({2 + arenas + last}) var<storage, read> gate: array<f32>;")
    regions = {name: f"arena_{b}[{r}u * params.region_stride + at]"
               for r, (name, b) in enumerate(zip(("param", *states), region_binding))}
    body = [f"    var {name} = {_f32(at, element)};" for name, at in regions.items()]
    body += [f"    var {s}: f32 = 0.0;   // not kept: this optimizer's settings leave it out"
             for s in update.states if s not in states]
    hyper = {name: f"params.{name}" for name in _floats(update)}
    hyper.update({name: f"(params.flags & {1 << bit}u) != 0u" for bit, name in enumerate(_flags(update))})
    arguments = {"param": "&param", "grad": "grad", **{s: f"&{s}" for s in update.states}, **hyper}
    if gated:
        body[:0] = ["    if (gate[params.gate_offset] != 0.0) { return; }   // the gradients overflowed: no step",
                    "    let step_count = gate[params.gate_offset + 1u];",
                    "    let factor = gate[params.gate_offset + 2u];",
                    "    let unscaled = grad * factor;",
                    "    if (factor != 1.0) { set_grad(s, params_grad_offsets(s) + i - begin, unscaled); }"]
        hyper["step_count"] = "step_count"
        arguments["grad"] = "unscaled"
        arguments.update({name: f"{update.kind}_{name}({', '.join(hyper[p] for p in names)})"
                          for name, names in step_functions.items()})
    body.append(f"    {update.kind}({', '.join(arguments[p] for p in parameters)});")
    body += [f"    {at} = {_stored(name, element)};" for name, at in regions.items()]
    return fill("optim", optim_params(update, len(binding_of), gated), bindings="\n".join(lines), body="\n".join(body))


def _segment_loops(binding_of, statement):
    """One loop per segment over its elements, the thread's first then on by the dispatch's threads;
    statement(grad element) is the loop's body."""
    return "\n".join(f"    for (var j = first; j < params_sizes({s}u); j += threads) {{ "
                     f"{statement(f'grad_{b}[params_offsets({s}u) + j]')} }}" for s, b in enumerate(binding_of))


def _norm_source(binding_of, element):
    """The norm's kernel over gradients of WGSL element type `element`; its partials are f32."""
    bindings = _grad_bindings(binding_of, 1, "read", element)
    bindings.append(f"@group(0) @binding({max(binding_of) + 2}) var<storage, read_write> out: array<f32>;")
    return fill("grad_norm", norm_params(len(binding_of)), includes=("workgroup",), bindings="\n".join(bindings),
                segments=_segment_loops(binding_of, lambda x: f"acc = merge(acc, term({_f32(x, element)}), 0u);"))


def _scale_source(binding_of, element):
    """The scaling's kernel over gradients, and a total norm, of WGSL element type `element`."""
    bindings = _grad_bindings(binding_of, 1, "read_write", element)
    bindings.append(f"@group(0) @binding({max(binding_of) + 2}) var<storage, read> total: array<{element}>;")

    def scaled(x):
        return f"{x} = {_stored(_f32(x, element) + ' * coef', element)};"
    return fill("grad_scale", scale_params(len(binding_of)), bindings="\n".join(bindings),
                segments=_segment_loops(binding_of, scaled))


def _binding(storages, storage):
    """storage's place among storages (bound in that order), added where new."""
    for b, known in enumerate(storages):
        if known is storage:
            return b
    storages.append(storage)
    return len(storages) - 1


def _chunks(views, bindings, words):
    """views (gradients) in runs for one dispatch each: (the run's indices, its distinct storages,
    each view's binding among them), at most `bindings` storages and `words` segments a run."""
    run, storages, binding_of = [], [], []
    for i, view in enumerate(views):
        new = all(s is not view.storage for s in storages)
        if len(run) == words or (new and len(storages) == bindings):
            yield run, storages, tuple(binding_of)
            run, storages, binding_of = [], [], []
        run.append(i)
        binding_of.append(_binding(storages, view.storage))
    if run:
        yield run, storages, tuple(binding_of)


def _element(what, views):
    """The WGSL element type of views, all float32 or all float16 and contiguous."""
    found = {v.dtype for v in views}
    if len(found) != 1 or not found <= {dtypes.float32, dtypes.float16}:
        raise TypeError(f"webgpu: {what} must be float32 or float16 tensors, all of one dtype; they are "
                        f"{', '.join(sorted(d.name for d in found))}")
    if not all(v.is_contiguous() for v in views):
        raise ValueError(f"webgpu: {what} must be contiguous")
    return found.pop().stored


class OptimKernels:
    def _free_bindings(self, taken):
        """The storage buffers a dispatch may bind besides its parameter block and `taken` others."""
        return self.runtime.limits["max_storage_buffers_per_shader_stage"] - 1 - taken

    def optimizer_step(self, update, regions, states, segments, hyper, gate=None):
        """Backend.optimizer_step: a dispatch per run of segments (one, unless they need more bindings
        or words than one has); hyper() runs once, at the first, which (re)computes its words at each
        replay of a recording, and the others take its record. Gated, the kernel computes the
        step-dependent hyperparameters from the gate's step count (the record's go unused)."""
        arenas, gated = [], gate is not None
        region_binding = tuple(_binding(arenas, region.storage) for region in regions)
        stride = regions[1].offset if len(regions) > 1 and len(arenas) == 1 else 0
        element = _element("the optimizer's parameters, state and gradients", [*regions, *(g for _, g in segments)])
        for r, region in enumerate(regions):
            if region.offset != r * stride:
                raise ValueError("webgpu: an optimizer's regions lie one after another in one buffer from its "
                                 "start, or each at the start of its own")
        unknown = set(states) - set(update.states)
        if unknown:
            raise ValueError(f"{update.kind} keeps no state {sorted(unknown)}")
        if gated and gate.dtype is not dtypes.float32:
            raise TypeError(f"webgpu: an optimizer's gate must be float32, not {gate.dtype.name}")
        gates, at_gate = ([gate.storage], {"gate_offset": gate.offset}) if gated else ([], {})
        words = (PARAMS_WORDS - 2 - len(_floats(update)) - gated) // 3
        grad_access = _grad_access(gated)
        record, flag_names = [], _flags(update)
        for run, storages, binding_of in _chunks([g for _, g in segments], self._free_bindings(len(arenas) + gated),
                                                 words):
            params = optim_params(update, len(run), gated)
            key = ("optim", update.kind, update, states, region_binding, binding_of, element, gated)
            pipeline = self.runtime.pipeline(key, lambda b=binding_of: _optim_source(update, states, region_binding,
                                                                                     b, element, gated),
                                             bindings=("read_write",) * len(arenas) + (grad_access,) * len(storages)
                                             + ("read",) * len(gates))
            ends, total = [], 0
            for i in run:
                total += segments[i][1].numel()
                ends.append(total)
            pack = _scalar_packer(params, stride, tuple(at_gate.items()), tuple(ends),
                                  tuple(segments[i][0] for i in run), tuple(segments[i][1].offset for i in run))

            def words_of(pack=pack, first=not record):
                if first:
                    record[:] = [hyper()]
                values = record[0]._asdict()
                flags = sum(1 << bit for bit, name in enumerate(flag_names) if values.pop(name))
                return pack(**values, flags=flags)
            self.runtime.dispatch(pipeline, [*arenas, *storages, *gates], words_of(), groups(total), refresh=words_of)

    def grad_norm_partials(self, grads, norm_type):
        """Backend.grad_norm_partials: a dispatch per run of gradients, each workgroup one partial."""
        order = NORM_ORDERS.get(norm_type, 4)
        element = _element("the gradients to clip", grads)
        runs = list(_chunks(grads, self._free_bindings(1), (PARAMS_WORDS - 3) // 2))
        counts = [self._norm_groups(max(grads[i].numel() for i in run)) for run, _, _ in runs]
        out = self.empty(sum(counts), dtypes.float32)
        at = 0
        for (run, storages, binding_of), count in zip(runs, counts):
            pipeline = self.runtime.pipeline(("grad_norm", binding_of, element),
                                             lambda b=binding_of: _norm_source(b, element),
                                             bindings=("read",) * len(storages) + ("read_write",))
            words = norm_params(len(run)).pack(order=order, p=norm_type if order == 4 else 0.0, out_offset=at,
                                               sizes=[grads[i].numel() for i in run],
                                               offsets=[grads[i].offset for i in run])
            self.runtime.dispatch(pipeline, [*storages, out], words, count)
            at += count
        return out, at

    def scale_grads(self, grads, max_norm, total):
        """Backend.scale_grads: a dispatch per run of gradients."""
        element = _element("the gradients to clip and their total norm", [*grads, total])
        for run, storages, binding_of in _chunks(grads, self._free_bindings(1), (PARAMS_WORDS - 2) // 2):
            if any(s is total.storage for s in storages):
                raise ValueError("webgpu: clipping's total norm cannot share a buffer with the gradients it scales")
            pipeline = self.runtime.pipeline(("grad_scale", binding_of, element),
                                             lambda b=binding_of: _scale_source(b, element),
                                             bindings=("read_write",) * len(storages) + ("read",))
            words = scale_params(len(run)).pack(max_norm=max_norm, total_offset=total.offset,
                                                sizes=[grads[i].numel() for i in run],
                                                offsets=[grads[i].offset for i in run])
            self.runtime.dispatch(pipeline, [*storages, total.storage], words,
                                  groups(max(grads[i].numel() for i in run)))

    def _norm_groups(self, largest):
        """Workgroups for a norm dispatch whose largest segment has `largest` elements: each thread
        at least NORM_MIN of them, at most NORM_SPAN."""
        threads = max(-(-largest // NORM_SPAN), min(-(-largest // NORM_MIN), 1 << 16))
        return min(groups(threads), self.runtime.limits["max_compute_workgroups_per_dimension"])
