"""torch.autograd.Function's style of custom op (also importable as webgrad.autograd.function).

    class MyReLU(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x): ctx.save_for_backward(x); return x.clamp(min=0)
        @staticmethod
        def backward(ctx, grad): (x,) = ctx.saved_tensors; return grad * (x > 0)

autograd.Function.__init_subclass__ hands such a class (forward a staticmethod) to adopt(), which
gives it apply_ctx_style as its apply: the library's own ops, written with instance methods, keep
the plain apply on their hot path. The graph node of a call is an instance of the class's
`<Name>Backward` (a Function holding the FunctionCtx that forward and backward share), so user
attributes on ctx never meet the engine's node attributes. A forward returning a tuple gives each
differentiable output a node of its own (_OutputSlot) that hands its gradient to the Function's
node as SlotGrads: the engine sums those per output and the Function's backward gets them all.
"""
import functools
import sys

from . import autograd as _autograd
from .autograd import Function, _check_anomaly, _grad_mode, modified_error, no_grad, version


class FunctionCtx:
    """The ctx a torch-style Function's forward (or setup_context) fills and its backward reads;
    any other attribute may be set on it too."""

    def __init__(self, needs_input_grad=()):
        self.needs_input_grad = needs_input_grad   # per forward argument: a Tensor whose gradient is wanted
        self.materialize_grads = True
        self._saved, self._saved_versions, self._non_differentiable, self._dirty = (), (), (), ()

    def save_for_backward(self, *tensors):
        Tensor = _autograd._tensor.Tensor
        for k, t in enumerate(tensors):
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(f"save_for_backward can only save variables, but argument {k} is of type "
                                f"{type(t).__name__}")
        self._saved = tensors
        self._note_versions()

    def _note_versions(self):
        self._saved_versions = tuple(None if t is None else version(t._storage) for t in self._saved)

    @property
    def saved_tensors(self):
        """The tensors save_for_backward kept; raises if one has been written in place since."""
        for t, expected in zip(self._saved, self._saved_versions):
            if t is not None and version(t._storage) != expected:
                raise RuntimeError(modified_error(t, expected))
        return self._saved

    def mark_non_differentiable(self, *tensors):
        """These outputs do not require grad; backward gets zeros (or None) as their gradients."""
        self._non_differentiable = tensors

    def mark_dirty(self, *tensors):
        """forward wrote these inputs in place and returns them: their history becomes this op."""
        self._dirty = tensors

    def set_materialize_grads(self, value):
        """Whether backward gets zeros (True, the default) or None for outputs that got no gradient."""
        self.materialize_grads = bool(value)


class SlotGrads:
    """The gradients of a multi-output Function's outputs, one slot each (None: none came yet)."""
    __slots__ = ("grads",)

    def __init__(self, grads):
        self.grads = grads

    def __add__(self, other):
        return SlotGrads([b if a is None else a if b is None else a + b for a, b in zip(self.grads, other.grads)])


class _OutputSlot(Function):
    """Output k of a multi-output Function: passes its gradient on to the Function's node."""

    def __init__(self, node, k, n):
        self.inputs, self.edges, self.versions, self.slot, self.slots = (), [node], {}, k, n

    def backward(self, grad):
        grads = [None] * self.slots
        grads[self.slot] = grad
        return SlotGrads(grads)


class BackwardCFunction(Function):
    """A torch-style Function's graph node (each Function class gets a subclass, <Name>Backward)."""
    function = None   # the Function class
    op = None         # names the node for detect_anomaly (autograd._op_name)

    def backward(self, grad):
        ctx, name = self.ctx, type(self).__name__
        grads = grad.grads if isinstance(grad, SlotGrads) else [grad]
        if ctx.materialize_grads:
            from .ops.creation import zeros
            grads = [zeros(meta[0], dtype=meta[1], device=meta[2]) if g is None and meta is not None else g
                     for g, meta in zip(grads, self.outputs)]
        results = self.function.backward(ctx, *grads)
        results = results if isinstance(results, tuple) else (results,)
        n = len(self.inputs)
        if len(results) > n and all(r is None for r in results[n:]):
            results = results[:n]
        if len(results) != n:
            raise RuntimeError(f"function {name} returned an incorrect number of gradients (expected {n}, "
                               f"got {len(results)})")
        Tensor, input_grads = _autograd._tensor.Tensor, []
        for k, (a, g) in enumerate(zip(self.inputs, results)):
            if not isinstance(a, Tensor):
                if g is not None:
                    raise RuntimeError(f"function {name} returned a gradient different than None at position "
                                       f"{k + 1}, but the corresponding forward input was not a Variable")
                continue
            if g is not None and g.shape != a.shape:
                g = _sum_to(g, a.shape, name, k)
            input_grads.append(g)
        return tuple(input_grads)


