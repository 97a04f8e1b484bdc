"""The backward pass (torch.autograd.backward and torch.autograd.grad) and tensor hooks.

run() walks the graph that autograd.Function.apply recorded, from one or more roots, each node
after every node that feeds it a gradient. A node's gradient is summed from its consumers, handed
to the hooks Tensor.register_hook put on it (a hook's non-None result replaces it), then either
captured (autograd.grad's inputs: returned, .grad untouched) or passed on: a leaf accumulates it
into .grad, a Function's backward turns it into its inputs' gradients.
"""
import math

from . import autograd as _autograd
from .autograd import _anomaly_mode, _check_anomaly, _grad_mode
from .autograd_function import SlotGrads
from .dtypes import TYPE_NAMES


class WindowGrad:
    """A gradient that is zero outside one window of its tensor: a slice's backward. The backward
    pass keeps a tensor's windows apart until all have come, then writes them into one buffer
    (_dense): split's pieces cost one write of the whole, as a concatenation, where a zero-filled
    whole per piece and their sums would cost five."""
    __slots__ = ("grad", "window", "shape")

    def __init__(self, grad, window, shape):
        self.grad, self.window, self.shape = grad, window, shape   # window: (starts, sizes, steps)


def _boxes_disjoint(a, b):
    return any(sa + na <= sb or sb + nb <= sa for sa, na, sb, nb in zip(a[0], a[1], b[0], b[1]))


def _lies_at(grad, target):
    """Whether tensor grad is the view target: the same storage and dtype, the same elements."""
    return (grad._storage is target._storage and grad.dtype is target.dtype and grad._offset == target._offset
            and all(size == 1 or a == b for size, a, b in zip(target.shape, grad._strides, target._strides)))


def _dense(g):
    """A gradient as one Tensor: g itself, or a list of WindowGrads summed into the whole."""
    if not isinstance(g, list):
        return g
    from .ops.creation import zeros
    from .ops.movement import _slice_view, write_into
    first, shape = g[0].grad, g[0].shape
    unit_steps = all(set(w.window[2]) <= {1} for w in g)
    disjoint = unit_steps and all(_boxes_disjoint(a.window, b.window) for i, a in enumerate(g) for b in g[:i])
    if disjoint and sum(math.prod(w.window[1]) for w in g) == math.prod(shape):   # the pieces tile it
        # the pieces may already lie where a contiguous whole on their storage holds them (written there by
        # their producer: attention's dq, dk and dv of a split product's result): that whole, as it stands
        whole = _autograd._tensor.Tensor(first._storage, shape, first.dtype, first.device)
        if all(_lies_at(w.grad, _slice_view(whole, *w.window)) for w in g):
            return whole
        out = _autograd._tensor.Tensor(first.backend.empty(math.prod(shape), first.dtype), shape, first.dtype,
                                       first.device)
    else:
        out = zeros(shape, dtype=first.dtype, device=first.device)
    for w in g:
        target = _slice_view(out, *w.window)
        write_into(target, w.grad if disjoint else target + w.grad)
    return out


def _accumulate(sum_so_far, g):
    """The gradients for one node so far (a Tensor, a list of WindowGrads, or None) and g."""
    if sum_so_far is None:
        return [g] if isinstance(g, WindowGrad) else g
    if isinstance(sum_so_far, list) and isinstance(g, WindowGrad):
        return sum_so_far + [g]
    return _dense(sum_so_far) + (_dense([g]) if isinstance(g, WindowGrad) else g)


