"""webgrad.utils.data's randomness, where torch's differs (another generator): reproducibility under
seeds and generators, coverage of every index per epoch, batches gathered at once equal to batches
item by item, and the samplers' distributions. Tensors live on both devices (conftest's `device`
fixture)."""

import numpy as np
import pytest
import torch
import torch.utils.data as td

import webgrad as wg
from webgrad.utils import data as wd
from conftest import rng, seed, tag, to_numpy
from data_pairs import indices_of, tensor_pair


# ---- randomness: reproducible, covering, well spread ----
def _orders(loader, epochs=3):
    return [[i for b in loader for i in indices_of(b)] for _ in range(epochs)]


@pytest.mark.parametrize("drop_last", [False, True])
def test_shuffled_epochs_cover_every_index_once(device, drop_last):
    n, batch = int(rng().integers(10, 50)), int(rng().integers(1, 9))
    ours, theirs = tensor_pair(n, device)
    ds = wd.TensorDataset(ours.tensors[0], wg.arange(n, device=device))   # labels = indices
    loader = wd.DataLoader(ds, batch, shuffle=True, drop_last=drop_last)
    reference = td.DataLoader(theirs, batch, shuffle=True, drop_last=drop_last)
    assert len(loader) == len(reference)
    epochs = []
    for _ in range(3):
        sizes, seen = [], []
        for x, i in loader:
            assert x.device == i.device == device
            np.testing.assert_array_equal(to_numpy(x), to_numpy(ours.tensors[0])[i.tolist()], err_msg=tag("pairing"))
            sizes.append(len(i))
            seen += i.tolist()
        assert sizes == [len(b[0]) for b in reference], tag("batch sizes")
        assert len(set(seen)) == len(seen) == (n // batch * batch if drop_last else n), tag("each index once")
        epochs.append(seen)
    assert epochs[0] != epochs[1] != epochs[2], tag("a new order each epoch")


def test_gathered_batches_equal_item_by_item_batches(device):
    """A tensor dataset's batches (one gather per tensor) are what collating its items gives, for
    the same orders: the per-item path runs with a collate_fn that is not default_collate's object."""
    n, batch, s = int(rng().integers(5, 40)), int(rng().integers(1, 7)), seed()
    ours, _ = tensor_pair(n, device)
    subset = wd.Subset(ours, [int(i) for i in rng().integers(0, n, n)])
    for dataset in (ours, subset):
        for kwargs in (dict(shuffle=True, seed=s), dict(sampler=wd.RandomSampler(dataset, True, 2 * n)),
                       dict(shuffle=False)):
            if "sampler" in kwargs:
                wg.manual_seed(s)
            fast = list(wd.DataLoader(dataset, batch, **kwargs))
            if "sampler" in kwargs:
                wg.manual_seed(s)
            slow = list(wd.DataLoader(dataset, batch, collate_fn=lambda b: wd.default_collate(b), **kwargs))
            assert len(fast) == len(slow)
            for a, b in zip(fast, slow):
                assert type(a) is list and len(a) == len(b) == 3
                for u, v in zip(a, b):
                    assert u.dtype is v.dtype and u.device == v.device == device
                    np.testing.assert_array_equal(to_numpy(u), to_numpy(v), err_msg=tag("gathered vs collated"))


def test_tensor_datasets_are_indexed_once_per_batch(device, monkeypatch):
    """The gathered path: each batch is one indexing of the dataset by a slice or an index tensor."""
    calls = []
    original = wd.TensorDataset.__getitem__

    def spy(self, index):
        calls.append(type(index))
        return original(self, index)
    monkeypatch.setattr(wd.TensorDataset, "__getitem__", spy)
    n = int(rng().integers(10, 30))
    ours, _ = tensor_pair(n, device)
    for kwargs in (dict(), dict(shuffle=True), dict(sampler=wd.SubsetRandomSampler(range(0, n, 2))),
                   dict(sampler=wd.WeightedRandomSampler([1.0] * n, n))):
        for dataset in (ours, wd.Subset(ours, list(range(n - 1, -1, -1)))):
            calls.clear()
            loader = wd.DataLoader(dataset, 4, **kwargs)
            assert len(list(loader)) == len(loader) == len(calls)
            assert set(calls) <= {slice, wg.Tensor}, tag(f"indexed by {set(calls)}")


def test_manual_seed_and_generators_repeat_shuffles(device):
    s = seed()
    n = int(rng().integers(10, 40))
    ds = wd.TensorDataset(wg.arange(n, device=device), wg.arange(n, device=device))
    loader = wd.DataLoader(ds, 4, shuffle=True)
    runs = []
    for _ in range(2):
        wg.manual_seed(s)
        runs.append(_orders(loader) + [list(wd.RandomSampler(range(n))), list(wd.RandomSampler(range(n), True)),
                                       list(wd.random_split(range(n), [0.5, 0.5])[0])])
    assert runs[0] == runs[1], tag("manual_seed repeats every shuffle")

    def generator(value):
        g = torch.Generator()   # anything with initial_seed() will do
        g.manual_seed(value)
        return g
    a, b, c = (_orders(wd.DataLoader(ds, 4, shuffle=True, generator=generator(v))) for v in (s, s, s + 1))
    assert a == b != c, tag("a generator's seed decides the orders")
    other = "cpu" if device == "webgpu" else "webgpu"
    on_other = wd.TensorDataset(wg.arange(n, device=other), wg.arange(n, device=other))
    assert _orders(wd.DataLoader(on_other, 4, shuffle=True, generator=generator(s))) == a, tag("same on both devices")
    assert [x.indices for x in wd.random_split(range(n), [3, n - 3], generator=generator(s))] == \
           [x.indices for x in wd.random_split(range(n), [3, n - 3], generator=generator(s))]
    shared = generator(s)
    first, second = wd.RandomSampler(range(n), generator=shared), wd.RandomSampler(range(n), generator=shared)
    assert list(first) != list(second), tag("samplers sharing a generator draw different orders")
    shared.manual_seed(s + 1)
    assert list(first) == c[0], tag("reseeding a generator restarts its stream")
    for make in (lambda g: list(wd.RandomSampler(range(n), True, 3 * n, generator=g)),
                 lambda g: list(wd.SubsetRandomSampler(list(range(0, 3 * n, 3)), generator=g)),
                 lambda g: list(wd.WeightedRandomSampler([1.0] * n, n, generator=g)),
                 lambda g: list(wd.WeightedRandomSampler([1.0] * n, n, replacement=False, generator=g))):
        assert make(generator(s)) == make(generator(s)) != make(generator(s + 1))


def test_random_sampler_passes_are_uniform_permutations():
    """Where each index lands, over many passes: uniform over positions (chi-square, p ~ 1e-6)."""
    n, passes = 6, 1200
    counts = np.zeros((n, n))
    for _ in range(passes):
        order = list(wd.RandomSampler(range(n)))
        assert sorted(order) == list(range(n))
        counts[np.arange(n), order] += 1
    expected = passes / n
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < _chi2_bound((n - 1) ** 2), tag(f"position counts {counts.tolist()}: chi2 {chi2:.1f}")


@pytest.mark.parametrize("n,num_samples", [(7, 3), (5, 12)])
def test_random_sampler_num_samples_without_replacement(n, num_samples):
    for _ in range(5):
        drawn = list(wd.RandomSampler(range(n), num_samples=num_samples))
        assert len(drawn) == num_samples == len(wd.RandomSampler(range(n), num_samples=num_samples))
        counts = np.bincount(drawn, minlength=n)
        assert counts.max() <= -(-num_samples // n) and counts.min() >= num_samples // n, tag(f"counts {counts}")
        assert len(set(drawn[:n])) == min(n, num_samples), tag("each pass a permutation")


def _chi2(counts, probabilities):
    expected = np.asarray(probabilities) * counts.sum()
    return float(((counts - expected) ** 2 / expected).sum())


def _chi2_bound(df, t=14):
    """Exceeded by a chi-square of df degrees of freedom with probability <= e^-t (Laurent-Massart)."""
    return df + 2 * np.sqrt(df * t) + 2 * t


def test_sampling_with_replacement_is_uniform_and_weighted_sampling_follows_weights():
    n, k = int(rng().integers(3, 6)), 12000
    counts = np.bincount(list(wd.RandomSampler(range(n), replacement=True, num_samples=k)), minlength=n)
    assert _chi2(counts, [1 / n] * n) < _chi2_bound(n - 1), tag(f"uniform counts {counts}")
    weights = rng().uniform(0.5, 2.0, n)   # every pair below expected often enough for the chi-square
    p = weights / weights.sum()
    counts = np.bincount(list(wd.WeightedRandomSampler(wg.tensor(weights.astype(np.float32)), k)), minlength=n)
    assert _chi2(counts, p) < _chi2_bound(n - 1), tag(f"weighted counts {counts} for p {p}")
    # without replacement: the (first, second) pairs, P = p_i * p_j / (1 - p_i)
    pairs, passes = np.zeros((n, n)), 3000
    for _ in range(passes):
        drawn = list(wd.WeightedRandomSampler(weights.tolist(), n, replacement=False))
        assert sorted(drawn) == list(range(n))
        pairs[drawn[0], drawn[1]] += 1
    expected = np.outer(p, p) / (1 - p)[:, None]
    off = ~np.eye(n, dtype=bool)
    assert pairs[~off].sum() == 0 and _chi2(pairs[off], expected[off]) < _chi2_bound(n * (n - 1) - 1), tag(
        f"pairs {pairs}")
    drawn = list(wd.WeightedRandomSampler([0.0, 1.0, 0.0, 2.0], 4, replacement=False))
    assert set(drawn[:2]) == {1, 3} and set(drawn[2:]) == {0, 2}, tag("weight 0 last")


def test_subset_random_sampler_and_batch_sampler():
    indices = [int(i) for i in rng().integers(-100, 100, int(rng().integers(1, 30)))]
    sampler = wd.SubsetRandomSampler(indices)
    assert len(sampler) == len(indices) and sorted(sampler) == sorted(indices)
    size = int(rng().integers(1, 7))
    for drop_last in (False, True):
        ours = wd.BatchSampler(wd.SequentialSampler(indices), size, drop_last)
        theirs = td.BatchSampler(td.SequentialSampler(indices), size, drop_last)
        assert list(ours) == list(theirs) and len(ours) == len(theirs)
