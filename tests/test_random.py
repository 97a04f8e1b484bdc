"""Random creation: rand, randn, manual_seed (the same numbers on both devices), randperm."""
import math

import numpy as np
import pytest

import webgrad as wg
from conftest import seed, tag


def test_rand_and_randn_statistics(device):
    wg.manual_seed(seed())
    u = wg.rand(100_000, device=device).numpy()
    assert u.dtype == np.float32 and u.min() >= 0.0 and u.max() < 1.0
    assert abs(u.mean() - 0.5) < 0.01 and abs(u.std() - math.sqrt(1 / 12)) < 0.01, tag(f"{u.mean()} {u.std()}")
    n = wg.randn(100_000, device=device).numpy()
    assert np.all(np.isfinite(n))
    assert abs(n.mean()) < 0.02 and abs(n.std() - 1) < 0.02, tag(f"randn mean {n.mean()} std {n.std()}")
    assert abs(np.mean(np.abs(n) < 1) - 0.6827) < 0.01, tag("randn is not normal-shaped")
    shaped = wg.randn(3, 5, 7, device=device)
    assert shaped.shape == (3, 5, 7) and wg.rand((2, 3), device=device).shape == (2, 3)


def test_manual_seed_reproducibility(device):
    wg.manual_seed(seed())
    a, b = wg.rand(1000, device=device).numpy(), wg.randn(257, device=device).numpy()
    assert wg.initial_seed() == seed() & 0xFFFFFFFF
    c = wg.rand(1000, device=device).numpy()
    assert not np.array_equal(a, c), tag("consecutive draws are equal")
    wg.manual_seed(seed())
    np.testing.assert_array_equal(wg.rand(1000, device=device).numpy(), a, err_msg=tag("rand after reseed"))
    np.testing.assert_array_equal(wg.randn(257, device=device).numpy(), b, err_msg=tag("randn after reseed"))
    wg.manual_seed(seed() + 1)
    assert not np.array_equal(wg.rand(1000, device=device).numpy(), a), tag("different seeds gave equal values")


def test_same_seed_same_values_on_cpu_and_webgpu():
    values = {}
    for device in ("cpu", "webgpu"):
        wg.manual_seed(seed())
        values[device] = (wg.rand(1000, device=device).numpy(), wg.randn(3, 5, 7, device=device).numpy(),
                          wg.rand_like(wg.zeros(257, device=device)).numpy())
    np.testing.assert_array_equal(values["webgpu"][0], values["cpu"][0], err_msg=tag("rand cpu vs webgpu"))
    np.testing.assert_allclose(values["webgpu"][1], values["cpu"][1], rtol=1e-5, atol=1e-5,
                               err_msg=tag("randn cpu vs webgpu"))
    np.testing.assert_array_equal(values["webgpu"][2], values["cpu"][2], err_msg=tag("rand_like cpu vs webgpu"))


@pytest.mark.parametrize("n", [0, 1, 2, 5, 17, 64, 1000, 70_001])
def test_randperm_is_a_permutation_and_the_same_on_both_devices(n):
    wg.manual_seed(seed())
    ours = wg.randperm(n, device="webgpu")
    wg.manual_seed(seed())
    reference = wg.randperm(n)
    assert ours.dtype is wg.int32 and ours.shape == (n,)
    assert sorted(ours.tolist()) == list(range(n))
    assert ours.tolist() == reference.tolist()
    if n >= 17:   # the next draw is another order
        assert wg.randperm(n).tolist() != reference.tolist()


def test_randperm_is_uniform():
    # Where each element lands, over many draws of a permutation of 5: every (element, position)
    # pair should be hit 1/5 of the time (a chi-square test; p < 1e-6 fails).
    wg.manual_seed(seed())
    draws = np.array([wg.randperm(5).tolist() for _ in range(3000)])
    counts = np.array([[(draws[:, pos] == v).sum() for pos in range(5)] for v in range(5)])
    chi2 = ((counts - 600) ** 2 / 600).sum()
    assert chi2 < 59, counts   # 16 degrees of freedom: p(chi2 > 59) < 1e-6
    with pytest.raises(ValueError, match="randperm"):
        wg.randperm(-1)
    with pytest.raises(TypeError, match="int32"):
        wg.randperm(3, dtype=wg.float32)


def test_random_of_integer_dtype_raises(device):
    with pytest.raises(TypeError):
        wg.rand(3, dtype=wg.int32, device=device)
