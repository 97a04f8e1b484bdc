"""sort, argsort, topk, msort (the sort kernels: one workgroup per row up to SORT_LOCAL, a global
bitonic network past it) and cumsum (the scan kernels), against torch on both devices."""
import numpy as np
import pytest
import torch

import webgrad as wg
from webgrad.backends.webgpu.kernels.scan import PER_THREAD_SCAN
from webgrad.backends.webgpu.kernels.sort import SORT_LOCAL
from conftest import assert_close, check_op, distinct, integers, randn, rng, tag, wg_tensor

# (shape, dim): short rows, rows past one workgroup's memory (the global network), dims not last
SORT_CASES = [((7,), 0), ((1,), 0), ((3, 5, 9), -1), ((3, 5, 9), 1), ((4, 33), 0), ((2, SORT_LOCAL), 1),
              ((2, SORT_LOCAL + 77), 1), ((3000,), 0), ((5, 2, 6), 0)]


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("shape,dim", SORT_CASES)
def test_sort(shape, dim, descending, device):
    x = distinct(*shape)
    out = check_op(lambda t: t.sort(dim, descending), x, device=device, fd=False)
    check_op(lambda t: wg.sort(t, dim=dim, descending=descending)[0], x, device=device,
             torch_fn=lambda t: torch.sort(t, dim=dim, descending=descending)[0], fd=shape[0] < 10)
    assert out[1].dtype == np.int32


@pytest.mark.parametrize("shape,dim", SORT_CASES)
def test_argsort_is_stable_with_ties(shape, dim, device):
    x = rng().integers(-3, 4, shape).astype(np.float32)   # many ties: their order is the input's
    for descending in (False, True):
        got = wg.argsort(wg.tensor(x, device=device), dim=dim, descending=descending, stable=True)
        expected = torch.argsort(torch.from_numpy(x), dim=dim, descending=descending, stable=True)
        assert got.tolist() == expected.tolist(), tag(f"argsort descending={descending}")


def test_sort_integers_bools_and_extremes(device):
    x = integers(6, 50, low=-1000, high=1000)
    x[0, :3] = [-2**31, 2**31 - 1, 0]
    for descending in (False, True):
        check_op(lambda t: t.sort(dim=-1, descending=descending, stable=True), x, device=device)
        b = rng().random((4, 9)) < 0.5
        got = wg.tensor(b, device=device).sort(stable=True, descending=descending)
        expected = torch.from_numpy(b).sort(stable=True, descending=descending)
        assert got.indices.tolist() == expected.indices.tolist() and got.values.tolist() == expected.values.tolist()


@pytest.mark.parametrize("length", [10, SORT_LOCAL + 5])
def test_nan_sorts_above_everything(length, device):
    x = randn(3, length)
    x[rng().random(x.shape) < 0.2] = np.nan
    x[0, :4] = [np.inf, -np.inf, np.nan, np.inf]
    for descending in (False, True):
        got = wg.tensor(x, device=device).sort(dim=1, descending=descending, stable=True)
        expected = torch.from_numpy(x).sort(dim=1, descending=descending, stable=True)
        assert got.indices.tolist() == expected.indices.tolist(), tag(f"NaN order, descending={descending}")
        assert (np.isnan(got.values.numpy()) == np.isnan(expected.values.numpy())).all()


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("shape,dim,k", [((10,), 0, 3), ((4, 65), 1, 65), ((4, 65), -1, 1), ((6, 5, 4), 0, 2),
                                         ((2, 3000), 1, 50), ((5,), 0, 0)])
def test_topk(shape, dim, k, largest, device):
    x = distinct(*shape)
    check_op(lambda t: t.topk(k, dim, largest), x, device=device, fd=x.size < 100)
    check_op(lambda t: wg.topk(t, k, dim=dim, largest=largest, sorted=True).values, x, device=device,
             torch_fn=lambda t: torch.topk(t, k, dim=dim, largest=largest).values, fd=False)


def test_msort_and_zero_dim(device):
    check_op(lambda t: t.msort(), distinct(7, 3), device=device)
    t = wg.tensor(2.5, device=device)
    values, indices = t.sort()
    assert values.item() == 2.5 and indices.item() == 0 and indices.shape == ()
    assert t.topk(1).values.item() == 2.5 and wg.argsort(t).shape == ()


def test_sort_errors(device):
    t = wg.tensor(randn(3, 4), device=device)
    for call in (lambda m, x: m.topk(x, 5), lambda m, x: m.topk(x, -1), lambda m, x: m.sort(x, 2)):
        with pytest.raises((RuntimeError, IndexError)) as ours:
            call(wg, t)
        with pytest.raises(type(ours.value)):
            call(torch, torch.randn(3, 4))


def test_sort_of_a_view(device):
    base = distinct(6, 8)
    t = wg.tensor(base, device=device)[1::2, ::3].transpose(0, 1)   # strided, offset, transposed
    got = t.sort(0, descending=True)
    expected = torch.from_numpy(base)[1::2, ::3].transpose(0, 1).sort(0, descending=True)
    assert got.indices.tolist() == expected.indices.tolist() and got.values.tolist() == expected.values.tolist()


def test_sort_stays_on_the_device(device):
    """The values' gradient goes back through the gathered indices, on the device."""
    t = wg_tensor(distinct(4, 6), device, requires_grad=True)
    values, indices = t.sort(1)
    (values * wg.arange(6, device=device)).sum().backward()
    assert t.grad.device == device and indices.device == device
    ref = torch.from_numpy(t.detach().numpy()).requires_grad_()
    (ref.sort(1).values * torch.arange(6)).sum().backward()
    assert_close(t.grad, ref.grad)


# ---- cumsum ----
@pytest.mark.parametrize("shape,dim", [((7,), 0), ((PER_THREAD_SCAN + 1,), 0), ((3, 5, 7), 1), ((3, 5, 7), -1),
                                       ((300, 4), 0), ((2, 1000), 1), ((1, 5000), -1), ((4, 1, 3), 1),
                                       ((257, 3), 1)])
def test_cumsum(shape, dim, device):
    check_op(lambda t: t.cumsum(dim), randn(*shape), device=device, fd=np.prod(shape) < 200,
             atol=1e-4 * np.sqrt(shape[dim]))
    check_op(lambda t: wg.cumsum(t, dim=dim), randn(*shape), device=device,
             torch_fn=lambda t: torch.cumsum(t, dim=dim), fd=False, atol=1e-4 * np.sqrt(shape[dim]))


def test_cumsum_dtypes_and_views(device):
    x = integers(5, 40, low=-100, high=100)
    check_op(lambda t: t.cumsum(1), x, device=device, grad=False)
    b = rng().random((3, 70)) < 0.5
    got = wg.tensor(b, device=device).cumsum(1)
    assert got.dtype is wg.int32 and got.tolist() == torch.from_numpy(b).cumsum(1).tolist()
    base = randn(6, 9)
    t = wg.tensor(base, device=device)[::2, 1:].transpose(0, 1)
    assert_close(t.cumsum(1), torch.from_numpy(base)[::2, 1:].transpose(0, 1).cumsum(1))
    assert_close(wg.tensor(x, device=device).cumsum(0, dtype=wg.float32), torch.from_numpy(x).cumsum(0).float())
    assert wg.tensor(3.0, device=device).cumsum(0).item() == 3.0
    with pytest.raises(IndexError):
        wg.tensor(base, device=device).cumsum(2)
