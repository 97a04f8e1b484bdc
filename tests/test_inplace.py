"""In-place ops and their autograd rules, against torch on fresh random inputs, on both devices:
values, gradients (on non-leaf tensors the in-place op is differentiated; on a view, the base's
history is rebased), the version counter and its errors, the leaf rules, and writes through views."""
import numpy as np
import pytest
import torch

import webgrad as wg
from conftest import assert_close, check_op, nonzero, positive, randn, rng, seed, tag, wg_tensor

# name -> (fn(x, other) modifying a non-leaf made from x and returning it, other's kind)
OPS = {
    "add_": (lambda x, o=None: (x * 1.5).add_(o), "tensor"),
    "add_ alpha": (lambda x, o=None: (x * 1.5).add_(o, alpha=-0.5), "tensor"),
    "add_ number": (lambda x, o=None: (x * 1.5).add_(2.5), "tensor"),
    "sub_": (lambda x, o=None: (x * 1.5).sub_(o), "tensor"),
    "sub_ alpha": (lambda x, o=None: (x * 1.5).sub_(o, alpha=2), "tensor"),
    "mul_": (lambda x, o=None: (x * 1.5).mul_(o), "tensor"),
    "div_": (lambda x, o=None: (x * 1.5).div_(o), "nonzero"),
    "pow_": (lambda x, o=None: (x * 1.5).pow_(o), "positive"),
    "pow_ number": (lambda x, o=None: (x * 1.5).pow_(2.0), "tensor"),
    "neg_": (lambda x, o=None: (x * 1.5).neg_(), None),
    "exp_": (lambda x, o=None: (x * 0.5).exp_(), None),
    "log_": (lambda x, o=None: (x * 1.5).log_(), None),
    "sqrt_": (lambda x, o=None: (x * 1.5).sqrt_(), None),
    "abs_": (lambda x, o=None: (x * 1.5).abs_(), None),
    "relu_": (lambda x, o=None: (x * 1.5).relu_(), None),
    "sigmoid_": (lambda x, o=None: (x * 1.5).sigmoid_(), None),
    "tanh_": (lambda x, o=None: (x * 1.5).tanh_(), None),
    "clamp_": (lambda x, o=None: (x * 1.5).clamp_(-0.4, 0.7), None),
    "clamp_ tensor": (lambda x, o=None: (x * 1.5).clamp_(min=o), "tensor"),
    "copy_": (lambda x, o=None: (x * 1.5).copy_(o), "tensor"),
    "fill_": (lambda x, o=None: (x * 1.5).fill_(-1.25), None),
    "zero_": (lambda x, o=None: (x * 1.5).zero_(), None),
    "masked_fill_": (lambda x, o=None: (x * 1.5).masked_fill_(o > 0, 2.0), "tensor"),
    "addcmul_": (lambda x, o=None: (x * 1.5).addcmul_(o, o, value=0.3), "tensor"),
    "addcdiv_": (lambda x, o=None: (x * 1.5).addcdiv_(o, o * o + 1, value=-0.7), "tensor"),
    "lerp_": (lambda x, o=None: (x * 1.5).lerp_(o, 0.25), "tensor"),
    "+=": (lambda x, o=None: _iop(x * 1.5, "__iadd__", o), "tensor"),
    "-=": (lambda x, o=None: _iop(x * 1.5, "__isub__", o), "tensor"),
    "*=": (lambda x, o=None: _iop(x * 1.5, "__imul__", o), "tensor"),
    "/=": (lambda x, o=None: _iop(x * 1.5, "__itruediv__", o), "nonzero"),
    "chain": (lambda x, o=None: (x * 1.5).mul_(o).add_(o).sigmoid_(), "tensor"),
}


def _iop(t, name, other):
    out = getattr(t, name)(other)
    assert out is t, "an augmented assignment must return the same tensor"
    return out


