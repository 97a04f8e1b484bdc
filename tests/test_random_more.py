"""torch.Generator and generator= on the random ops; randint, multinomial, normal and bernoulli
(statistics by chi-square at p < 1e-6, reproducible under a seed or a generator) on both devices."""
import math

import numpy as np
import pytest
import torch

import webgrad as wg
from conftest import assert_close, positive, seed, tag, wg_tensor


def _chi2_bound(df, z=4.753):
    """The chi-square value that df degrees of freedom exceed with probability 1e-6 (z: the normal
    quantile of 1 - 1e-6), by the Wilson-Hilferty approximation."""
    return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


def _chi2(counts, expected):
    return float(((counts - expected) ** 2 / expected).sum())


# ---- the Generator ----
def test_generator_api():
    g = wg.Generator()
    assert g.initial_seed() == torch.Generator().initial_seed() and g.device == "cpu"
    assert g.manual_seed(seed()) is g and g.initial_seed() == seed()
    assert wg.Generator().manual_seed(-1).initial_seed() == torch.Generator().manual_seed(-1).initial_seed()
    fresh = g.seed()
    assert g.initial_seed() == fresh and 0 <= fresh < 2**64
    with pytest.raises(RuntimeError):
        g.manual_seed(1.5)
    with pytest.raises(ValueError):
        g.manual_seed(2**70)
    state = g.get_state()
    assert state.dtype is wg.uint8 and state.device == "cpu"
    with pytest.raises(TypeError):
        g.set_state(wg.zeros(16))
    with pytest.raises(RuntimeError):
        g.set_state(wg.zeros(3, dtype=wg.uint8))
    assert isinstance(wg.default_generator, wg.Generator) and wg.manual_seed(seed()) is wg.default_generator


@pytest.mark.parametrize("draw", ["rand", "randn", "randint", "randperm", "multinomial", "normal", "bernoulli"])
def test_generators_are_reproducible_and_independent(draw, device):
    weights = wg.tensor(positive(3, 9), device=device)
    calls = {
        "rand": lambda g: wg.rand(5, 7, generator=g, device=device),
        "randn": lambda g: wg.randn(300, generator=g, device=device),
        "randint": lambda g: wg.randint(3, 17, (40,), generator=g, device=device),
        "randperm": lambda g: wg.randperm(50, generator=g, device=device),
        "multinomial": lambda g: wg.multinomial(weights, 4, generator=g),
        "normal": lambda g: wg.normal(2.0, 3.0, (6,), generator=g, device=device),
        "bernoulli": lambda g: wg.bernoulli(wg.full((64,), 0.3, device=device), generator=g),
    }
    call = calls[draw]
    g = wg.Generator().manual_seed(seed())
    wg.manual_seed(seed() + 1)
    default_before = wg.get_rng_state().tolist()
    first, second = call(g).tolist(), call(g).tolist()
    assert wg.get_rng_state().tolist() == default_before, tag("a generator's draws moved the default generator")
    assert first != second, tag("consecutive draws are equal")
    assert call(wg.Generator().manual_seed(seed())).tolist() == first, tag("the same seed, other numbers")
    state = g.get_state()
    third = call(g).tolist()
    g.set_state(state)
    assert call(g).tolist() == third, tag("set_state did not restore the stream")
    wg.manual_seed(seed())
    assert call(None).tolist() == first, tag("manual_seed's default generator differs from Generator's")


def test_generator_draws_agree_across_devices():
    g = {device: wg.Generator().manual_seed(seed()) for device in ("cpu", "webgpu")}
    for make in (lambda d: wg.rand(1000, generator=g[d], device=d), lambda d: wg.randint(-5, 1000, (999,),
                 generator=g[d], device=d), lambda d: wg.randperm(77, generator=g[d], device=d)):
        assert make("cpu").tolist() == make("webgpu").tolist(), tag("cpu and webgpu draw different numbers")
    assert_close(wg.randn(500, generator=g["cpu"]), wg.randn(500, generator=g["webgpu"], device="webgpu"),
                 atol=1e-5, rtol=1e-5)
    wg.set_rng_state(g["cpu"].get_state())
    assert wg.rand(10).tolist() == wg.rand(10, generator=g["webgpu"], device="webgpu").tolist()


# ---- randint ----
@pytest.mark.parametrize("bounds", [(7,), (-3, 4), (1000, 1013)])
def test_randint_is_uniform(bounds, device):
    g = wg.Generator().manual_seed(seed())
    x = wg.randint(*bounds, (70_000,), generator=g, device=device)
    low, high = (0, bounds[0]) if len(bounds) == 1 else bounds
    values = x.numpy()
    assert x.dtype is wg.int32 and values.min() >= low and values.max() < high
    counts = np.bincount(values - low, minlength=high - low)
    expected = len(values) / (high - low)
    assert _chi2(counts, expected) < _chi2_bound(high - low - 1), tag(f"randint{bounds} counts {counts}")


