"""nn.functional's losses with PyTorch's options (weight, ignore_index, label_smoothing, (N, C, d1, ...)
inputs, pos_weight, beta/delta, batchmean, log_target, legacy size_average/reduce), every reduction,
forward and backward against torch and finite differences on both devices."""
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import webgrad as wg
import webgrad.nn.functional as F
from conftest import check_op, integers, positive, randn, rng, tag, uniform, wg_tensor

REDUCTIONS = ["mean", "sum", "none"]


def _labels(shape, classes, ignore=None):
    labels = integers(*shape, low=0, high=classes)
    if ignore is not None and labels.size > 1:   # some ignored
        labels[rng().random(shape) < 0.3] = ignore
        labels.reshape(-1)[1] = ignore
    labels.reshape(-1)[0] = 0   # at least one counted (test_every_target_ignored has none)
    return labels


def both(name, **kw):
    """webgrad's F.<name> and torch's, with the same keyword arguments."""
    return ((lambda *ts, **more: getattr(F, name)(*ts, **kw, **more)),
            (lambda *ts, **more: getattr(TF, name)(*ts, **kw, **more)))


# ---- cross_entropy and nll_loss ----
CLASS_OPTIONS = {
    "plain": {},
    "weight": {"weight": True},
    "ignore_index": {"ignore_index": 2},
    "default_ignore": {"ignore_index": -100},
    "weight_ignore": {"weight": True, "ignore_index": -1},
    "smoothing": {"label_smoothing": 0.2},
    "all": {"weight": True, "ignore_index": 1, "label_smoothing": 0.1},
}


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("options", list(CLASS_OPTIONS))
@pytest.mark.parametrize("shape", [(6, 5), (3, 4, 2, 3), (5,)])
@pytest.mark.parametrize("name", ["cross_entropy", "nll_loss"])
def test_class_losses(name, shape, options, reduction, device):
    kw = dict(CLASS_OPTIONS[options])
    if name == "nll_loss" and "label_smoothing" in kw:
        return
    classes = shape[1] if len(shape) > 1 else shape[0]
    target_shape = shape[:1] + shape[2:] if len(shape) > 1 else ()
    labels = _labels(target_shape, classes, kw.get("ignore_index"))
    inputs = [randn(*shape) * 2, labels]
    if kw.pop("weight", False):
        inputs.append(positive(classes))
    fn, torch_fn = both(name, reduction=reduction, **kw)
    if name == "nll_loss":   # of log-probabilities
        fn, torch_fn = ((lambda f, s: lambda x, *r: f(s(x, min(x.ndim - 1, 1)), *r))(g, s)
                        for g, s in ((fn, wg.log_softmax), (torch_fn, torch.log_softmax)))
    check_op(lambda x, y, *w: fn(x, y, *w), *inputs, device=device, torch_fn=lambda x, y, *w: torch_fn(x, y, *w),
             grad=(0,))   # (torch's class losses are not differentiable in weight)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("options", [{}, {"weight": True}, {"label_smoothing": 0.3}, {"weight": True,
                                                                                      "label_smoothing": 0.1}])
@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 5), (6,)])
def test_cross_entropy_probability_targets(shape, options, reduction, device):
    kw = dict(options)
    classes = shape[1] if len(shape) > 1 else shape[0]
    probs = np.asarray(torch.softmax(torch.from_numpy(randn(*shape)), min(len(shape) - 1, 1)))
    inputs = [randn(*shape), probs] + ([positive(classes)] if kw.pop("weight", False) else [])
    fn, torch_fn = both("cross_entropy", reduction=reduction, **kw)
    check_op(fn, *inputs, device=device, torch_fn=torch_fn, grad=(0, 1))


@pytest.mark.parametrize("name", ["cross_entropy", "nll_loss"])
def test_every_target_ignored(name, device):
    """The mean of no targets is NaN, as in torch, and the gradient zeros."""
    x = wg_tensor(randn(3, 4), device, requires_grad=True)
    loss = getattr(F, name)(x, wg.tensor([2, 2, 2], device=device), ignore_index=2)
    loss.backward()
    ref = torch.from_numpy(x.detach().numpy()).requires_grad_()
    getattr(TF, name)(ref, torch.tensor([2, 2, 2]), ignore_index=2).backward()
    assert np.isnan(loss.item()) and np.isnan(getattr(TF, name)(ref, torch.tensor([2, 2, 2]), ignore_index=2).item())
    assert (x.grad.numpy() == 0).all() and (ref.grad.numpy() == 0).all()