@pytest.mark.parametrize("name", list(OPS))
def test_inplace_op_matches_torch(name, device):
    """Values and the gradients of x and of the other operand (which broadcasts) against torch and
    finite differences; positive x where the op needs it."""
    fn, other = OPS[name]
    x = positive(3, 4) if name in ("log_", "sqrt_", "pow_", "pow_ number") else nonzero(3, 4)
    inputs = [x]
    if other:
        inputs.append({"tensor": randn, "nonzero": nonzero, "positive": positive}[other](4))
    check_op(fn, *inputs, device=device)


def test_inplace_keeps_the_object_and_storage_and_counts_versions(device):
    for L, d in ((torch, "cpu"), (wg, device)):
        x = L.tensor(randn(3, 4), device=d)
        storage_before = x.data_ptr() if L is torch else x._storage
        row, flat = x[1], x.view(12)
        results = [x.add_(1), x.mul_(2), x.clamp_(max=3.0), x.zero_()]
        assert all(r is x for r in results)
        assert (x.data_ptr() if L is torch else x._storage) is storage_before or L is torch
        assert x._version == row._version == flat._version == x.detach()._version == 4, tag(
            f"{L.__name__}: versions {x._version} {row._version} {flat._version}")
        row.fill_(5.0)
        assert x._version == 5 and x[1].tolist() == [5.0] * 4 and flat.tolist()[4:8] == [5.0] * 4


def test_augmented_assignment_writes_through_views(device):
    a = randn(4, 6)
    x = wg_tensor(a, device)
    alias, col, block = x, x[:, 2], x.view(2, 2, 6)[1]
    x += 1.0
    col *= wg_tensor(np.arange(4, dtype=np.float32), device)
    block -= block[0].clone()   # (block[0] itself overlaps block: refused, as in torch)
    expected = a + 1.0
    expected[:, 2] *= np.arange(4)
    expected.reshape(2, 2, 6)[1] -= expected.reshape(2, 2, 6)[1, 0].copy()
    assert x is alias
    assert_close(x, expected)
    assert_close(col, expected[:, 2])


