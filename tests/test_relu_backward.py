"""relu's gradient is torch's threshold_backward (ops/elementwise.py): 0 where relu's result is <= 0, else
the incoming gradient (a NaN passes it on), at NaN, signed zeros and infinities, eagerly and in place;
masked by the result, not the input, so that under wg.jit a product's store keeps the ReLU alone."""
import numpy as np
import pytest
import torch

import webgrad as wg
from webgrad.nn import functional as F
from webgrad.ops.elementwise import RELU, RELU_BACKWARD, _map
from conftest import randn, seed, to_numpy
from test_fusion import CALLS, _inputs, _jitted_runs, check_fusion

SPECIAL = np.array([np.nan, -np.nan, -0.0, 0.0, np.inf, -np.inf, 3e-38, -3e-38], np.float32)


def _relu(x, in_place):
    return (x * 1.0).relu_() if in_place else x.relu()


@pytest.mark.parametrize("in_place", [False, True])
def test_relus_gradient_is_torchs_at_special_values(device, in_place):
    x = np.concatenate([SPECIAL, randn(16)])
    g = randn(len(x))
    ours = wg.tensor(x, device=device, requires_grad=True)
    _relu(ours, in_place).backward(wg.tensor(g, device=device))
    reference = torch.tensor(x, requires_grad=True)
    _relu(reference, in_place).backward(torch.tensor(g))
    np.testing.assert_array_equal(to_numpy(ours.grad), reference.grad.numpy(), err_msg=f"seed {seed()}")


def test_relu_keeps_its_result_not_its_input(device):
    """As torch's: writing relu's input in place after it leaves its gradient as it was; writing its
    result, which the gradient reads, is refused at backward."""
    x, g = randn(12), randn(12)
    results = []
    for make in (lambda a: wg.tensor(a, device=device), torch.tensor):
        w = make(x).requires_grad_()
        before = w * 1.0
        y = before.relu()
        before.add_(5.0)
        y.backward(make(g))
        results.append(to_numpy(w.grad))
        y = (w * 1.0).relu()
        y.mul_(2.0)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.backward(make(g))
    np.testing.assert_array_equal(results[0], results[1], err_msg=f"seed {seed()}")


def _linear_relu_step():
    """make_fn: the gradients of a Linear's weight and bias through ReLU and a second Linear (which reads
    the ReLU from memory, as a pool or a product does in a network)."""
    start = randn(6, 5), randn(6), randn(3, 6)

    def make_fn():
        weight, bias, second = (wg.tensor(a, device="webgpu", requires_grad=True) for a in start)

        def fn(x, g):
            weight.grad = bias.grad = second.grad = None
            (F.linear(F.linear(x, weight, bias).relu(), second) * g).sum().backward()
            return weight.grad, bias.grad
        return fn
    return make_fn, start


def test_a_products_store_keeps_the_relu_alone(monkeypatch):
    make_fn, (w, b, v) = _linear_relu_step()
    make = _inputs((8, 5), (8, 3))
    # the ReLU into the first product's store, * g into the second's, relu's gradient into the store of
    # the product that makes its incoming gradient
    fused = check_fusion(make_fn, make, saved=3)
    kept = _jitted_runs(make_fn(), make, True)[2]
    monkeypatch.setattr(RELU, "grads", (lambda g, a, o: _map(RELU_BACKWARD, g, a),))   # masking by the input
    assert _jitted_runs(make_fn(), make, True)[2] == kept + 1   # which the product then stores too
    x, g = (torch.from_numpy(to_numpy(t)) for t in make(CALLS - 1))
    reference = [torch.tensor(a, requires_grad=True) for a in (w, b, v)]
    first = torch.nn.functional.linear(x, *reference[:2]).relu()
    (torch.nn.functional.linear(first, reference[2]) * g).sum().backward()
    for ours, expected in zip(fused[-1], reference):
        np.testing.assert_allclose(ours, expected.grad.numpy(), rtol=1e-5, atol=1e-5, err_msg=f"seed {seed()}")
