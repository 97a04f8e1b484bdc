"""A cross-entropy's backward of backward()'s implicit 1 runs in its forward's dispatch under wg.jit
(backends/webgpu/fusion_loss.py): the loss and d logits are the unfused replay's and the eager calls'
bit for bit, and torch's, with one dispatch fewer a loss; a backward of another gradient stays apart."""
import numpy as np
import pytest
import torch

import webgrad as wg
from webgrad.nn import functional as F
from conftest import integers, randn, rng, seed, to_numpy
from test_fusion import CALLS, check_fusion


def _problem():
    """(start of the logits' parameter, make_inputs giving offsets and labels, some ignored: -1) of a
    random size the one-workgroup forward takes."""
    rows, classes = int(rng().integers(3, 40)), int(rng().integers(2, 12))
    start = randn(rows, classes)
    calls = [(randn(rows, classes), integers(rows, low=-1, high=classes)) for _ in range(CALLS)]
    return start, lambda call: [wg.tensor(a, device="webgpu") for a in calls[call]]


def _losses(start, reductions, upstream):
    """make_fn: a loss per reduction of the parameter plus the offsets, each backward on its own (by
    backward()'s implicit 1, or an upstream gradient given); the losses and the parameter's gradient,
    which is the sum of each loss's d logits."""
    def make_fn():
        logits = wg.tensor(start, device="webgpu", requires_grad=True)

        def fn(x, y):
            logits.grad = None
            losses = [F.cross_entropy(logits + x, y, ignore_index=-1, reduction=r) for r in reductions]
            for loss in losses:
                loss.backward() if upstream is None else loss.backward(wg.tensor(upstream, device="webgpu"))
            return (*losses, logits.grad)
        return fn
    return make_fn


def _torch_losses(start, x, y, reductions, upstream):
    logits = torch.tensor(start, requires_grad=True)
    losses = [torch.nn.functional.cross_entropy(logits + torch.from_numpy(x), torch.from_numpy(y).long(),
                                                ignore_index=-1, reduction=r) for r in reductions]
    for loss in losses:
        loss.backward() if upstream is None else loss.backward(torch.tensor(upstream))
    return [loss.detach().numpy() for loss in losses] + [logits.grad.numpy()]


@pytest.mark.parametrize("reductions,upstream,saved", [
    (("mean",), None, 1),
    (("sum",), None, 1),
    (("mean", "sum"), None, 2),   # two forwards before their backwards: each folds into its own
    (("mean",), 2.5, 0),          # an upstream gradient given: the backward's own kernel reads it
])
def test_cross_entropys_backward_folds_into_its_forward(reductions, upstream, saved):
    start, make = _problem()
    fused = check_fusion(_losses(start, reductions, upstream), make, saved=saved)
    x, y = (to_numpy(t) for t in make(CALLS - 1))
    for k, (ours, reference) in enumerate(zip(fused[-1], _torch_losses(start, x, y, reductions, upstream))):
        np.testing.assert_allclose(ours, reference, rtol=1e-5, atol=1e-6, err_msg=f"output {k} (seed {seed()})")


def test_a_label_out_of_range_is_reported_from_the_folded_kernel():
    start, make = _problem()
    step = wg.jit(_losses(start, ("mean",), None)())
    for call in range(CALLS):
        step(*make(call))
    x, y = make(0)
    y[0] = start.shape[1]
    with pytest.raises(IndexError, match="out of bounds"):
        step(x, y)[0].item()
