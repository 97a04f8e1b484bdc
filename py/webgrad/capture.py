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
shapes, dtypes and devices skip Python entirely: they bind the inputs where the recording read
its own (or copy them into its buffers) and queue the recorded dispatches again. Like CUDA graphs
or tinygrad's TinyJit, the Python is frozen at the recording: its control flow, the modules'
train/eval mode, the shapes. What may change between calls is refreshed at each replay: the
optimizer's step count and learning rate, and the random generator's position (dropout draws new
masks).

Rules for a jitted function: tensor inputs are positional or keyword arguments (other arguments
are part of the signature: a new value records again); it returns a tensor, or a tuple, list or
dict of them, as fresh detached tensors (one in a buffer of its own that the call made, such as a
loss, is handed over whole and the next replay writes a new buffer; the others are copied out); it
does not read tensor values while recorded (.item() raises there; read the returned tensors
instead). Python side effects other than the optimizer's happen only during the first two calls.
Functions of cpu tensors just run eagerly.

The recording's elementwise chains are fused into generated kernels, with the same results bit
for bit (backends/webgpu/fusion.py); `wg.jit(fn, fuse=False)` replays the kernels as recorded.
"""
import functools

from ._tensor import Tensor
from .autograd import no_grad
from .backends import get_backend
from .backends.webgpu.fusion import fuse
from .backends.webgpu.runtime import size_class
from .ops.movement import write_into

WARMUP_CALLS = 1   # eager calls before recording: optimizer state and kernels exist by then


class _Program:
    """One recording, the tensors it reads its inputs from and writes its outputs to, and the
    shape of the function's result with _SLOT where each output goes."""

    def __init__(self, runtime, recording, inputs, outputs, skeleton):
        self.runtime, self.recording, self.inputs, self.outputs = runtime, recording, inputs, outputs
        self.skeleton = skeleton
        # input index -> where the dispatches bind its buffer, for the inputs the recording only reads
        # (and no output views): a replay binds the caller's tensor there when it can (take_inputs)
        self.bindable = {k: recording.sites(t._storage) for k, t in enumerate(inputs)
                         if _only_read(runtime, recording, t, outputs)}
        self.bound = list(inputs)   # the tensor whose buffer each input's dispatches bind now
        # output index -> where the dispatches bind its buffer, for the outputs handed over whole
        self.handed = {k: recording.sites(out._storage) for k, out in enumerate(outputs)
                       if _hands_over(recording, out, outputs)}

    def take_inputs(self, tensors):
        """Bind each caller's tensor where the recording only reads its input and the tensor fills a
        buffer of the size of the recording's own (no copy: a DataLoader's batches, say); copy the
        others into the recording's own buffers."""
        for k, (own, new) in enumerate(zip(self.inputs, tensors)):
            sites = self.bindable.get(k)
            target = new if sites is not None and _fills(new, own._storage.nbytes) else own
            if target._storage is not self.bound[k]._storage:
                self.recording.rebind(self.bound[k]._storage, target._storage, sites)
                self.bound[k] = target
            if target is own:
                write_into(own, new)

    def move_outputs(self):
        """Record the handed-over outputs into new buffers: the caller keeps the last ones."""
        for k, sites in self.handed.items():
            out = self.outputs[k]
            storage = self.runtime.alloc(out._storage.nbytes)
            self.recording.rebind(out._storage, storage, sites)
            self.outputs[k] = Tensor(storage, out.shape, out.dtype, out.device)


def _only_read(runtime, recording, static, outputs):
    """Whether the recording's dispatches only read an input's buffer (bound as "read"), and nothing
    else reads it: no upload fills it and no output views it."""
    storage = static._storage
    return (static.device == "webgpu"
            and all(runtime._layout_of[recording.dispatches[i][0]][j] == "read" for i, j in recording.sites(storage))
            and all(storage is not s for s, _ in recording.writes)
            and all(storage is not out._storage for out in outputs))


def _fills(tensor, nbytes):
    """Whether tensor is contiguous from the start of a buffer of nbytes."""
    return tensor.is_contiguous() and tensor.storage_offset() == 0 and tensor._storage.nbytes == nbytes


def _hands_over(recording, out, outputs):
    """Whether out can go to the caller as it is: its buffer is one the call made (recording.made:
    nothing reads its earlier values, so a replay may write a new one instead), no upload fills it,
    no other output shares it, and out fills it (contiguous from its start, in a buffer of the size
    a copy would get: a slice of a larger buffer is copied out, so that a kept result holds no more)."""
    storage = out._storage
    return (storage.handle in recording.made and all(storage is not s for s, _ in recording.writes)
            and sum(o._storage is storage for o in outputs) == 1
            and out.is_contiguous() and out.storage_offset() == 0
            and storage.nbytes == size_class(out.numel() * out.dtype.gpu_itemsize))


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
        # tensor passed twice now may be two tensors later), refilled before each replay, or where it
        # only reads them, bound to the caller's tensors instead (_Program.take_inputs).
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
        skeleton = _map(result, collect)
        del result   # its autograd graph would keep buffers alive that fusion may keep inside a kernel
        if self.fuse:
            fuse(runtime, recording)
        program = self._programs[signature] = _Program(runtime, recording, statics, outputs, skeleton)
        return self._fresh_outputs(program)

    @staticmethod
    def _replay(program, tensors):
        with no_grad():
            program.take_inputs(tensors)
            program.move_outputs()
            program.runtime.replay(program.recording)
        return jit._fresh_outputs(program)

    @staticmethod
    def _fresh_outputs(program):
        """The result: the recorded outputs handed over, copies of the others (the next replay
        overwrites those; the outputs are detached, so the copies record no graph)."""
        fresh = iter([out if k in program.handed else out.clone() for k, out in enumerate(program.outputs)])
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