def test_class_index_cross_entropy_stays_fused(device):
    """No weight or smoothing: the fused kernel's one node, ignore_index given or not, labelled or not."""
    for options in ({}, {"ignore_index": -100}, {"ignore_index": -1}, {"ignore_index": 3}):
        labels = _labels((8,), 5, options.get("ignore_index", -100))
        loss = F.cross_entropy(wg_tensor(randn(8, 5), device, requires_grad=True), wg.tensor(labels, device=device),
                               **options)
        assert type(loss.grad_fn).__name__ == "_CrossEntropy", tag(f"{options}: {type(loss.grad_fn).__name__}")
        check_op(lambda a, y: F.cross_entropy(a, y, **options), randn(8, 5), labels, device=device,
                 torch_fn=lambda a, y: TF.cross_entropy(a, y, **options))


def test_legacy_reduction_flags(device):
    x, y = randn(5, 4), _labels((5,), 4)
    for size_average, reduce in ((False, None), (None, False), (True, True), (False, True)):
        kw = {"size_average": size_average, "reduce": reduce}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for name, inputs in (("cross_entropy", (x, y)), ("mse_loss", (x, randn(5, 4))),
                                 ("l1_loss", (x, randn(5, 4))), ("kl_div", (x, positive(5, 4)))):
                fn, torch_fn = both(name, **kw)
                check_op(fn, *inputs, device=device, torch_fn=torch_fn, fd=False)


def test_class_loss_errors(device):
    x = wg_tensor(randn(4, 3), device)
    y = wg.tensor([0, 1, 2, 0], device=device)
    cases = [
        (lambda m, a, b: m.cross_entropy(a, b[:3]), ValueError),                         # batch sizes differ
        (lambda m, a, b: m.cross_entropy(a.reshape(2, 3, 2), b.reshape(2, 2)[:, :1]), RuntimeError),
        (lambda m, a, b: m.cross_entropy(a, b, weight=a[0, :2].abs()), RuntimeError),   # a weight per class
        (lambda m, a, b: m.nll_loss(a, b, reduction="avg"), ValueError),
        (lambda m, a, b: m.cross_entropy(a, b, label_smoothing=1.5), RuntimeError),
        (lambda m, a, b: m.cross_entropy(a, a[:, :2]), RuntimeError),                   # probabilities' shape
    ]
    for call, error in cases:
        with pytest.raises(error):
            call(F, x, y)
        with pytest.raises(error):
            call(TF, torch.randn(4, 3), torch.tensor([0, 1, 2, 0]))
    # a class out of range (on webgpu found by the kernels, raised at the next read)
    with pytest.raises(IndexError):
        F.nll_loss(x, wg.tensor([0, 1, 5, 0], device=device)).item()
    with pytest.raises(IndexError):
        F.cross_entropy(x, wg.tensor([0, 1, 5, 0], device=device), weight=wg.ones(3, device=device)).item()


# ---- elementwise losses ----
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name,kw", [("mse_loss", {}), ("l1_loss", {}), ("smooth_l1_loss", {}),
                                     ("smooth_l1_loss", {"beta": 0.5}), ("smooth_l1_loss", {"beta": 0.0}),
                                     ("huber_loss", {}), ("huber_loss", {"delta": 0.3}),
                                     ("huber_loss", {"delta": 2.0})])
@pytest.mark.parametrize("shape", [(257,), (3, 5, 7), ()])
def test_regression_losses(name, kw, shape, reduction, device):
    a, b = randn(*shape), randn(*shape)
    diff = np.abs(a - b)
    kink = kw.get("beta", kw.get("delta", 1.0))
    a = np.where(np.abs(diff - kink) < 1e-2, a + 0.05, a).astype(np.float32)   # no kink inside a difference step
    a = np.where(diff < 1e-3, a + 0.01, a).astype(np.float32)
    fn, torch_fn = both(name, reduction=reduction, **kw)
    check_op(fn, a, b, device=device, torch_fn=torch_fn)


