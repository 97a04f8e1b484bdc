"""The eager elementwise path's shortcuts keep torch's autograd semantics, on fresh random inputs on
both devices: an op records a node exactly where torch's does (an input requiring grad, grad mode
on, a floating result), a view of a base written in place since renews its history, and the
cached plans and strides of repeated calls give the same values as the first."""
import contextlib

import pytest
import torch

import webgrad as wg
from conftest import assert_close, randn, tag, torch_tensor, wg_tensor

# name -> fn(a, b): elementwise calls of each kind (tensor-tensor, unary, with a Python number, comparison)
CALLS = {
    "a + b": lambda a, b: a + b,
    "a.relu()": lambda a, b: a.relu(),
    "a * 2": lambda a, b: a * 2,
    "2.5 - a": lambda a, b: 2.5 - a,
    "a / b[0]": lambda a, b: a / b[0],
    "a > b": lambda a, b: a > b,
}


@pytest.mark.parametrize("call", CALLS)
@pytest.mark.parametrize("grad_a", [False, True])
@pytest.mark.parametrize("mode", ["grad", "no_grad"])
def test_node_where_torch_records_one(device, call, grad_a, mode):
    x, y = randn(3, 4), randn(3, 4)
    fn = CALLS[call]
    results = []
    for make, context in ((lambda v, g: wg_tensor(v, device, g), wg.no_grad),
                          (torch_tensor, torch.no_grad)):
        a, b = make(x, grad_a), make(y, False)
        with context() if mode == "no_grad" else contextlib.nullcontext():
            first, again = fn(a, b), fn(a, b)   # the second call takes the cached plan
        results.append((first, again))
    (ours, ours_again), (theirs, _) = results
    for out in (ours, ours_again):
        assert out.requires_grad == theirs.requires_grad, tag(f"{call}: requires_grad")
        assert (out.grad_fn is None) == (theirs.grad_fn is None), tag(f"{call}: grad_fn")
        assert out.is_leaf == theirs.is_leaf, tag(f"{call}: is_leaf")
        assert out.stride() == theirs.stride(), tag(f"{call}: strides")
        assert_close(out, theirs, what=call)


def test_gradients_of_repeated_calls(device):
    """The same op twice on one signature (the second from the caches): both gradients flow."""
    x, y = randn(5), randn(5)
    grads = []
    for make in (lambda v: wg_tensor(v, device, True), lambda v: torch_tensor(v, True)):
        a, b = make(x), make(y)
        ((a * b + a.relu()) * 2 + (a * b + a.relu()) * 3).sum().backward()
        grads.append((a.grad, b.grad))
    for ours, theirs in zip(*grads):
        assert_close(ours, theirs, what="gradient")


def test_stale_view_renews_its_history(device):
    """A view taken before its base was written in place by an op requiring grad: ops on it record
    a node (the view now requires grad), as torch regenerates the view's grad_fn."""
    base_values, w_values = randn(4), randn(4)
    outs = []
    for make, ones in ((lambda v, g: wg_tensor(v, device, g), lambda: wg.ones(4, device=device)),
                       (torch_tensor, lambda: torch.ones(4))):
        base = ones() * make(base_values, False)
        view = base[0:2]
        w = make(w_values, True)
        base.mul_(w)
        out = view * 3.0
        assert out.requires_grad and out.grad_fn is not None, tag("op on a stale view")
        out.sum().backward()
        outs.append((out, w.grad))
    (ours, ours_grad), (theirs, theirs_grad) = outs
    assert_close(ours, theirs, what="values")
    assert_close(ours_grad, theirs_grad, what="gradient through the stale view")
