"""wg.jit: record a function's GPU work once and replay it, the way past eager per-op overhead.

    @wg.jit
    def train_step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

The first call runs eagerly (it compiles kernels and creates optimizer state); the second runs
eagerly too while the webgpu runtime records every dispatch; later calls with inputs of the same
shapes, dtypes and devices skip Python entirely: they copy the inputs into the recorded input
buffers and queue the recorded dispatches again. Like CUDA graphs or tinygrad's TinyJit, the
Python is frozen at the recording: its control flow, the modules' train/eval mode, the shapes.
What may change between calls is refreshed at each replay: the optimizer's step count and
learning rate, and the random generator's position (dropout draws new masks).

Rules for a jitted function: tensor inputs are positional or keyword arguments (other arguments
are part of the signature: a new value records again); it returns a tensor, or a tuple, list or
dict of them (returned as fresh detached copies); it does not read tensor values while recorded
(.item() raises there; read the returned tensors instead). Python side effects other than the
optimizer's happen only during the first two calls. Functions of cpu tensors just run eagerly.

The recording's elementwise chains are fused into generated kernels, with the same results bit
for bit (backends/webgpu/fusion.py); `wg.jit(fn, fuse=False)` replays the kernels as recorded.
"""
import functools

from ._tensor import Tensor
from .autograd import no_grad
from .backends import get_backend
from .backends.webgpu.fusion import fuse
from .ops.movement import write_into

WARMUP_CALLS = 1   # eager calls before recording: optimizer state and kernels exist by then


class _Program:
    """One recording, the tensors it reads its inputs from and writes its outputs to, and the
    shape of the function's result with _SLOT where each output goes."""

    def __init__(self, runtime, recording, inputs, outputs, skeleton):
        self.runtime, self.recording, self.inputs, self.outputs = runtime, recording, inputs, outputs
        self.skeleton = skeleton


_SLOT = object()


class jit:
    def __init__(self, fn, *, fuse=True):
        functools.update_wrapper(self, fn)
        self.fn, self.fuse = fn, fuse
        self._calls = {}      # signature -> eager calls made so far
        self._programs = {}   # signature -> _Program

    def __call__(self, *args, **kwargs):
        tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, Tensor)]
        if not any(t.device == "webgpu" for t in tensors):
            return self.fn(*args, **kwargs)
        signature = _signature(args, kwargs)
        program = self._programs.get(signature)
        if program is not None:
            return self._replay(program, tensors)
        calls = self._calls.get(signature, 0)
        self._calls[signature] = calls + 1
        if calls < WARMUP_CALLS:
            return self.fn(*args, **kwargs)
        return self._record(signature, args, kwargs, tensors)

    def _record(self, signature, args, kwargs, tensors):
        if any(t.requires_grad for t in tensors):
            raise ValueError("webgrad.jit: inputs must not require grad (replays feed new values into "
                             "recorded buffers); pass data and labels, and keep parameters in the model")
        # The recording reads its inputs from buffers of its own, one per argument position (the same
        # tensor passed twice now may be two tensors later), refilled before each replay.
        with no_grad():
            statics = [t.contiguous().clone() for t in tensors]
        fill = iter(statics)
        args = [next(fill) if isinstance(a, Tensor) else a for a in args]
        kwargs = {k: next(fill) if isinstance(v, Tensor) else v for k, v in kwargs.items()}
        runtime = get_backend("webgpu").runtime
        runtime.start_recording()
        try:
            result = self.fn(*args, **kwargs)
        finally:
            recording = runtime.stop_recording()
        outputs = []

        def collect(out):
            if out.device != "webgpu":
                raise ValueError("webgrad.jit: a jitted function on webgpu tensors must return webgpu tensors")
            outputs.append(out.detach())
            return _SLOT
        program = _Program(runtime, recording, statics, outputs, _map(result, collect))
        del result   # its autograd graph would keep buffers alive that fusion may keep inside a kernel
        if self.fuse:
            fuse(runtime, recording)
        self._programs[signature] = program
        return self._fresh_outputs(program)

    @staticmethod
    def _replay(program, tensors):
        with no_grad():
            for static, new in zip(program.inputs, tensors):
                write_into(static, new)
            program.runtime.replay(program.recording)
        return jit._fresh_outputs(program)

    @staticmethod
    def _fresh_outputs(program):
        """The result with copies of the recorded outputs, which the next replay overwrites."""
        with no_grad():
            fresh = iter([out.clone() for out in program.outputs])
        return _map(program.skeleton, lambda slot: next(fresh))


def _signature(args, kwargs):
    def key(a):
        if isinstance(a, Tensor):
            return ("tensor", tuple(a.shape), a.dtype.name, a.device)
        return ("value", repr(a))
    return tuple(key(a) for a in args) + tuple((k, key(v)) for k, v in sorted(kwargs.items()))


def _map(result, leaf):
    """result with each tensor (or _SLOT) replaced by leaf(it), through tuples, lists and dicts."""
    if isinstance(result, Tensor) or result is _SLOT:
        return leaf(result)
    if isinstance(result, (tuple, list)):
        return type(result)(_map(item, leaf) for item in result)
    if isinstance(result, dict):
        return {k: _map(v, leaf) for k, v in result.items()}
    if result is None:
        return None
    raise TypeError(f"webgrad.jit: a jitted function returns tensors (or tuples, lists, dicts of them), "
                    f"not {type(result).__name__}")
