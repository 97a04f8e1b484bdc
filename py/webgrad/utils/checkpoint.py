"""torch.utils.checkpoint: trade compute for memory.

checkpoint(function, *args) keeps no graph of function's ops: its outputs get one node each, whose
backward runs function again (grad on, the random generator and autocast as they were at the first
run, so dropout draws the same masks) and backpropagates through that fresh graph to the call's
sources (a call with several tensor outputs runs again for each that gets a gradient). The sources
are, as in torch:
- use_reentrant=True (torch's default, with a warning where not passed): the tensor arguments
  that require grad; the first run keeps no graph at all, and leaves reached otherwise (the
  parameters inside function) accumulate their .grad directly while the node's backward runs;
- use_reentrant=False: every leaf requiring grad that the outputs depend on (arguments and
  parameters alike), found by the first run recording its graph, which is dropped as it returns:
  only one call's saved tensors live at a time.
"""
import contextlib
import itertools
import warnings

from .. import autograd
from ..amp import autocast, get_autocast_dtype, is_autocast_enabled
from ..autograd import Function, enable_grad, is_grad_enabled, no_grad
from ..autograd_engine import graph_order, leaves_untouched, run
from .._tensor import Tensor
from ..ops.generator import get_rng_state, set_rng_state

__all__ = ["checkpoint", "checkpoint_sequential"]


def noop_context_fn():
    """The default context_fn: no context around the first run or the recomputation."""
    return contextlib.nullcontext(), contextlib.nullcontext()


class _Call:
    """A checkpointed call, kept to run again: the function and its arguments (tensors detached, so
    the recomputed graph stops at them), and the random and autocast state it first ran under."""

    def __init__(self, function, args, kwargs, preserve_rng_state, recompute_context):
        self.function, self.kwargs, self.recompute_context = function, kwargs, recompute_context
        self.args = tuple(a.detach().requires_grad_(a.requires_grad) if isinstance(a, Tensor) else a for a in args)
        self.rng_state = get_rng_state() if preserve_rng_state else None
        self.autocast = [(device, get_autocast_dtype(device)) for device in ("webgpu", "cpu")
                         if is_autocast_enabled(device)]

    def again(self):
        """The function's outputs anew, its graph recorded; the generator's state outside is kept."""
        with contextlib.ExitStack() as stack:
            if self.rng_state is not None:
                stack.callback(set_rng_state, get_rng_state())
                set_rng_state(self.rng_state)
            for device, dtype in self.autocast:
                stack.enter_context(autocast(device, dtype=dtype))
            stack.enter_context(self.recompute_context)
            stack.enter_context(enable_grad())
            return self.function(*self.args, **self.kwargs)


class _Checkpoint(Function):
    """The node of one output of a checkpointed call (inputs: the call's sources, see the module
    docstring); its backward recomputes the call and backpropagates grad from that output."""

    def backward(self, grad):
        if self.reentrant and leaves_untouched():   # its recomputation would write the parameters' .grad
            raise RuntimeError("When use_reentrant=True, torch.utils.checkpoint is incompatible with .grad() or "
                               "passing an `inputs` parameter to .backward(). To resolve this error, you can either "
                               "set use_reentrant=False, or call .backward() without passing the `inputs` argument.")
        for t in self.inputs:   # as a saved tensor is checked: not written in place since the first run
            autograd.check_saved(t)
        # the call runs as a forward (autocast applies), not as a backward rule's ops
        outer, autograd._unpacking = autograd._unpacking, None
        try:
            out = _tensors(self.call.again())[self.index]
        finally:
            autograd._unpacking = outer
        if out.shape != grad.shape:
            raise RuntimeError(f"checkpoint: the recomputed output {self.index} has shape {out.shape!r}, the first "
                               f"run's had {grad.shape!r}: the function must compute the same shapes every run")
        if not out.requires_grad:
            return (None,) * len(self.inputs)
        return tuple(run([out], [grad], captured=self.captured, accumulate=self.reentrant))


def _tensors(result):
    """The tensors a call returned: the result itself, or those in a returned tuple or list."""
    if isinstance(result, Tensor):
        return [result]
    return [r for r in result if isinstance(r, Tensor)] if isinstance(result, (tuple, list)) else []


