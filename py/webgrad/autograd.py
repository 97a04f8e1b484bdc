"""Reverse-mode autograd: grad mode, the Function node, and the backward pass.

A Function's forward runs on Tensors with grad recording off; its backward gets the output's
gradient as a Tensor (or None, see Function.takes_unit_grad) and returns one gradient (or None)
per Tensor input, written with Tensor ops, so every rule runs on whichever device the tensors
live on.
"""
import array
import contextlib
import math

_grad_enabled = True
_anomaly = False


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
    values = array.array(t.dtype.array_code, t._host_bytes())
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
    """One recorded op. Subclasses define forward(*args, **kwargs) and backward(grad)."""
    # A Function whose output is a scalar may take backward()'s implicit gradient, 1, as grad=None
    # and fold it into its kernel: that saves filling a ones tensor (a dispatch) in every step.
    takes_unit_grad = False

    def __init__(self, inputs):
        self.inputs = inputs          # positional args of forward: Tensors and plain values
        self.freed = False

    @classmethod
    def apply(cls, *args, **kwargs):
        # The hot path of every op: no context manager, no import, no generator here.
        global _grad_enabled
        ctx = cls(args)
        recording, _grad_enabled = _grad_enabled, False
        try:
            out = ctx.forward(*args, **kwargs)
        finally:
            _grad_enabled = recording
        if _anomaly:
            _check_anomaly(ctx, [out], backward=False)
        if recording:
            Tensor = _tensor.Tensor
            for a in args:
                if isinstance(a, Tensor) and a.requires_grad:
                    # The graph's node is a new Tensor object: ctx may keep `out` for its backward, and
                    # ctx -> out -> ctx would be a reference cycle, its GPU buffers held until Python's
                    # garbage collector happens to run.
                    out = Tensor(out._storage, out.shape, out.dtype, out.device, out._strides, out._offset)
                    out.requires_grad = True
                    out._ctx = ctx
                    break
        return out

    def forward(self, *args, **kwargs):
        raise NotImplementedError

    def backward(self, grad):
        raise NotImplementedError

    def release(self):
        """Drop what forward kept for backward (the graph is freed after a backward)."""
        self.__dict__ = {"inputs": self.inputs, "freed": True}


def _graph_order(root):
    """Tensors of root's graph that need a gradient, outputs before their inputs."""
    from ._tensor import Tensor
    order, seen = [], set()
    stack = [(root, False)]
    while stack:
        t, expanded = stack.pop()
        if expanded:
            order.append(t)
            continue
        if id(t) in seen:
            continue
        seen.add(id(t))
        stack.append((t, True))
        if t._ctx is not None:
            for parent in t._ctx.inputs:
                if isinstance(parent, Tensor) and parent.requires_grad and id(parent) not in seen:
                    stack.append((parent, False))
    return reversed(order)


def backward(root, grad=None, retain_graph=False):
    from ._tensor import Tensor, ones_like
    if not root.requires_grad:
        raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
    if grad is None:
        if math.prod(root.shape) != 1:
            raise RuntimeError("grad can be implicitly created only for scalar outputs; "
                               "pass a gradient to backward()")
        grad = None if root._ctx is not None and root._ctx.takes_unit_grad else ones_like(root)
    grads = {id(root): grad}
    # A backward rule's own ops are not checked one by one: its gradients are, named after it.
    check, rules_checked = _anomaly, _anomaly_mode(False)
    with _grad_mode(False), rules_checked:
        for t in _graph_order(root):
            if id(t) not in grads:
                continue
            g = grads.pop(id(t))
            ctx = t._ctx
            if ctx is None:                      # a leaf: accumulate into .grad (dense, like the leaf,
                t.grad = g.contiguous() if t.grad is None else t.grad + g   # not a broadcast view)
                continue
            if ctx.freed:
                raise RuntimeError(
                    "Trying to backward through the graph a second time; its saved tensors "
                    "were freed after the first backward. Pass retain_graph=True the first time.")
            input_grads = ctx.backward(g)
            if not isinstance(input_grads, tuple):
                input_grads = (input_grads,)
            if check:
                _check_anomaly(ctx, input_grads, backward=True)
            tensors = [a for a in ctx.inputs if isinstance(a, Tensor)]
            for parent, pg in zip(tensors, input_grads):
                if pg is None or not parent.requires_grad:
                    continue
                if pg.shape != parent.shape:
                    raise RuntimeError(f"{type(ctx).__name__}.backward gave a gradient of shape "
                                       f"{pg.shape} for an input of shape {parent.shape}")
                key = id(parent)
                grads[key] = pg if key not in grads else grads[key] + pg
            if not retain_graph:
                ctx.release()


from . import _tensor  # noqa: E402 (a cycle: _tensor imports this module first)