def graph_order(roots):
    """The nodes of the roots' graph (Functions, and leaf Tensors), each before the nodes it leads to."""
    order, seen = [], set()
    stack = [(root, False) for root in reversed(roots)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        for parent in getattr(node, "edges", ()):
            if parent is not None and id(parent) not in seen:
                stack.append((parent, False))
    return order[::-1]


# ---- hooks ----
def register_hook(tensor, hook):
    """Tensor.register_hook: hook(grad) runs when tensor's gradient has been summed, before it is
    accumulated into .grad (a leaf) or passed on (a computed tensor); a non-None result replaces
    it. The hooks live on the tensor's graph node (the leaf itself, or its grad_fn)."""
    from .nn.hooks import RemovableHandle
    if not tensor.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    node = tensor.grad_fn or tensor
    hooks = getattr(node, "_hooks", None)
    if hooks is None:
        hooks = node._hooks = {}
    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    return handle


def _run_hooks(hooks, g):
    for hook in list(hooks.values()):
        changed = hook(g)
        if changed is None:
            continue
        name = getattr(hook, "__name__", type(hook).__name__)
        if not isinstance(changed, _autograd._tensor.Tensor):
            raise TypeError(f"hook '{name}' returned a {type(changed).__name__}, not a Tensor or None")
        if changed.shape != g.shape:
            raise RuntimeError(f"hook '{name}' has changed the size of value")
        if changed.dtype is not g.dtype:
            raise RuntimeError(f"hook '{name}' has changed the type of value (was webgrad."
                               f"{TYPE_NAMES[g.dtype.name]}Tensor got webgrad.{TYPE_NAMES[changed.dtype.name]}Tensor)")
        g = changed
    return g


# ---- the pass ----
def run(roots, root_grads, retain_graph=False, captured=(), accumulate=True):
    """Backpropagate root_grads (a Tensor, or None for a takes_unit_grad root's implicit 1) from the
    root tensors. Returns the gradients of the `captured` tensors (None where none reached one):
    theirs are not passed on into .grad. accumulate: whether the other leaves reached accumulate
    theirs into .grad; if not, only the nodes that lead to a captured tensor run."""
    Tensor = _autograd._tensor.Tensor
    grads, nodes = {}, []
    for root, g in zip(roots, root_grads):
        node = root.grad_fn or root   # (grad_fn: a view's anew where its base was written since)
        nodes.append(node)
        grads[id(node)] = _accumulate(grads.get(id(node)), g)   # (a root given twice: summed)
    slots = {}   # id(captured node) -> its places in the result
    for k, t in enumerate(captured):
        slots.setdefault(id(t.grad_fn or t), []).append(k)
    results = [None] * len(captured)
    order = graph_order(nodes)
    needed = None if accumulate else _leading_to(order, slots)
    # A backward rule's own ops are not checked one by one: its gradients are, named after it.
    check, rules_checked = _autograd._anomaly, _anomaly_mode(False)
    global _leaves_untouched
    outer, _leaves_untouched = _leaves_untouched, not accumulate
    try:
        with _grad_mode(False), rules_checked:
            for node in order:
                if id(node) not in grads or needed is not None and id(node) not in needed:
                    continue
                g = _dense(grads.pop(id(node)))
                hooks = getattr(node, "_hooks", None)
                if hooks:
                    g = _run_hooks(hooks, g)
                if id(node) in slots:
                    for k in slots[id(node)]:
                        results[k] = g.contiguous()
                    if isinstance(node, Tensor) or needed is not None and not _leads_on(node, needed):
                        continue
                if isinstance(node, Tensor):     # a leaf: accumulate into .grad (dense, like the leaf,
                    node.grad = g.contiguous() if node.grad is None else node.grad + g   # not a broadcast view)
                    continue
                _backward_node(node, g, grads, check)
                if not retain_graph:
                    node.release()
    finally:
        _leaves_untouched = outer
    return results


_leaves_untouched = False   # while run() goes: whether it leaves .grad alone (autograd.grad, inputs=)


def leaves_untouched():
    """Whether the backward pass running now leaves the leaves' .grad alone."""
    return _leaves_untouched


def _leading_to(order, slots):
    """The ids of the nodes from which a captured node can be reached (they included)."""
    needed = set(slots)
    for node in reversed(order):   # inputs before the nodes they feed
        if any(id(p) in needed for p in getattr(node, "edges", ()) if p is not None):
            needed.add(id(node))
    return needed


def _leads_on(node, needed):
    return any(p is not None and id(p) in needed for p in node.edges)


def _backward_node(node, g, grads, check):
    """Run one Function's backward on its output's gradient g; add its inputs' gradients to grads."""
    if node.freed:
        raise RuntimeError(
            "Trying to backward through the graph a second time; its saved tensors "
            "were freed after the first backward. Pass retain_graph=True the first time.")
    retained = getattr(node, "retained", None)   # Tensor.retain_grad's tensor
    t = retained() if retained is not None else None
    if t is not None and t._ctx is node:
        g_t = g if g is not None else _autograd._tensor.ones_like(t)
        t.grad = g_t if t.grad is None else t.grad + g_t
    outer, _autograd._unpacking = _autograd._unpacking, node.versions
    try:
        input_grads = node.backward(g)
    finally:
        _autograd._unpacking = outer
    if isinstance(input_grads, SlotGrads):   # one output of a multi-output Function: on to that Function
        key = id(node.edges[0])
        grads[key] = _accumulate(grads.get(key), input_grads)
        return
    if not isinstance(input_grads, tuple):
        input_grads = (input_grads,)
    if check:
        input_grads = tuple(_dense([pg]) if isinstance(pg, WindowGrad) else pg for pg in input_grads)
        _check_anomaly(node, input_grads, backward=True)
    Tensor = _autograd._tensor.Tensor
    tensors = [a for a in node.inputs if isinstance(a, Tensor)]
    for parent, edge, pg in zip(tensors, node.edges, input_grads):
        if pg is None or edge is None:
            continue
        if pg.shape != parent.shape:
            raise RuntimeError(f"{type(node).__name__}.backward gave a gradient of shape "
                               f"{pg.shape} for an input of shape {parent.shape}")
        key = id(edge)
        grads[key] = _accumulate(grads.get(key), pg)


# ---- torch.autograd's functions ----
def _as_tuple(tensors):
    return (tensors,) if isinstance(tensors, _autograd._tensor.Tensor) else tuple(tensors)


def _root_grads(outputs, grad_outputs, captured):
    """Each output's starting gradient: as given, or 1 for a scalar (None where its node can fold
    the 1 into its kernel: see Function.takes_unit_grad)."""
    from ._tensor import ones_like
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    grad_outputs = _as_tuple(grad_outputs)
    if len(grad_outputs) != len(outputs):
        raise RuntimeError(f"got {len(outputs)} tensors and {len(grad_outputs)} gradients")
    hooked = {id(t.grad_fn or t) for t in captured}
    grads = []
    for k, (out, g) in enumerate(zip(outputs, grad_outputs)):
        if not out.requires_grad:
            raise RuntimeError(f"element {k} of tensors does not require grad and does not have a grad_fn")
        if g is not None:
            if g.shape != out.shape:
                raise RuntimeError(f"Mismatch in shape: grad_output[{k}] has a shape of {g.shape!r} and "
                                   f"output[{k}] has a shape of {out.shape!r}.")
            grads.append(g)
            continue
        if math.prod(out.shape) != 1:
            raise RuntimeError("grad can be implicitly created only for scalar outputs")
        node = out.grad_fn
        folds = (len(outputs) == 1 and node is not None and node.takes_unit_grad
                 and not getattr(node, "_hooks", None) and id(node) not in hooked)
        grads.append(None if folds else ones_like(out))
    return grads


def _no_double_backward(create_graph):
    if create_graph:
        raise NotImplementedError("create_graph=True (double backward): webgrad's backward rules do not record "
                                  "a graph of their own, so gradients of gradients are not supported")


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, grad_variables=None, inputs=None):
    """torch.autograd.backward: accumulate the gradients of tensors (given grad_tensors, or 1 for
    scalars) into the .grad of the leaves they depend on, or of `inputs` alone where given."""
    _no_double_backward(create_graph)
    tensors = _as_tuple(tensors)
    grads = _root_grads(tensors, grad_tensors if grad_variables is None else grad_variables, ())
    retain_graph = create_graph if retain_graph is None else retain_graph
    if inputs is None:
        run(tensors, grads, retain_graph)
        return
    inputs = _as_tuple(inputs)
    if not inputs:
        raise RuntimeError("'inputs' argument to backward() cannot be empty.")
    for t, g in zip(inputs, run(tensors, grads, retain_graph, inputs, accumulate=False)):
        if g is not None:
            t.grad = g if t.grad is None else t.grad + g


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, only_inputs=True,
         allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """torch.autograd.grad: the gradients of outputs with respect to inputs, as a tuple, leaving
    every .grad as it was."""
    _no_double_backward(create_graph)
    if is_grads_batched:
        raise NotImplementedError("is_grads_batched=True (vmap over grad_outputs) is not supported")
    if materialize_grads and allow_unused is False:
        raise ValueError("Expected allow_unused to be True or not passed when materialize_grads=True, "
                         "but got: allow_unused=False.")
    allow_unused = materialize_grads if allow_unused is None else allow_unused
    outputs, inputs = _as_tuple(outputs), _as_tuple(inputs)
    if not outputs:
        raise RuntimeError("grad requires at least one output tensor")
    if not inputs:
        raise RuntimeError("grad requires at least one input tensor")
    if not all(t.requires_grad for t in inputs):
        raise RuntimeError("One of the differentiated Tensors does not require grad")
    grads = _root_grads(outputs, grad_outputs, inputs)
    results = run(outputs, grads, create_graph if retain_graph is None else retain_graph, inputs, accumulate=False)
    for k, (t, g) in enumerate(zip(inputs, results)):
        if g is None and not allow_unused:
            raise RuntimeError(f"The differentiated Tensor at index {k} appears to not have been used in the graph. "
                               "Set allow_unused=True if this is the desired behavior.")
        if g is None and materialize_grads:
            from .ops.creation import zeros_like
            results[k] = zeros_like(t)
    return tuple(results)
