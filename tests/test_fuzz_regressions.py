"""Bugs the property-based tests (tests/test_fuzz*.py) found, kept as fixed cases."""

import numpy as np
import pytest
import torch

import webgrad as wg
from conftest import check_op, seed
from fuzzing import assert_matches, on


# ---- regressions the fuzzer found, as fixed cases ----
def test_list_index_empty_and_out_of_range(device):
    """x[[]] selects nothing (it was read as a float index); a list position past the end is an
    IndexError on webgpu too (its gather kernel once silently read 0)."""
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    assert_matches(on(device, x)[[]], x[[]].astype(np.float64), 0, what="x[[]]")
    for bad in ([3], [0, -4], [[1], [5]]):
        with pytest.raises(IndexError, match="out of bounds"):
            on(device, x)[bad]
        with pytest.raises(IndexError):
            torch.tensor(x)[torch.tensor(bad)]


@pytest.mark.parametrize("log", [False, True])
def test_softmax_of_empty_and_0d(log, device):
    """Softmax over an empty dim is empty (amax of nothing used to raise); a 0-d softmax is 1."""
    for shape, dim in (((3, 0), 1), ((0, 4), 0), ((0, 4), 1), ((), 0)):
        x = np.random.default_rng(seed()).standard_normal(shape).astype(np.float32) * 100
        got = on(device, x).log_softmax(dim) if log else on(device, x).softmax(dim)
        expected = (torch.log_softmax if log else torch.softmax)(torch.tensor(x, dtype=torch.float64), dim)
        assert_matches(got, expected.numpy(), 1e-6, what=f"softmax{shape} dim {dim}")


def test_tanh_and_log_keep_relative_precision_near_zero(device):
    """WGSL's builtins gave tanh(1e-30) = 3e-8 and log(0.992) 3e-6 off on lavapipe (the spec allows
    absolute errors there): both keep a few ulp of their result everywhere."""
    x = np.float32([1e-30, 1e-8, 2.2e-3, 0.3, 0.62, 0.63, 0.7, 5, 9, 20, 1e30])
    x = np.concatenate([x, -x])
    assert_matches(on(device, x).tanh(), np.tanh(x.astype(np.float64)), 3e-7, what="tanh")
    x = np.float32([0.5, 0.69, 0.71, 0.9, 0.992175, 1 - 2**-24, 1, 1 + 2**-23, 1.0001, 1.39, 1.41, 2, 1e-30, 1e30])
    assert_matches(on(device, x).log(), np.log(x.astype(np.float64)), 5e-7, what="log")


def test_max_with_dim_gradient_goes_to_the_returned_index(device):
    """As in torch: with ties, max(dim)'s values pass the gradient to their index only (it was split)."""
    x = np.float32([[2, 5, 5, 1], [3, 3, 3, 3]])
    for op in ("max", "min"):
        check_op(lambda t: getattr(t, op)(1)[0], x, device=device, fd=False)


def test_python_int_operand_wraps_to_int32(device):
    """An int beyond int32 wraps as in torch (the cpu device raised OverflowError, webgpu wrapped)."""
    x = np.int32([2, -3, 2**31 - 1])
    for scalar in (2**40 + 5, -2**31 - 1, 2**32):
        expected = (torch.tensor(x) + scalar).numpy()
        assert_matches(on(device, x) + scalar, expected, what=f"+ {scalar}")


def test_empty_dim_list_reduces_every_dim(device):
    x = np.random.default_rng(seed()).standard_normal((2, 3)).astype(np.float32)
    for op, scale in (("sum", np.abs(x).sum()), ("mean", np.abs(x).mean()), ("amax", None)):
        expected = getattr(torch.tensor(x, dtype=torch.float64), op)(())
        # a float32 sum's rounding is relative to sum |x|, not to the (maybe cancelled) result
        assert_matches(getattr(on(device, x), op)(()), expected.numpy(), 1e-6, scale, what=f"{op}(())")


def test_cat_of_0d_tensors_raises(device):
    with pytest.raises(RuntimeError, match="zero-dimensional"):
        wg.cat([on(device, np.float32(1)), on(device, np.float32(2))])


def test_argmax_over_all_of_a_strided_uint8_view(device):
    """argmax() flattened its input first, a copy webgpu cannot write for uint8."""
    x = np.random.default_rng(seed()).integers(0, 256, (4, 6), dtype=np.uint8)
    assert_matches(on(device, x).T.argmax(), np.asarray(x.T.argmax(), np.int32), what="argmax of x.T")