@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "huber_loss"])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_weighted_regression_losses(name, reduction, device):
    a, b, w = randn(4, 5), randn(4, 5), positive(4, 5)
    fn, torch_fn = both(name, reduction=reduction)
    check_op(lambda x, y, v: fn(x, y, weight=v), a, b, w, device=device,
             torch_fn=lambda x, y, v: torch_fn(x, y, weight=v))
    with pytest.raises(ValueError):   # a weight per element, as in torch
        fn(wg_tensor(a, device), wg_tensor(b, device), weight=wg_tensor(w[0], device))


def test_broadcast_target_warns_like_torch(device):
    a, b = wg_tensor(randn(3), device), wg_tensor(randn(2, 3), device)
    for name in ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"):
        with pytest.warns(UserWarning, match="target size"):
            got = getattr(F, name)(a, b)
        with pytest.warns(UserWarning):
            expected = getattr(TF, name)(torch.from_numpy(a.numpy()), torch.from_numpy(b.numpy()))
        assert abs(got.item() - expected.item()) < 1e-5, tag(name)
        with pytest.raises(RuntimeError):
            getattr(F, name)(a, wg_tensor(randn(2), device))
    with pytest.raises(RuntimeError):
        F.smooth_l1_loss(a, a, beta=-1.0)
    with pytest.raises(RuntimeError):
        F.huber_loss(a, a, delta=0.0)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_binary_cross_entropy(weighted, reduction, device):
    x, t = uniform(3, 6, low=0.02, high=0.98), uniform(3, 6, low=0.0, high=1.0)
    inputs = [x, t] + ([positive(6)] if weighted else [])
    fn, torch_fn = both("binary_cross_entropy", reduction=reduction)
    check_op(lambda a, b, *w: fn(a, b, *w), *inputs, device=device, torch_fn=lambda a, b, *w: torch_fn(a, b, *w),
             grad=(0, 1))
    edges = wg.tensor([0.0, 1.0, 0.5], device=device)   # log clamped at -100, as in torch
    got = F.binary_cross_entropy(edges, wg.tensor([1.0, 0.0, 1.0], device=device), reduction="none")
    assert np.allclose(got.numpy(), [100.0, 100.0, np.log(2)])
    with pytest.raises(ValueError):
        F.binary_cross_entropy(edges, edges.reshape(3, 1))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("options", ["plain", "pos_weight", "weight", "both"])
def test_binary_cross_entropy_with_logits(options, reduction, device):
    x, t = randn(4, 5) * 5, (rng().random((4, 5)) < 0.5).astype(np.float32)
    x[0, :2] = [80.0, -80.0]   # exp would overflow in the naive form
    kw_names = {"plain": [], "pos_weight": ["pos_weight"], "weight": ["weight"], "both": ["weight", "pos_weight"]}
    names = kw_names[options]
    extra = [positive(5) for _ in names]
    fn, torch_fn = both("binary_cross_entropy_with_logits", reduction=reduction)
    check_op(lambda a, b, *e: fn(a, b, **dict(zip(names, e))), x, t, *extra, device=device,
             torch_fn=lambda a, b, *e: torch_fn(a, b, **dict(zip(names, e))), grad=(0, 1))
    with pytest.raises(ValueError):
        F.binary_cross_entropy_with_logits(wg_tensor(x, device), wg_tensor(t[:2], device))


@pytest.mark.parametrize("reduction", ["batchmean", "sum", "none", "mean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(log_target, reduction, device):
    x = np.asarray(torch.log_softmax(torch.from_numpy(randn(4, 6)), 1))
    t = np.asarray(torch.softmax(torch.from_numpy(randn(4, 6)), 1))
    t[0, :2] = 0.0   # 0 log 0 is 0
    if log_target:
        t = np.log(t + 1e-3).astype(np.float32)
    fn, torch_fn = both("kl_div", reduction=reduction, log_target=log_target)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_op(fn, x, t, device=device, torch_fn=torch_fn, grad=(0,))
    assert any("batchmean" in str(w.message) for w in caught) == (reduction == "mean"), tag("mean's warning")
    with pytest.raises(ValueError):
        F.kl_div(wg_tensor(x, device), wg_tensor(t, device), reduction="avg")
