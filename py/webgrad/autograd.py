"""Reverse-mode autograd: grad mode, the Function node (the backward pass: autograd_engine.py).

A Function's forward runs on Tensors with grad recording off; its backward gets the output's
gradient as a Tensor (or None, see Function.takes_unit_grad) and returns one gradient (or None)
per Tensor input, written with Tensor ops, so every rule runs on whichever device the tensors
live on.

The graph's edges go from a node to its inputs' nodes as they were when it was recorded (a
Function, or a leaf Tensor that accumulates .grad), not to the input Tensors: an in-place op gives
a tensor a new node, and the nodes recorded before it still lead to the old one.

Each storage has a version, counted up by every in-place write to it (views share it). A node
notes its inputs' and output's versions; while its backward runs, reading a tensor whose storage
has been written since raises, as PyTorch's saved-variable check does: the values it would use
are gone.
"""
import contextlib
import math
import weakref

from .dtypes import TYPE_NAMES

_grad_enabled = True
_anomaly = False
_versions = {}   # id(storage) -> times written in place (absent: 0)
_watched = {}    # id(storage) -> weakref dropping its _versions entry when the storage dies
_unpacking = None  # while a node's backward runs: the versions it noted, by id(storage)


def version(storage):
    return _versions.get(id(storage), 0)


def bump_version(storage):
    """Count an in-place write to storage."""
    key = id(storage)
    if key not in _watched:
        _watched[key] = weakref.ref(storage, lambda _, key=key: (_versions.pop(key, None), _watched.pop(key, None)))
    _versions[key] = _versions.get(key, 0) + 1


def check_saved(t):
    """Tensor._view's check while a node's backward runs: t's storage is as the node saw it."""
    key = id(t._storage)
    expected = _unpacking.get(key)
    if expected is not None and _versions.get(key, 0) != expected:
        raise RuntimeError(modified_error(t, expected))


def modified_error(t, expected):
    """PyTorch's message for a saved tensor t written in place since it was saved at version expected."""
    what = f" which is output 0 of {_op_name(t._ctx)}," if t._ctx is not None else ""
    return (f"one of the variables needed for gradient computation has been modified by an inplace operation: "
            f"[webgrad.{TYPE_NAMES[t.dtype.name]}Tensor {list(t.shape)}],{what} is at version "
            f"{version(t._storage)}; expected version {expected} instead. Hint: the values it was computed "
            f"from were overwritten; clone() the tensor before modifying it.")


def is_grad_enabled():
    return _grad_enabled


@contextlib.contextmanager
def _grad_mode(enabled):
    global _grad_enabled
    previous, _grad_enabled = _grad_enabled, enabled
    try:
        yield
    finally:
        _grad_enabled = previous


class _GradModeContext(contextlib.ContextDecorator):
    """A context manager and decorator that sets grad mode to `enabled` (None: leaves it) inside.
    Like torch's, the no-argument ones also decorate bare: `@no_grad` as `@no_grad()`."""
    enabled = None

    def __new__(cls, *args, **kwargs):
        if cls._takes_no_args and len(args) == 1 and callable(args[0]) and not kwargs:
            return cls()(args[0])
        return super().__new__(cls)

    def __enter__(self):
        self._mode = _grad_mode(_grad_enabled if self.enabled is None else self.enabled)
        self._mode.__enter__()

    def __exit__(self, *exc):
        return self._mode.__exit__(*exc)


class no_grad(_GradModeContext):
    """Turns off graph recording."""
    enabled = False
    _takes_no_args = True


class enable_grad(_GradModeContext):
    enabled = True
    _takes_no_args = True


class inference_mode(_GradModeContext):
    """torch.inference_mode: no graph recording when mode is True (webgrad has no separate
    inference tensors)."""
    _takes_no_args = True

    def __init__(self, mode=True):
        self.enabled = False if mode else None


class set_grad_enabled(_GradModeContext):
    """torch.set_grad_enabled(mode): as a call it sets the mode at once; as a context manager or
    decorator it sets it inside and restores the previous mode after."""
    _takes_no_args = False

    def __init__(self, mode):
        global _grad_enabled
        self.enabled, self._previous = bool(mode), _grad_enabled
        _grad_enabled = self.enabled

    def __exit__(self, *exc):
        global _grad_enabled
        super().__exit__(*exc)
        _grad_enabled = self._previous   # the mode from before the call, not the one __init__ set

    def __call__(self, fn):
        global _grad_enabled
        _grad_enabled = self._previous   # decorating does not change the mode outside the function
        return super().__call__(fn)


@contextlib.contextmanager
def _anomaly_mode(enabled):
    global _anomaly
    previous, _anomaly = _anomaly, enabled
    try:
        yield
    finally:
        _anomaly = previous


class detect_anomaly(contextlib.ContextDecorator):
    """Context manager and decorator that checks every op's results for NaN and Inf, as
    torch.autograd.detect_anomaly does for backward: the first op whose forward output, or whose
    backward's gradient, holds one raises a RuntimeError naming it. Each check reads values back
    from the device, so this is a debugging mode, and slow."""

    def __init__(self, check_nan=True):
        self.check_nan = check_nan

    def __enter__(self):
        self._mode = _anomaly_mode(self.check_nan)
        self._mode.__enter__()

    def __exit__(self, *exc):
        return self._mode.__exit__(*exc)


def is_anomaly_enabled():
    return _anomaly