def test_randint_forms_and_errors(device):
    assert wg.randint(5, (2, 3), device=device).shape == (2, 3)
    assert wg.randint(low=2, high=4, size=(10,), device=device).numpy().min() >= 2
    assert wg.randint(2, 4, size=(3,), device=device).shape == (3,)
    f = wg.randint(3, (50,), dtype=wg.float32, device=device)
    assert f.dtype is wg.float32 and set(f.tolist()) <= {0.0, 1.0, 2.0}
    for bad in ((5, 3, (3,)), (0, (3,))):
        with pytest.raises(RuntimeError):
            wg.randint(*bad, device=device)
        with pytest.raises(RuntimeError):
            torch.randint(*bad)


# ---- multinomial ----
@pytest.mark.parametrize("replacement", [True, False])
def test_multinomial_follows_the_weights(replacement, device):
    """With replacement every draw follows p; without, the first of each row does (and the rest never
    repeat a category or take a zero-weight one)."""
    weights = np.array([0.0, 1.0, 2.0, 3.0, 0.5, 0.0, 5.0, 1.5], np.float32)
    rows, samples = 4000, 5
    g = wg.Generator().manual_seed(seed())
    drawn = wg.multinomial(wg.tensor(np.tile(weights, (rows, 1)), device=device), samples, replacement,
                           generator=g).numpy()
    assert drawn.shape == (rows, samples) and drawn.dtype == np.int32
    assert not np.isin(drawn, [0, 5]).any(), tag("a zero-weight category was drawn")
    tested = drawn.reshape(-1) if replacement else drawn[:, 0]
    p = weights[weights > 0] / weights.sum()
    counts = np.bincount(tested, minlength=len(weights))[weights > 0]
    assert _chi2(counts, p * len(tested)) < _chi2_bound(len(p) - 1), tag(f"counts {counts}")
    if not replacement:
        assert all(len(set(row)) == samples for row in drawn.tolist()), tag("a category repeats in a row")


def test_multinomial_shapes_and_whole_permutations(device):
    w = wg.tensor(positive(6), device=device)
    assert wg.multinomial(w, 3).shape == (3,) and w.multinomial(10, replacement=True).shape == (10,)
    assert sorted(wg.multinomial(w, 6).tolist()) == list(range(6))


def test_multinomial_errors(device):
    w = wg.tensor(positive(2, 4), device=device)
    cases = [lambda m, x: m.multinomial(x.reshape(2, 2, 2), 1), lambda m, x: m.multinomial(x, 5),
             lambda m, x: m.multinomial(x, 0), lambda m, x: m.multinomial(x.int(), 1)]
    if device == "cpu":   # the weights are read back on cpu only (on webgpu, as on CUDA, they are not)
        cases += [lambda m, x: m.multinomial(x - 10, 1), lambda m, x: m.multinomial(x * 0, 1)]
    for call in cases:
        with pytest.raises(RuntimeError):
            call(torch, torch.from_numpy(w.numpy()))
        with pytest.raises(RuntimeError):
            call(wg, w)


# ---- normal, bernoulli ----
def test_normal(device):
    wg.manual_seed(seed())
    x = wg.normal(3.0, 2.0, (100_000,), device=device).numpy()
    assert abs(x.mean() - 3.0) < 0.03 and abs(x.std() - 2.0) < 0.03, tag(f"{x.mean()} {x.std()}")
    mean = wg_tensor(np.float32([[0.0], [10.0]]), device, requires_grad=True)
    std = wg_tensor(np.float32([1.0, 0.5, 2.0]), device, requires_grad=True)
    out = wg.normal(mean, std)
    assert out.shape == (2, 3) and out.device == device
    out.sum().backward()
    z = (out.detach().numpy() - mean.detach().numpy()) / std.detach().numpy()
    assert_close(mean.grad, np.full((2, 1), 3.0, np.float32))     # d out / d mean = 1
    assert_close(std.grad, z.sum(0), atol=1e-4)                    # d out / d std = (out - mean) / std
    with pytest.raises(RuntimeError):
        wg.normal(0.0, -1.0, (3,), device=device)


def test_bernoulli(device):
    p = wg.tensor(np.float32([0.0, 0.2, 0.9, 1.0]), device=device).expand(50_000, 4).contiguous()
    g = wg.Generator().manual_seed(seed())
    draws = p.bernoulli(generator=g).numpy()
    assert draws.dtype == np.float32 and set(np.unique(draws)) <= {0.0, 1.0}
    assert np.allclose(draws.mean(0), [0.0, 0.2, 0.9, 1.0], atol=0.01), tag(f"{draws.mean(0)}")
    assert abs(wg.bernoulli(wg.zeros(20_000, device=device), 0.3, generator=g).numpy().mean() - 0.3) < 0.015
