"""The autograd engine: accumulation, grad modes, detach, graph freeing, views, broadcasting, shared inputs."""
import numpy as np
import pytest

import webgrad as wg
from conftest import assert_close, check_op, nonzero, randn, tag, to_numpy, wg_tensor


def test_gradients_accumulate_across_backward_calls(device):
    a = randn(3, 4)
    x = wg_tensor(a, device, requires_grad=True)
    (x * x).sum().backward()
    first = to_numpy(x.grad).copy()
    assert_close(first, 2 * a, what="first backward")
    (x * 3).sum().backward()
    assert_close(x.grad, 2 * a + 3, what="accumulated .grad")
    assert_close(first, 2 * a, what="the first .grad tensor is not modified in place")


def test_leaf_grad_is_contiguous_with_the_leaf_shape(device):
    x = wg_tensor(randn(3, 4), device, requires_grad=True)
    x.sum().backward()                              # the gradient arrives as an expanded 0-d value
    assert x.grad.shape == (3, 4) and x.grad.is_contiguous() and x.grad.device == device
    assert_close(x.grad, np.ones((3, 4), np.float32))
    y = wg_tensor(randn(4, 3), device, requires_grad=True)
    (y.T * wg_tensor(randn(3, 4), device)).sum().backward()   # the gradient arrives transposed
    assert y.grad.shape == (4, 3) and y.grad.is_contiguous()


def test_no_grad_and_enable_grad(device):
    x = wg_tensor(randn(5), device, requires_grad=True)
    with wg.no_grad():
        y = x * 2
        assert not wg.is_grad_enabled()
        with wg.enable_grad():
            z = x * 2
            assert wg.is_grad_enabled()
    assert wg.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None
    assert z.requires_grad and z.grad_fn is not None

    @wg.no_grad()
    def double(t):
        return t * 2
    assert not double(x).requires_grad
    with pytest.raises(RuntimeError):
        y.sum().backward()


def test_grad_mode_restored_after_exception(device):
    with pytest.raises(ZeroDivisionError):
        with wg.no_grad():
            raise ZeroDivisionError
    assert wg.is_grad_enabled()


def test_detach(device):
    a = randn(4)
    x = wg_tensor(a, device, requires_grad=True)
    d = x.detach()
    assert not d.requires_grad and d.is_leaf and d.grad_fn is None
    assert d._storage is x._storage, tag("detach should share storage")
    (x * d).sum().backward()
    assert_close(x.grad, a, what="detached operand gets no gradient path")


def test_requires_grad_flag(device):
    x = wg_tensor(randn(3), device)
    assert not x.requires_grad and x.is_leaf
    assert x.requires_grad_() is x and x.requires_grad
    x.requires_grad_(False)
    assert not x.requires_grad
    with pytest.raises(RuntimeError):
        wg.tensor([1, 2], device=device).requires_grad_()
    with pytest.raises(RuntimeError):
        wg.tensor([1, 2], device=device, requires_grad=True)
    y = wg_tensor(randn(3), device, requires_grad=True) * 2
    assert not y.is_leaf
    with pytest.raises(RuntimeError):
        y.requires_grad_(False)
    t = wg.ones(2, 3, device=device, requires_grad=True)
    assert t.requires_grad and t.is_leaf


def test_second_backward_through_freed_graph_raises(device):
    x = wg_tensor(nonzero(3), device, requires_grad=True)
    loss = (x.exp() * x).sum()
    loss.backward()
    with pytest.raises(RuntimeError, match="second time|retain_graph"):
        loss.backward()


def test_retain_graph_allows_a_second_backward(device):
    a = nonzero(3)
    x = wg_tensor(a, device, requires_grad=True)
    loss = (x.exp() * x).sum()
    loss.backward(retain_graph=True)
    loss.backward()
    assert_close(x.grad, 2 * (np.exp(a) * (1 + a)), what="two backward passes accumulate")


def test_backward_errors(device):
    x = wg_tensor(randn(3), device, requires_grad=True)
    with pytest.raises(RuntimeError, match="scalar"):
        (x * 2).backward()
    with pytest.raises(RuntimeError):
        wg_tensor(randn(3), device).sum().backward()


def test_backward_with_explicit_gradient(device):
    a, g = randn(2, 3), randn(2, 3)
    x = wg_tensor(a, device, requires_grad=True)
    (x * x).backward(wg_tensor(g, device))
    assert_close(x.grad, 2 * a * g)


def test_intermediate_tensors_get_no_grad(device):
    x = wg_tensor(randn(3), device, requires_grad=True)
    y = x * 2
    y.sum().backward()
    assert y.grad is None and x.grad is not None


def test_gradients_through_views(device):
    check_op(lambda t: t.T.reshape(-1)[::3] * t.reshape(-1)[:4].sum(), randn(3, 4), device=device)
    check_op(lambda t: t[1].unsqueeze(0).expand(3, 4) * t.permute(1, 0)[:, :3].T, randn(3, 4), device=device)


def test_gradients_through_broadcasting(device):
    check_op(lambda a, b, c: a * b + c, randn(3, 1, 5), randn(4, 1), randn(), device=device)
    check_op(lambda a, b: (a - b).exp().sum(0), randn(2, 1, 3), randn(5, 3), device=device)


def test_diamond_graph(device):
    # x feeds two paths that meet again; and the same tensor is both operands of one op
    check_op(lambda x: (x.exp() * x.tanh()) + x * x, nonzero(4, 5), device=device)
    a = nonzero(4)
    x = wg_tensor(a, device, requires_grad=True)
    y = x * 3
    z = y * y + y
    z.sum().backward()
    assert_close(x.grad, 18 * a + 3, what="diamond gradient")


def test_deep_chain(device):
    def fn(t):
        for _ in range(60):
            t = (t * 0.9 + 0.05).tanh()
        return t
    check_op(fn, randn(17), device=device)


def test_shared_subgraph_multiple_leaves(device):
    check_op(lambda a, b: ((a @ b).relu() * a.sum(1, keepdim=True) - b.mean()).sum(), nonzero(4, 3), nonzero(3, 5),
             device=device)


def test_grad_does_not_flow_into_integer_results(device):
    x = wg_tensor(randn(6), device, requires_grad=True)
    idx = x.argmax()
    assert not idx.requires_grad
    mask = (x > 0).float()
    (x * mask).sum().backward()
    assert_close(x.grad, to_numpy(mask))