def _op_name(ctx):
    """A Function's name as PyTorch spells its nodes: an elementwise op by its op (Log, Div),
    others by their class (_Sum: Sum)."""
    op = getattr(ctx, "op", None)
    name = op.name if hasattr(op, "name") else type(ctx).__name__.lstrip("_")
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


def _nonfinite(t):
    """'nan' or 'inf' when the floating tensor t holds one, else None. It reads the values back:
    GPU compilers may assume finite maths, so x != x does not find NaN there."""
    if not t.dtype.is_floating_point or t.numel() == 0:
        return None
    values = _tensor.dtypes.host_values(t._host_bytes(), t.dtype)
    if any(map(math.isnan, values)):
        return "nan"
    if any(map(math.isinf, values)):
        return "inf"
    return None


def _check_anomaly(ctx, tensors, backward):
    for k, t in enumerate(tensors):
        found = _nonfinite(t) if t is not None else None
        if found:
            name = _op_name(ctx) + ("Backward" if backward else "")
            where = "" if backward else " (in forward)"
            raise RuntimeError(f"Function '{name}' returned {found} values in its {k}th output{where}.")


class Function:
    """One recorded op. Subclasses define forward(*args, **kwargs) and backward(grad), or are written in
    torch's style (staticmethods taking ctx: autograd_function.py)."""
    # A Function whose output is a scalar may take backward()'s implicit gradient, 1, as grad=None
    # and fold it into its kernel: that saves filling a ones tensor (a dispatch) in every step.
    takes_unit_grad = False
    freed = False   # set by release()

    def __init_subclass__(cls, **kwargs):
        # A subclass in torch's style (forward a staticmethod: forward(ctx, ...), or with setup_context)
        # gets that style's apply once, here; the library's ops keep the plain one on their hot path.
        super().__init_subclass__(**kwargs)
        forward = next(k.__dict__["forward"] for k in cls.__mro__ if "forward" in k.__dict__)
        if isinstance(forward, staticmethod):
            from . import autograd_function
            autograd_function.adopt(cls)

    @classmethod
    def apply(cls, *args, **kwargs):
        # The hot path of every op: no context manager, no import, no generator, no __init__ here.
        global _grad_enabled
        ctx = object.__new__(cls)
        ctx.inputs = args   # positional args of forward: Tensors and plain values
        recording, _grad_enabled = _grad_enabled, False
        try:
            out = ctx.forward(*args, **kwargs)
        finally:
            _grad_enabled = recording
        if _anomaly:
            _check_anomaly(ctx, [out], backward=False)
        if recording:
            # one pass over the inputs notes the node's edges and versions; they are dropped again
            # where no input requires grad (no node: the rarer case, as _map asks records() first)
            Tensor, versions = _tensor.Tensor, _versions
            edges, noted, needs_grad = [], {}, False
            for a in args:
                if isinstance(a, Tensor):
                    if a._base is not None and is_stale_view(a):   # (most are not views: no call)
                        _refresh_view(a)   # (which may make it require grad)
                    if a.requires_grad:
                        needs_grad = True
                        edges.append(a._ctx or a)
                    else:
                        edges.append(None)
                    key = id(a._storage)
                    noted[key] = versions.get(key, 0)
            if needs_grad:
                ctx.edges, ctx.versions = edges, noted
                key = id(out._storage)
                noted[key] = versions.get(key, 0)
                # The graph's node is a new Tensor object: ctx may keep `out` for its backward, and
                # ctx -> out -> ctx would be a reference cycle, its GPU buffers held until Python's
                # garbage collector happens to run.
                inner = out
                out = Tensor(out._storage, out.shape, out.dtype, out.device, out._strides, out._offset)
                out._base, out._base_node = inner._base, inner._base_node
                out.requires_grad = True
                out._ctx = ctx
        return out

    def forward(self, *args, **kwargs):
        raise NotImplementedError

    def backward(self, grad):
        raise NotImplementedError

    def release(self):
        """Drop what forward kept for backward (the graph is freed after a backward)."""
        self.__dict__ = {"inputs": self.inputs, "edges": self.edges, "freed": True}


def records(args):
    """Whether Function.apply over args does more than run forward: records a node (grad mode on, a
    Tensor argument requiring grad or a stale view's grad_fn to renew) or checks the output
    (detect_anomaly). An op whose call needs neither may run its forward bare, without a node."""
    if _anomaly:
        return True
    if _grad_enabled:
        Tensor = _tensor.Tensor
        for a in args:
            if isinstance(a, Tensor) and (a.requires_grad or a._base is not None and is_stale_view(a)):
                return True
    return False


def is_stale_view(t):
    """A view whose base was written in place since the view's grad_fn was made."""
    return t._base is not None and t._base._ctx is not t._base_node


def _refresh_view(t):
    """A view's grad_fn anew, a view of its base's history now: the base was written in place since
    the view's was made (as PyTorch regenerates a view's grad_fn)."""
    from .ops.inplace import view_of_base
    view_of_base(t)


from . import _tensor  # noqa: E402 (a cycle: _tensor imports this module first)
from . import autograd_engine  # noqa: E402 (the backward pass, built on the above)
from . import autograd_function as function  # noqa: E402, F401 (torch.autograd.function: ctx-style Functions)
# A package's mark, so that `import torch.autograd.function` (torch_alias) looks for the submodule, which
# autograd_function registers as webgrad.autograd.function.
__path__ = []
# torch.autograd's backward and grad; WindowGrad for the slicing ops' gradients
backward, grad, WindowGrad = autograd_engine.backward, autograd_engine.grad, autograd_engine.WindowGrad
