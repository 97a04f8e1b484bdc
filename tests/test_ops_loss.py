"""softmax, log_softmax, cross_entropy and mse_loss (webgrad.ops.loss, re-exported by nn.functional)."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import webgrad as wg
from conftest import assert_close, check_op, dispatched_kernels, integers, randn, rng, tag, to_numpy, wg_tensor
from webgrad.ops import loss as L


def _np_log_softmax(x, dim):
    x = x.astype(np.float64)
    shifted = x - x.max(axis=dim, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=dim, keepdims=True))


@pytest.mark.parametrize("shape,dim", [((4, 10), -1), ((4, 10), 0), ((3, 5, 7), 1), ((1000,), 0), ((257, 3), -1),
                                       ((2, 1, 4), 1), ((), 0)])
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax(op, shape, dim, device):
    np_fn = ((lambda a: np.exp(_np_log_softmax(a, dim))) if op == "softmax" else
             (lambda a: _np_log_softmax(a, dim)))
    check_op(lambda t: getattr(t, op)(dim), 3 * randn(*shape), device=device,
             torch_fn=lambda t: getattr(t, op)(dim), np_fn=np_fn if shape else None)
    check_op(lambda t: getattr(wg, op)(t, dim), randn(*shape), device=device,
             torch_fn=lambda t: getattr(torch, op)(t, dim), fd=False)
    check_op(lambda t: getattr(L, op)(t, dim), randn(*shape), device=device,
             torch_fn=lambda t: getattr(F, op)(t, dim), fd=False)


def test_softmax_of_views(device):
    check_op(lambda t: t.T.softmax(1), randn(6, 5), device=device)
    check_op(lambda t: t[:, ::2].log_softmax(0), randn(4, 9), device=device)


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_is_stable_with_large_logits(op, device):
    x = np.array([[1000.0, 0.0, -1000.0], [1000.0, 1000.0, 999.0], [-1000.0, -1000.0, -1001.0],
                  [88.0, 89.0, 90.0]], np.float32)
    out = check_op(lambda t: getattr(t, op)(1), x, device=device, fd=False)[0]
    t = wg_tensor(x, device, requires_grad=True)
    getattr(t, op)(1)[:, 0].sum().backward()
    assert np.all(np.isfinite(out)) and np.all(np.isfinite(to_numpy(t.grad))), tag(f"{op}: inf/NaN at large logits")
    if op == "softmax":
        assert_close(out.sum(1), np.ones(4), atol=1e-6, what="softmax rows sum to 1")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("n,c", [(8, 5), (1, 3), (257, 10), (3, 1)])
def test_cross_entropy_class_indices(n, c, reduction, device):
    logits, labels = 2 * randn(n, c), integers(n, low=0, high=c)
    check_op(lambda x, y: L.cross_entropy(x, y, reduction=reduction), logits, labels, device=device,
             torch_fn=lambda x, y: F.cross_entropy(x, y, reduction=reduction))


def test_cross_entropy_unbatched_and_smoothing(device):
    check_op(lambda x, y: L.cross_entropy(x, y), randn(7), np.array(3, np.int32), device=device,
             torch_fn=lambda x, y: F.cross_entropy(x, y))
    for reduction in ("mean", "sum", "none"):
        check_op(lambda x, y: L.cross_entropy(x, y, reduction=reduction, label_smoothing=0.1), randn(6, 4),
                 integers(6, low=0, high=4), device=device,
                 torch_fn=lambda x, y: F.cross_entropy(x, y, reduction=reduction, label_smoothing=0.1))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_probability_targets(reduction, device):
    logits = 2 * randn(9, 6)
    probs = np.exp(_np_log_softmax(randn(9, 6), 1)).astype(np.float32)
    check_op(lambda x, p: L.cross_entropy(x, p, reduction=reduction), logits, probs, device=device,
             torch_fn=lambda x, p: F.cross_entropy(x, p, reduction=reduction))
    check_op(lambda x, p: L.cross_entropy(x, p, reduction=reduction, label_smoothing=0.2), logits, probs,
             device=device, torch_fn=lambda x, p: F.cross_entropy(x, p, reduction=reduction, label_smoothing=0.2))


def test_cross_entropy_of_wide_rows_and_transposed_logits(device):
    # more classes than the fused kernel's 64 threads per row, and logits read through strides
    logits, labels = 3 * randn(1000, 6), integers(6, low=0, high=1000)
    check_op(lambda x, y: L.cross_entropy(x.T, y), logits, labels, device=device, fd=False,
             torch_fn=lambda x, y: F.cross_entropy(x.T, y))


def test_cross_entropy_label_out_of_range_on_cpu():
    with pytest.raises(IndexError, match="out of bounds"):
        L.cross_entropy(wg.tensor(randn(3, 4)), wg.tensor([0, 4, 1]))


def test_cross_entropy_large_logits_finite(device):
    logits = np.array([[1000.0, -1000.0, 0.0], [-500.0, 500.0, 499.0]], np.float32)
    labels = np.array([1, 2], np.int32)
    check_op(lambda x, y: L.cross_entropy(x, y), logits, labels, device=device, fd=False,
             torch_fn=lambda x, y: F.cross_entropy(x, y))


@pytest.mark.parametrize("n,c,spread", [(128, 10, 2), (1, 3, 2), (2500, 10, 2), (5000, 10, 2), (300, 300, 2),
                                         (7, 5, 1e4)])
def test_cross_entropy_backward_from_the_loss(n, c, spread, device):
    """loss.backward() with no gradient, which the fused loss takes as its implicit 1, against torch
    in float64. On webgpu 2500 x 10 is reduced in the loss's dispatch (10 rows a thread); 5000 x 10
    and 300 x 300 have too many logits a thread for that (CROSS_ENTROPY_SUM_SPAN) and take a reduce."""
    logits, labels = spread * randn(n, c), integers(n, low=0, high=c)
    for reduction in ["mean", "sum"] + ["none"] * (n == 1):   # a (1,) loss may take the implicit 1 too
        x = wg_tensor(logits, device, requires_grad=True)
        loss = L.cross_entropy(x, wg.tensor(labels, device=device), reduction=reduction)
        loss.backward()
        t = torch.tensor(logits, dtype=torch.float64, requires_grad=True)
        expected = F.cross_entropy(t, torch.from_numpy(labels).long(), reduction=reduction)
        expected.backward()
        assert_close(loss, expected.detach(), what=f"{reduction} of {n} x {c}")
        assert_close(x.grad, t.grad, what=f"gradient of the {reduction} of {n} x {c}")


def _labels(n, c, ignore_index, ignored):
    """n labels in [0, c), with ignore_index at no row ('none'), at some but not all ('some', at
    least one of each; n >= 2) or at every row ('all')."""
    labels = integers(n, low=0, high=c)
    if 0 <= ignore_index < c:   # a class: drawn only where ignored
        labels[labels == ignore_index] = (ignore_index + 1) % c
    if ignored == "some":
        labels[rng().random(n) < 0.3] = ignore_index
        labels[:2] = [ignore_index, (ignore_index + 1) % c if 0 <= ignore_index < c else 0]
    elif ignored == "all":
        labels[:] = ignore_index
    return labels


@pytest.mark.parametrize("ignore_index", [None, -100, -1])
def test_cross_entropy_of_a_batch_is_one_dispatch_each_way(ignore_index, monkeypatch):
    """A training step's loss on webgpu: the mean (or sum) is taken in the loss's kernel, and
    loss.backward() is the backward kernel alone (no seed of ones, no division by N). Rows labelled
    ignore_index (torch's default -100, or another) are counted out in the same two kernels."""
    kernels = dispatched_kernels(monkeypatch)
    options = {} if ignore_index is None else {"ignore_index": ignore_index}
    for reduction in ("mean", "sum"):
        x = wg.tensor(randn(128, 10), device="webgpu", requires_grad=True)
        labels = _labels(128, 10, -100, "none") if ignore_index is None else _labels(128, 10, ignore_index, "some")
        y = wg.tensor(labels, device="webgpu")
        kernels.clear()
        loss = L.cross_entropy(x, y, reduction=reduction, **options)
        assert len(kernels) == 1, tag(f"{reduction}: forward took {len(kernels)} dispatches")
        loss.backward()
        assert len(kernels) == 2, tag(f"{reduction}: backward took {len(kernels) - 1} dispatches")
        theirs = torch.tensor(x.detach().numpy(), requires_grad=True)
        F.cross_entropy(theirs, torch.from_numpy(labels).long(), reduction=reduction, **options).backward()
        assert_close(x.grad, theirs.grad, what=f"gradient of the {reduction}")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("ignored", ["none", "some", "all"])
@pytest.mark.parametrize("ignore_index", [-100, -1, 2])
@pytest.mark.parametrize("n,c", [(9, 5), (5000, 10), (300, 300)])
def test_cross_entropy_ignore_index(n, c, ignore_index, ignored, reduction, device):
    """Rows labelled ignore_index add no loss and no gradient, and the mean divides by the rows
    counted (every row ignored: NaN and a zero gradient, as torch); the fused kernel's one node. On
    webgpu 9 x 5 is reduced in the loss's dispatch, 5000 x 10 and 300 x 300 after it (a reduce of
    the losses and the rows counted, then the division)."""
    logits, labels = 2 * randn(n, c), _labels(n, c, ignore_index, ignored)
    loss = L.cross_entropy(wg_tensor(logits, device, requires_grad=True), wg.tensor(labels, device=device),
                           ignore_index=ignore_index, reduction=reduction)
    assert type(loss.grad_fn).__name__ == "_CrossEntropy", tag(type(loss.grad_fn).__name__)
    check_op(lambda x, y: L.cross_entropy(x, y, ignore_index=ignore_index, reduction=reduction), logits, labels,
             device=device, fd=n < 100 and not (ignored == "all" and reduction == "mean"),   # (NaN: no differences)
             torch_fn=lambda x, y: F.cross_entropy(x, y, ignore_index=ignore_index, reduction=reduction))


@pytest.mark.parametrize("n,c", [(128, 10), (5000, 10), (300, 300)])
@pytest.mark.parametrize("ignore_index", [-100, -1])
def test_cross_entropy_ignore_index_backward_from_the_loss(n, c, ignore_index, device):
    """loss.backward() with no gradient (the fused loss's implicit 1): the mean's 1 / count, counted
    on the device, reaches the backward kernel, against torch in float64."""
    for ignored in ("some", "all"):
        labels = _labels(n, c, ignore_index, ignored)
        logits = 2 * randn(n, c)
        for reduction in ("mean", "sum"):
            x = wg_tensor(logits, device, requires_grad=True)
            loss = L.cross_entropy(x, wg.tensor(labels, device=device), ignore_index=ignore_index,
                                   reduction=reduction)
            loss.backward()
            t = torch.tensor(logits, dtype=torch.float64, requires_grad=True)
            expected = F.cross_entropy(t, torch.from_numpy(labels).long(), ignore_index=ignore_index,
                                       reduction=reduction)
            expected.backward()
            what = f"{reduction} of {n} x {c}, {ignored} ignored"
            assert_close(loss, expected.detach(), what=what)
            assert_close(x.grad, t.grad, what=f"gradient of the {what}")


def test_cross_entropy_ignore_index_under_jit_replay(device):
    """Replayed training steps count each batch's ignored rows anew (the mean's count is the
    device's, not the recording's): losses and weights against torch's, step after step, a batch
    with every row ignored among them (NaN loss, no update)."""
    rows, features, classes = int(rng().integers(4, 40)), int(rng().integers(2, 9)), int(rng().integers(3, 7))
    model = wg.nn.Linear(features, classes, device=device)
    theirs = torch.nn.Linear(features, classes)
    with torch.no_grad():
        theirs.weight.copy_(torch.from_numpy(to_numpy(model.weight)))
        theirs.bias.copy_(torch.from_numpy(to_numpy(model.bias)))
    opt, their_opt = wg.optim.SGD(model.parameters(), lr=0.5), torch.optim.SGD(theirs.parameters(), lr=0.5)

    @wg.jit
    def step(x, y):
        loss = L.cross_entropy(model(x), y, ignore_index=-1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    for ignored in ("none", "some", "some", "all", "some"):   # eager, recorded, then replayed
        x, labels = randn(rows, features), _labels(rows, classes, -1, ignored)
        loss = step(wg.tensor(x, device=device), wg.tensor(labels, device=device))
        their_loss = F.cross_entropy(theirs(torch.from_numpy(x)), torch.from_numpy(labels).long(), ignore_index=-1)
        their_opt.zero_grad()
        their_loss.backward()
        their_opt.step()
        assert_close(loss, their_loss.detach(), what=f"loss, {ignored} ignored")
        assert_close(model.weight, theirs.weight.detach(), what=f"weight after a step with {ignored} ignored")
    if device == "webgpu":
        assert len(step._programs) == 1, tag("one recording, replayed")


def test_gpt_loss_is_the_fused_cross_entropy(device):
    """nanoGPT's loss ignores targets of -1: the fused kernel's one node still."""
    config = wg.nn.GPTConfig(block_size=8, vocab_size=11, n_layer=1, n_head=1, n_embd=8)
    targets = integers(2, 8, low=0, high=11)
    targets[0, 0] = -1
    _, loss = wg.nn.GPT(config, device=device)(wg.tensor(integers(2, 8, low=0, high=11), device=device),
                                               wg.tensor(targets, device=device))
    assert type(loss.grad_fn).__name__ == "_CrossEntropy", tag(type(loss.grad_fn).__name__)


def test_cross_entropy_errors(device):
    x = wg_tensor(randn(4, 3), device)
    with pytest.raises(ValueError):
        L.cross_entropy(x, wg.tensor([0, 1, 2], device=device))                # wrong batch size
    with pytest.raises(ValueError):
        L.cross_entropy(x, wg.tensor([0, 1, 2, 0], device=device), reduction="avg")
    with pytest.raises(RuntimeError):
        L.cross_entropy(x, wg_tensor(randn(4, 2), device))                     # probabilities of wrong shape
    with pytest.raises(RuntimeError, match=r"target size \[2, 4\]"):   # (N, C, d) needs (N, d) targets, as torch says
        L.cross_entropy(wg_tensor(randn(2, 3, 4), device), wg.tensor([0, 1], device=device))
    with pytest.raises(TypeError):
        L.cross_entropy(x, [0, 1, 2, 0])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("shape", [(257,), (3, 5, 7), (1, 1), ()])
def test_mse_loss(shape, reduction, device):
    check_op(lambda a, b: L.mse_loss(a, b, reduction=reduction), randn(*shape), randn(*shape), device=device,
             torch_fn=lambda a, b: F.mse_loss(a, b, reduction=reduction),
             np_fn=lambda a, b: {"mean": np.mean, "sum": np.sum, "none": lambda v: v}[reduction]((a - b) ** 2))


def test_mse_loss_errors(device):
    with pytest.raises(RuntimeError):
        L.mse_loss(wg_tensor(randn(3), device), wg_tensor(randn(4), device))
    with pytest.raises(ValueError):
        L.mse_loss(wg_tensor(randn(3), device), wg_tensor(randn(3), device), reduction="max")


def test_softmax_rejects_integers(device):
    with pytest.raises(RuntimeError):
        wg.tensor([1, 2, 3], device=device).softmax(0)
    with pytest.raises(IndexError):
        wg_tensor(randn(2, 3), device).log_softmax(2)


def test_mlp_step_gradients_match_torch(device):
    """A whole MLP step (matmul, bias broadcast, gelu, log_softmax, cross entropy) against torch."""
    n, d, h, c = 13, 7, 17, 4
    x, labels = randn(n, d), integers(n, low=0, high=c)
    w1, b1, w2, b2 = randn(d, h) * 0.4, randn(h) * 0.1, randn(h, c) * 0.4, randn(c) * 0.1
    check_op(lambda x, y, w1, b1, w2, b2: L.cross_entropy(wg.gelu(x @ w1 + b1) @ w2 + b2, y),
             x, labels, w1, b1, w2, b2, device=device, grad=(2, 3, 4, 5),
             torch_fn=lambda x, y, w1, b1, w2, b2: F.cross_entropy(F.gelu(x @ w1 + b1) @ w2 + b2, y))
    assert rng() is not None