def _attach(result, call, sources, captured, reentrant, gets_node):
    """result with each of its tensors for which gets_node(tensor) made a _Checkpoint node's output."""
    versions = {id(t._storage): autograd.version(t._storage) for t in sources}
    edges = [t.grad_fn or t for t in sources]
    index = itertools.count()   # the tensor's place among the call's output tensors

    def attach(value):
        if not isinstance(value, Tensor):
            return value
        k = next(index)
        if not gets_node(value):
            return value.detach()
        node = _Checkpoint()
        node.inputs, node.edges, node.versions = tuple(sources), edges, versions
        node.call, node.index, node.captured, node.reentrant = call, k, captured, reentrant
        out = value.detach()
        out.requires_grad, out._ctx = True, node
        return out
    if isinstance(result, Tensor):
        return attach(result)
    return type(result)(attach(r) for r in result) if isinstance(result, (tuple, list)) else result


def checkpoint(function, *args, use_reentrant=None, context_fn=noop_context_fn, determinism_check="default",
               debug=False, early_stop=True, **kwargs):
    """function(*args, **kwargs), its activations recomputed in backward instead of kept."""
    preserve_rng_state = kwargs.pop("preserve_rng_state", True)
    if use_reentrant is None:
        warnings.warn("webgrad.utils.checkpoint: the use_reentrant parameter should be passed explicitly; "
                      "without it the call is reentrant, torch's default. use_reentrant=False is recommended.",
                      stacklevel=2)
        use_reentrant = True
    if determinism_check not in ("default", "none"):
        raise ValueError(f"determinism_check should be one of ['default', 'none'], but got {determinism_check}")
    if not is_grad_enabled():   # nothing to recompute for
        return function(*args, **kwargs)
    if use_reentrant:
        if context_fn is not noop_context_fn or debug:
            raise ValueError("Passing `context_fn` or `debug` is only supported when use_reentrant=False.")
        if kwargs:
            raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
        return _reentrant(function, args, preserve_rng_state)
    forward_context, recompute_context = context_fn()
    call = _Call(function, args, kwargs, preserve_rng_state, recompute_context)
    with forward_context:
        result = function(*call.args, **kwargs)
    recorded = [o for o in _tensors(result) if o.requires_grad]
    leaves = [node for node in graph_order([o.grad_fn or o for o in recorded]) if isinstance(node, Tensor)]
    given = {id(d): a for d, a in zip(call.args, args) if isinstance(d, Tensor)}
    sources = [given.get(id(leaf), leaf) for leaf in leaves]
    return _attach(result, call, sources, leaves, False, lambda o: o.requires_grad)


def _reentrant(function, args, preserve_rng_state):
    sources = [a for a in args if isinstance(a, Tensor) and a.requires_grad]
    if not sources:
        warnings.warn("None of the inputs have requires_grad=True. Gradients will be None", stacklevel=3)
    call = _Call(function, args, {}, preserve_rng_state, contextlib.nullcontext())
    with no_grad():
        result = function(*call.args)
    if not sources:
        return result
    captured = [d for d, a in zip(call.args, args) if isinstance(a, Tensor) and a.requires_grad]
    return _attach(result, call, sources, captured, True, lambda o: o.dtype.is_floating_point)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """Run functions (a list, or an nn.Sequential's children) one after another on input, in
    `segments` pieces, each but the last checkpointed."""
    from ..nn import Sequential
    preserve_rng_state = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    if use_reentrant is None:
        warnings.warn("webgrad.utils.checkpoint.checkpoint_sequential: the use_reentrant parameter should be passed "
                      "explicitly; without it the calls are reentrant, torch's default. use_reentrant=False is "
                      "recommended.", stacklevel=2)
        use_reentrant = True
    if isinstance(functions, Sequential):
        functions = list(functions.children())
    if not 1 <= segments <= len(functions):
        raise ValueError(f"checkpoint_sequential: segments must be between 1 and the number of functions "
                         f"({len(functions)}), got {segments}")

    def run_segment(start, end):
        def forward(x):
            for f in functions[start:end]:
                x = f(x)
            return x
        return forward

    size = len(functions) // segments
    for start in range(0, size * (segments - 1), size):
        input = checkpoint(run_segment(start, start + size), input, use_reentrant=use_reentrant,
                           preserve_rng_state=preserve_rng_state)
    return run_segment(size * (segments - 1), len(functions))(input)