def test_leaf_rules(device):
    w = wg_tensor(randn(3), device, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        w.add_(1)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        w += 1
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        w[1:].mul_(2)
    with wg.no_grad():   # how optimizers and init write parameters
        w.mul_(2)
        w[0] = 7.0
    w.data.add_(1)       # .data: the values without history, so allowed
    assert w.is_leaf and w.requires_grad and w.grad_fn is None and w.tolist()[0] == 8.0


def test_manual_sgd_steps_match_torch(device):
    a, b = randn(5, 3), randn(7, 5)
    results = []
    for L, d in ((torch, "cpu"), (wg, device)):
        w = L.tensor(a, device=d, requires_grad=True)
        x = L.tensor(b, device=d)
        for _ in range(3):
            loss = ((x @ w).tanh() ** 2).sum()
            loss.backward()
            with L.no_grad():
                w -= 0.1 * w.grad
                w.grad.zero_()
        results.append(w.detach().cpu().numpy())
    assert_close(results[1], results[0])


def test_modified_saved_values_raise_at_backward(device):
    """Where a backward needs values an in-place op overwrote, backward raises torch's error; where
    it does not need them, the in-place op is fine."""
    x = wg_tensor(randn(3), device, requires_grad=True)
    w = wg_tensor(randn(3), device, requires_grad=True)
    for make in (lambda: (lambda b: (b.add_(1), b.sum())[1])((x * 1).sigmoid()),     # sigmoid saves its result
                 lambda: (lambda b: (b * 2, b.add_(1))[0].sum())((x * 1).exp()),       # so does exp
                 lambda: (lambda a: (a * w, a.mul_(2))[0].sum())(x * 1)):              # mul saves its inputs
        loss = make()
        with pytest.raises(RuntimeError, match=r"modified by an inplace operation.*is at version 1; "
                                               r"expected version 0 instead"):
            loss.backward()
    b = (x * 1).tanh()
    b.add_(1).mul_(2)
    with pytest.raises(RuntimeError, match="is at version 2; expected version 0"):
        b.sum().backward()
    a = x * 1
    total = (a + w).sum()   # add keeps nothing for its backward
    a.add_(1)
    total.backward()
    assert_close(x.grad, np.ones(3))
    c = (x * 1).exp()
    d = c.clone()
    d.add_(1)   # a clone's storage is its own: exp's saved result stays
    (c * d).sum().backward()


def test_inplace_on_a_non_leaf_takes_over_its_history(device):
    a = randn(3)
    for L, d in ((torch, "cpu"), (wg, device)):
        w = L.tensor(a, device=d, requires_grad=True)
        z = L.zeros(3, device=d)
        z[1] = w[0]                              # a tensor without history gets one
        assert z.requires_grad and not z.is_leaf and z.grad_fn is not None
        h = w * 2
        before = h.grad_fn
        h.mul_(w)
        assert h.grad_fn is not before and h._version == 1
        (z.sum() + h.sum()).backward()
        if L is torch:
            expected = w.grad.numpy()
        else:
            assert_close(w.grad, expected, what="gradient through z[1] = w[0] and h.mul_(w)")


VIEW_WRITES = {
    "x[:, 0] = y": lambda h, y: h.__setitem__((slice(None), 0), y[:4]),
    "x[mask] = 0": lambda h, y: h.__setitem__(h > 0.3, 0.0),
    "masked_fill_": lambda h, y: h.masked_fill_(h < 0, 1.5),
    "view.mul_": lambda h, y: h[1:3].mul_(y),
    "view of view": lambda h, y: h.T[::2][1].add_(y[:4]),
    "twice": lambda h, y: (h[0].copy_(y), h[:, 1:].mul_(h[:, :-1].sum(1, keepdim=True))),
}


@pytest.mark.parametrize("name", list(VIEW_WRITES))
def test_writes_to_views_of_non_leaves_match_torch(name, device):
    """The base's gradient after a write through its view: the view's region from the write, the rest
    from the base's old values (torch's CopySlices), and the view's own history after it."""
    def fn(x, y):
        h = x * 2
        VIEW_WRITES[name](h, y)
        return h
    check_op(fn, randn(4, 5), randn(5), device=device)


def test_views_made_before_a_write_follow_the_new_history(device):
    """A view made before its base was written in place gets its grad_fn anew (a view of the base's
    new history), as in torch: its gradient goes through the write."""
    def fn(x, y):
        h = x * 2
        first, column = h[0], h[:, 1]
        h.mul_(y)
        h[2:, 1] = y[:2]
        return first * column.sum()
    check_op(fn, randn(4, 3), randn(3), device=device)
    z = wg.zeros(3, device=device)
    tail = z[1:]
    w = wg_tensor(randn(1), device, requires_grad=True)
    z[2] = w[0] * 5
    assert tail.grad_fn is not None and tail.requires_grad
    tail.sum().backward()
    assert_close(w.grad, np.array([5.0]))


def test_retain_grad_detach_and_requires_grad_rules(device):
    x = wg_tensor(randn(3), device, requires_grad=True)
    t = torch.tensor(x.tolist(), requires_grad=True)
    for X in (t, x):
        a = X * 2
        a.retain_grad()
        assert a.retains_grad
        (a * a).sum().backward(retain_graph=True)
        (a * a).sum().backward()
        if X is t:
            expected = a.grad.numpy().copy()
        else:
            assert_close(a.grad, expected, what="retained gradient accumulates like a leaf's")
    h = x * 1
    with pytest.raises(RuntimeError, match="only change requires_grad flags of leaf variables"):
        h.requires_grad_(False)
    with pytest.raises(RuntimeError, match="Can't detach views in-place"):
        h[1:].detach_()
    assert h.detach_() is h and h.is_leaf and not h.requires_grad
    with pytest.raises(RuntimeError, match="can't retain_grad on Tensor that has requires_grad=False"):
        h.retain_grad()


def test_data_reads_and_assigns(device):
    p = wg_tensor(randn(2, 3), device, requires_grad=True)
    alias = p.data
    assert not alias.requires_grad and alias.grad_fn is None and alias._storage is p._storage
    replacement = randn(4)
    obj = p
    p.data = wg_tensor(replacement, device)
    assert p is obj and p.shape == (4,) and p.requires_grad and p.is_leaf
    assert_close(p.detach(), replacement)
    (p * 2).sum().backward()
    assert_close(p.grad, np.full(4, 2.0))


def test_dtype_shape_and_overlap_errors(device):
    ints = wg.zeros(3, dtype=wg.int32, device=device)
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Int"):
        ints.add_(1.5)
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type Bool"):
        wg.zeros(3, dtype=wg.bool, device=device).add_(1)
    with pytest.raises(RuntimeError, match=r"output with shape \[3\] doesn't match the broadcast shape \[2, 3\]"):
        wg.zeros(3, device=device).add_(wg.ones(2, 3, device=device))
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        wg.zeros(3, device=device).expand(2, 3).add_(1)
    z = wg.arange(5.0, device=device)
    with pytest.raises(RuntimeError, match="some elements of the input tensor and the written-to tensor"):
        z[1:].add_(z[:-1])
    ints.add_(2).mul_(3)
    ints.copy_(wg_tensor(np.array([1.9, -2.7, 3.5], np.float32), device))   # copy_ converts any dtype
    assert ints.tolist() == [1, -2, 3]
    x = wg_tensor(randn(3, 3), device)
    expected = x.numpy() + x.numpy().T
    x.add_(x.T)   # an operand in the written storage is read as it was
    assert_close(x, expected)


def test_uniform_and_normal_draw_in_place(device):
    x = wg.empty(20000, device=device)
    obj = x
    wg.manual_seed(seed())
    x.uniform_(-2.0, 3.0)
    wg.manual_seed(seed())
    assert_close(x, wg.rand(20000, device=device) * 5.0 - 2.0, atol=1e-5, what="uniform_ is rand's draw")
    values = x.numpy()
    assert x is obj and values.min() >= -2.0 and values.max() < 3.0 and abs(values.mean() - 0.5) < 0.05
    x.normal_(1.5, 0.5)
    values = x.numpy()
    assert abs(values.mean() - 1.5) < 0.02 and abs(values.std() - 0.5) < 0.02, tag(f"{values.mean()}, {values.std()}")
    assert x._version == 2
    generator = wg.Generator().manual_seed(seed())
    x.normal_(generator=generator)
    assert_close(x, wg.randn(20000, device=device, generator=wg.Generator().manual_seed(seed())),
                 what="normal_ draws from the generator given")
    with pytest.raises(RuntimeError, match="expects to return a \\[from, to\\) range"):
        x.uniform_(1.0, 0.0)
    with pytest.raises(RuntimeError, match="normal expects std >= 0.0"):
        x.normal_(0.0, -1.0)
    h = wg_tensor(randn(4), device, requires_grad=True) * 1
    h.uniform_()
    h.sum().backward()   # the drawn values do not depend on the old ones


def test_random_chains_of_inplace_ops(device):
    """Fresh chains of in-place ops on non-leaf tensors and their views, against torch."""
    # (ops that torch saves the result of, such as sigmoid_, raise in torch when a later step modifies it)
    steps = [lambda h, y: h.add_(y), lambda h, y: h.mul_(y.tanh()), lambda h, y: h[0].copy_(y),
             lambda h, y: h.masked_fill_(h > 1, 0.5), lambda h, y: h.sub_(y, alpha=2),
             lambda h, y: h.__setitem__((slice(1, None), 1), y[0]), lambda h, y: h[:, ::2].abs_(),
             lambda h, y: h.clamp_(-1.5, 1.5), lambda h, y: h.T[1].div_(y[:3].abs() + 1)]
    chain = [steps[int(k)] for k in rng().integers(0, len(steps), 5)]

    def fn(x, y):
        h = x * 1.25
        for step in chain:
            step(h, y)
        return h
    check_op(fn, randn(3, 4), randn(4), device=device, fd=False)