def _sum_to(g, shape, name, k):
    """g summed down to shape, where shape expands to g's (as torch reduces a broadcast gradient)."""
    lead = g.ndim - len(shape)
    if lead < 0 or any(n != 1 and n != m for n, m in zip(shape, g.shape[lead:])):
        raise RuntimeError(f"Function {name} returned an invalid gradient at index {k} - got {list(g.shape)} but "
                           f"expected shape compatible with {list(shape)}")
    from .ops.movement import sum_to   # (ops import autograd)
    return sum_to(g, shape)


class _Named:   # what autograd._op_name reads a node's name from (its op.name)
    def __init__(self, name):
        self.name = name


def adopt(cls):
    """Give the torch-style Function class cls its apply and its node class."""
    cls.apply = classmethod(apply_ctx_style)
    cls._backward_cls = type(cls.__name__ + "Backward", (BackwardCFunction,),
                             {"function": cls, "op": _Named(cls.__name__), "__module__": __name__})


def apply_ctx_style(cls, *args, **kwargs):
    """Run cls.forward with a fresh ctx and, where grad mode is on and an input requires grad, record
    one node for the call: its outputs require grad, their gradients going to cls.backward."""
    setup_context = getattr(cls, "setup_context", None)   # torch's other style: forward takes no ctx
    if kwargs:   # (keyword arguments become positional: backward answers per forward argument)
        import inspect
        bound = inspect.signature(cls.forward).bind(*(args if setup_context else (None, *args)), **kwargs)
        bound.apply_defaults()
        args = bound.args if setup_context else bound.args[1:]
    Tensor = _autograd._tensor.Tensor
    recording = _autograd.is_grad_enabled()
    for a in args:
        if recording and isinstance(a, Tensor) and a._base is not None and _autograd.is_stale_view(a):
            _autograd._refresh_view(a)
    wanted = tuple(recording and isinstance(a, Tensor) and a.requires_grad for a in args)
    edges = [(a._ctx or a) if w else None for a, w in zip(args, wanted) if isinstance(a, Tensor)]
    ctx = FunctionCtx(wanted)
    with _grad_mode(False):
        if setup_context:
            out = cls.forward(*args)
            setup_context(ctx, args, out)
        else:
            out = cls.forward(ctx, *args)
    outputs = out if isinstance(out, tuple) else (out,)
    node = cls._backward_cls()
    if _autograd._anomaly:
        _check_anomaly(node, [o for o in outputs if isinstance(o, Tensor)], backward=False)
    if not any(wanted):
        return out
    ctx._note_versions()   # (after forward: a saved input it wrote in place (mark_dirty) is as it left it)
    node.ctx, node.inputs, node.edges, node.versions = ctx, args, edges, {}
    node.outputs = [(o.shape, o.dtype, o.device) if isinstance(o, Tensor) else None for o in outputs]
    results = [_output(node, k, o, len(outputs), ctx, isinstance(out, tuple)) for k, o in enumerate(outputs)]
    return tuple(results) if isinstance(out, tuple) else results[0]


def _output(node, k, o, n, ctx, several):
    """Output k as the caller gets it: requiring grad through node, unless it is no float Tensor or
    was marked non-differentiable."""
    Tensor = _autograd._tensor.Tensor
    if (not isinstance(o, Tensor) or not o.dtype.is_floating_point
            or any(o is t for t in ctx._non_differentiable)):
        return o
    grad_fn = _OutputSlot(node, k, n) if several else node
    if any(o is t for t in ctx._dirty):   # an input written in place: its history continues here
        from .ops.inplace import _rebase
        if o._ctx is None and o.requires_grad:
            raise RuntimeError("a leaf Variable that requires grad has been used in an in-place operation.")
        if o._base is not None and o._base._ctx is None and o._base.requires_grad:
            raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")
        _rebase(o, grad_fn)
        return o
    # a new Tensor object, as Function.apply makes: ctx may hold forward's own result
    t = Tensor(o._storage, o.shape, o.dtype, o.device, o._strides, o._offset)
    t._base, t._base_node = o._base, o._base_node
    t._ctx, t.requires_grad = grad_fn, True
    return t


def once_differentiable(backward):
    """torch.autograd.function.once_differentiable: backward runs without recording a graph (webgrad's
    backward passes never record one; this keeps torch programs that use it as written)."""
    @functools.wraps(backward)
    def wrapper(ctx, *grads):
        with no_grad():
            return backward(ctx, *grads)
    return wrapper


sys.modules.setdefault(__name__.rsplit(".", 1)[0] + ".autograd.function", sys.modules[__name__])
