"""webgrad.utils.data against torch.utils.data, run side by side on the same fresh random data:
batches (order, sizes, drop_last, collated structure, values and dtypes), lengths, random_split's
sizes and the exception types of bad arguments; where torch's randomness differs (another
generator), reproducibility under seeds and generators, coverage of every index per epoch and
the samplers' distributions. Tensors live on both devices (conftest's `device` fixture)."""
import collections
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.utils.data as td

import webgrad as wg
from webgrad.utils import data as wd
from conftest import rng, seed, tag, to_numpy

Point = collections.namedtuple("Point", "x y")


# ---- comparing a webgrad result with torch's ----
def expected_dtype(t, device):
    """webgrad's dtype on device for torch's: int64 is webgrad's long (int32); float64 exists on the cpu
    device only."""
    name = str(t.dtype).split(".")[1]
    if name == "int64":
        return wg.int32
    if name == "float64" and device != "cpu":
        return wg.float32
    return getattr(wg, name)


def assert_same(ours, theirs, where="batch"):
    """The same structure (container types, keys, lengths), strings and tensor values and dtypes."""
    if isinstance(theirs, torch.Tensor):
        assert isinstance(ours, wg.Tensor), tag(f"{where}: {type(ours).__name__}, torch gives a tensor")
        assert tuple(ours.shape) == tuple(theirs.shape), tag(f"{where}: shape {tuple(ours.shape)} vs "
                                                             f"{tuple(theirs.shape)}")
        assert ours.dtype is expected_dtype(theirs, ours.device), tag(f"{where}: dtype {ours.dtype} on {ours.device} "
                                                                      f"vs torch {theirs.dtype}")
        mine = to_numpy(ours)   # torch's values in our dtype: float64 rounded to float32 off the cpu device
        np.testing.assert_array_equal(mine, theirs.numpy().astype(mine.dtype), err_msg=tag(where))
        return
    assert type(ours) is type(theirs), tag(f"{where}: {type(ours).__name__} vs torch {type(theirs).__name__}")
    if isinstance(theirs, dict):
        assert list(ours) == list(theirs), tag(f"{where}: keys {list(ours)} vs {list(theirs)}")
        for key in theirs:
            assert_same(ours[key], theirs[key], f"{where}[{key!r}]")
    elif isinstance(theirs, (list, tuple)):
        assert len(ours) == len(theirs), tag(f"{where}: length {len(ours)} vs {len(theirs)}")
        for i, (a, b) in enumerate(zip(ours, theirs)):
            assert_same(a, b, f"{where}[{i}]")
    else:
        assert ours == theirs, tag(f"{where}: {ours!r} vs torch {theirs!r}")


def assert_same_batches(ours, theirs):
    assert len(ours) == len(theirs), tag(f"len(loader) {len(ours)} vs torch {len(theirs)}")
    ours, theirs = list(ours), list(theirs)
    assert len(ours) == len(theirs), tag(f"{len(ours)} batches vs torch {len(theirs)}")
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert_same(a, b, f"batch {i}")


def raises_like(make_ours, make_theirs):
    """Both raise, an exception of the same type; returns (ours, torch's)."""
    with pytest.raises(Exception) as theirs:
        make_theirs()
    with pytest.raises(type(theirs.value)) as ours:
        make_ours()
    assert type(ours.value) is type(theirs.value), tag(f"{type(ours.value).__name__} vs torch "
                                                      f"{type(theirs.value).__name__}: {theirs.value}")
    return ours.value, theirs.value


# ---- paired datasets: the same data as webgrad (on a device) and as torch ----
def tensor_pair(n, device):
    """(webgrad TensorDataset, torch TensorDataset) of random features, int labels and a bool mask."""
    x, y, m = rng().standard_normal((n, 3)).astype(np.float32), rng().integers(-50, 50, n), rng().random(n) < 0.5
    ours = wd.TensorDataset(*(wg.tensor(a, device=device) for a in (x, y.astype(np.int32), m)))
    return ours, td.TensorDataset(torch.from_numpy(x), torch.from_numpy(y), torch.from_numpy(m))


def records(lib, n, make):
    """A map-style dataset (a Dataset subclass of lib's) of dict samples: a tensor, Python numbers, a
    string, a tuple and a namedtuple; make turns a NumPy array into lib's tensor."""
    r = np.random.default_rng(seed())   # the same values for webgrad and torch
    x, ints, floats = r.standard_normal((n, 2)).astype(np.float32), r.integers(-9, 9, n), r.standard_normal(n)

    class Records(lib.utils.data.Dataset):
        def __len__(self):
            return n

        def __getitem__(self, i):
            return {"x": make(x[i]), "label": int(ints[i]), "weight": float(floats[i]), "name": f"item{i}",
                    "flag": bool(ints[i] > 0), "pair": (int(ints[i]), [float(floats[i])]),
                    "point": Point(make(x[i, :1]), float(floats[i]))}
    return Records()


def our_maker(device):
    return lambda a: wg.tensor(a, device=device)


def indices_of(batch):
    """The dataset indices in a batch of a dataset whose second tensor is arange(n)."""
    return batch[1].tolist()


# ---- deterministic batching, side by side ----
@pytest.mark.parametrize("drop_last", [False, True])
def test_sequential_batches_match_torch(device, drop_last):
    n, batch = int(rng().integers(1, 40)), int(rng().integers(1, 9))
    ours, theirs = tensor_pair(n, device)
    assert len(ours) == len(theirs) == n
    assert_same(list(ours[n - 1]), list(theirs[n - 1]), "dataset[n - 1]")
    assert_same_batches(wd.DataLoader(ours, batch, drop_last=drop_last),
                        td.DataLoader(theirs, batch, drop_last=drop_last))
    for b in wd.DataLoader(ours, batch):
        assert all(t.device == device for t in b)


def test_subsets_samplers_and_batch_samplers_match_torch(device):
    """Orders given from outside (Subset indices, a sampler, a batch sampler) batch alike, including
    through the gathered path of tensor datasets."""
    n = int(rng().integers(10, 40))
    ours, theirs = tensor_pair(n, device)
    picked = [int(i) for i in rng().integers(-n, n, n)]   # repeats and negatives (n: samplers below are over range(n))
    order = [int(i) for i in rng().permutation(n)]
    batches = [[int(i) for i in rng().integers(0, n, int(rng().integers(1, 6)))] for _ in range(5)]
    for kwargs in (dict(batch_size=3), dict(batch_size=4, drop_last=True), dict(batch_size=3, sampler=order),
                   dict(batch_size=5, sampler=wd.SequentialSampler(range(n))), dict(batch_sampler=batches),
                   dict(batch_size=None, sampler=order[:5])):
        torch_kwargs = {**kwargs, "sampler": td.SequentialSampler(range(n))} if isinstance(
            kwargs.get("sampler"), wd.SequentialSampler) else kwargs
        assert_same_batches(wd.DataLoader(wd.Subset(ours, picked), **kwargs),
                            td.DataLoader(td.Subset(theirs, picked), **torch_kwargs))
        assert_same_batches(wd.DataLoader(ours, **kwargs), td.DataLoader(theirs, **torch_kwargs))
    nested = [int(i) for i in rng().permutation(len(picked))[:5]]
    assert_same_batches(wd.DataLoader(wd.Subset(wd.Subset(ours, picked), nested), 2),
                        td.DataLoader(td.Subset(td.Subset(theirs, picked),
                                                                            nested), 2))


def test_out_of_range_indices_raise_index_error(device):
    ours, theirs = tensor_pair(5, device)
    for kwargs in (dict(sampler=[0, 5]), dict(batch_sampler=[[1], [-6]])):
        raises_like(lambda: list(wd.DataLoader(ours, **kwargs)), lambda: list(td.DataLoader(theirs, **kwargs)))
    raises_like(lambda: list(wd.DataLoader(wd.Subset(ours, [0, 7]))),
                lambda: list(td.DataLoader(td.Subset(theirs, [0, 7]))))


def test_item_by_item_collation_matches_torch(device):
    n, make = int(rng().integers(3, 20)), our_maker(device)
    ours, theirs = records(wg, n, make), records(torch, n, torch.from_numpy)
    batch = int(rng().integers(1, 6))
    for kwargs in (dict(batch_size=batch), dict(batch_size=batch, drop_last=True), dict(batch_size=None),
                   dict(batch_sampler=[[0, 1], [n - 1], [2, 0, 1]])):
        assert_same_batches(wd.DataLoader(ours, **kwargs), td.DataLoader(theirs, **kwargs))
    collate = lambda samples: [s["label"] for s in samples]   # noqa: E731
    assert_same_batches(wd.DataLoader(ours, batch, collate_fn=collate),
                        td.DataLoader(theirs, batch, collate_fn=collate))
    # the workers' options are accepted; everything still runs here, in this process
    loader = wd.DataLoader(ours, batch, num_workers=2, pin_memory=True, timeout=5, persistent_workers=True,
                           prefetch_factor=3, worker_init_fn=lambda worker: None)
    assert_same_batches(loader, td.DataLoader(theirs, batch))
    assert wd.get_worker_info() is None


def test_default_collate_and_convert_match_torch(device):
    make = our_maker(device)
    a, b = rng().standard_normal((2, 3)).astype(np.float32), rng().integers(-9, 9, (2, 2), dtype=np.int32)
    i, f = [int(v) for v in rng().integers(-1000, 1000, 2)], [float(v) for v in rng().standard_normal(2)]

    def samples(mk):
        return [((mk(a[k]), {"b": mk(b[k]), "n": i[k]}), [f[k], "s" + str(k)], Point(i[k], f[k]), b"raw", True,
                 a[k], b[k], np.int64(i[k]), np.float32(f[k])) for k in range(2)]
    assert_same(wd.default_collate(samples(make)), td.default_collate(samples(torch.from_numpy)))
    assert_same(wd.default_collate(i), td.default_collate(i))
    assert_same(wd.default_collate(f), td.default_collate(f))
    for sample in ((a[0], {"k": b}, [np.float32(f[0])], "s"), Point(a[1], 3), 7):
        assert_same(wd.default_convert(sample), td.default_convert(sample))
    for bad in ([[1, 2], [3]], [object(), object()], [np.array(["x"]), np.array(["y"])]):
        raises_like(lambda: wd.default_collate(bad), lambda: td.default_collate(bad))


@pytest.mark.parametrize("where", ["cpu", pytest.param("webgpu", marks=pytest.mark.xfail(
    raises=TypeError, strict=True, reason="the core cannot stack uint8 tensors on webgpu (cat writes 32-bit words)"))])
def test_uint8_samples_collate_like_torch(where):
    images = rng().integers(0, 256, (3, 2, 2), dtype=np.uint8)
    ours = wd.default_collate([wg.tensor(image, device=where) for image in images])
    assert_same(ours, td.default_collate([torch.from_numpy(image) for image in images]))


def test_python_floats_collate_to_float64_on_cpu_and_float32_on_webgpu():
    """torch makes float64 tensors of Python floats; webgrad does where its dtypes allow it (the
    default device is where the batch goes, as torch.tensor's)."""
    batch = wd.default_collate([0.5, 1.5])
    assert batch.device == wg.default_device()
    assert batch.dtype is (wg.float64 if batch.device == "cpu" else wg.float32) and batch.tolist() == [0.5, 1.5]


def test_iterable_datasets_match_torch():
    n = int(rng().integers(1, 30))
    values = [int(v) for v in rng().integers(-100, 100, n)]

    def stream(lib, sized):
        class Stream(lib.utils.data.IterableDataset):
            def __iter__(self):
                return iter(values)
        if sized:
            Stream.__len__ = lambda self: n
        return Stream()
    batch = int(rng().integers(1, 8))
    for kwargs in (dict(batch_size=batch), dict(batch_size=batch, drop_last=True), dict(batch_size=None)):
        assert_same_batches(wd.DataLoader(stream(wg, True), **kwargs),
                            td.DataLoader(stream(torch, True), **kwargs))
    assert_same(list(wd.DataLoader(stream(wg, False), batch)), list(td.DataLoader(stream(torch, False), batch)))
    raises_like(lambda: len(wd.DataLoader(stream(wg, False))), lambda: len(td.DataLoader(stream(torch, False))))
    chained = stream(wg, True) + stream(wg, True)
    assert isinstance(chained, wd.ChainDataset) and list(chained) == values * 2 and len(chained) == 2 * n


def test_concat_dataset_matches_torch(device):
    sizes = [int(s) for s in rng().integers(1, 6, 3)]
    pairs = [tensor_pair(s, device) for s in sizes]
    ours, theirs = wd.ConcatDataset([p[0] for p in pairs]), td.ConcatDataset([p[1] for p in pairs])
    assert len(ours) == len(theirs) and ours.cumulative_sizes == theirs.cumulative_sizes
    for i in range(-len(theirs), len(theirs)):
        assert_same(list(ours[i]), list(theirs[i]), f"concat[{i}]")
    assert_same_batches(wd.DataLoader(ours, 4), td.DataLoader(theirs, 4))
    assert isinstance(pairs[0][0] + pairs[1][0], wd.ConcatDataset)
    raises_like(lambda: ours[-len(ours) - 1], lambda: theirs[-len(theirs) - 1])
    raises_like(lambda: wd.ConcatDataset([]), lambda: td.ConcatDataset([]))


def test_random_split_lengths_match_torch():
    n = int(rng().integers(5, 60))
    cuts = rng().random(int(rng().integers(1, 5))) + 0.1
    fractions = [float(c) for c in cuts / cuts.sum()]
    while sum(fractions) > 1:   # torch (and webgrad) read fractions summing past 1 by rounding as counts, and raise
        fractions[-1] = math.nextafter(fractions[-1], 0)
    counts = [int(c) for c in rng().multinomial(n, fractions)]
    for lengths in (fractions, counts, [0.5, 0.5], [n, 0]):
        ours, theirs = wd.random_split(range(n), lengths), td.random_split(range(n), lengths)
        assert [len(s) for s in ours] == [len(s) for s in theirs], tag(f"lengths {lengths}")
        assert sorted(i for s in ours for i in s) == list(range(n)) and all(isinstance(s, wd.Subset) for s in ours)
    with pytest.warns(UserWarning, match="Length of split at index 1 is 0"):
        wd.random_split(range(1), [1.0, 0.0])
    for bad in ([n + 1], [1.5, -0.5], [n, 1]):
        raises_like(lambda: wd.random_split(range(n), bad), lambda: td.random_split(range(n), bad))


# ---- argument checks ----
def _loader_errors(ours, theirs, stream_ours, stream_theirs):
    cases = [dict(num_workers=-1), dict(timeout=-1), dict(prefetch_factor=2), dict(persistent_workers=True),
             dict(num_workers=1, prefetch_factor=-1), dict(multiprocessing_context="spawn"),
             dict(shuffle=True, sampler=[0]), dict(batch_sampler=[[0]], batch_size=2),
             dict(batch_sampler=[[0]], shuffle=True), dict(batch_sampler=[[0]], drop_last=True),
             dict(batch_sampler=[[0]], sampler=[0]), dict(batch_size=None, drop_last=True), dict(batch_size=0),
             dict(batch_size=-3), dict(batch_size=2.0), dict(batch_size=True), dict(drop_last=1)]
    for kwargs in cases:
        yield kwargs, (lambda k=kwargs: wd.DataLoader(ours, **k)), (lambda k=kwargs: td.DataLoader(theirs, **k))
    for kwargs in (dict(shuffle=True), dict(sampler=[0]), dict(batch_sampler=[[0]]), dict(batch_size=0)):
        yield ("iterable", kwargs), (lambda k=kwargs: wd.DataLoader(stream_ours, **k)), (
            lambda k=kwargs: td.DataLoader(stream_theirs, **k))


def test_bad_arguments_raise_like_torch(device):
    ours, theirs = tensor_pair(4, device)

    class OurStream(wd.IterableDataset):
        def __iter__(self):
            return iter(range(3))

    class TheirStream(td.IterableDataset):
        def __iter__(self):
            return iter(range(3))
    for what, make_ours, make_theirs in _loader_errors(ours, theirs, OurStream(), TheirStream()):
        mine, torchs = raises_like(make_ours, make_theirs)
        assert str(mine) == str(torchs), tag(f"{what}: {mine} vs torch {torchs}")
    for name in ("batch_size", "sampler", "batch_sampler", "drop_last", "dataset", "persistent_workers"):
        loader, reference = wd.DataLoader(ours), td.DataLoader(theirs)
        mine, torchs = raises_like(lambda: setattr(loader, name, None), lambda: setattr(reference, name, None))
        assert str(mine) == str(torchs)
    loader = wd.DataLoader(ours)
    loader.collate_fn = lambda b: len(b)   # not frozen (in torch neither)
    assert list(loader) == [1] * 4

    sampler_cases = [
        (lambda m: m.RandomSampler(range(3), replacement=1)), (lambda m: m.RandomSampler(range(3), num_samples=0)),
        (lambda m: m.RandomSampler(range(0))), (lambda m: m.RandomSampler(range(3), num_samples=2.0)),
        (lambda m: m.BatchSampler(range(3), 0, False)), (lambda m: m.BatchSampler(range(3), 2, None)),
        (lambda m: m.WeightedRandomSampler([1.0], 0)), (lambda m: m.WeightedRandomSampler([1.0], 1, replacement=0)),
        (lambda m: m.WeightedRandomSampler([[1.0, 2.0]], 1)),
        (lambda m: list(m.WeightedRandomSampler([1.0, -1.0], 1))), (lambda m: list(m.WeightedRandomSampler([0.0], 1))),
        (lambda m: list(m.WeightedRandomSampler([1.0, float("nan")], 1))),
        (lambda m: list(m.WeightedRandomSampler([1.0, 2.0], 3, replacement=False))),
        (lambda m: type("S", (m.Subset,), {"__getitem__": lambda s, i: i})(range(2), [0])),
        (lambda m: m.Dataset()[0]), (lambda m: iter(m.Sampler()))]
    for case in sampler_cases:
        mine, torchs = raises_like(lambda: case(wd), lambda: case(torch.utils.data))
        assert str(mine) == str(torchs), tag(f"{mine} vs torch {torchs}")


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


# ---- layout ----
def test_torch_layout():
    assert wg.utils.data.DataLoader is wg.data.DataLoader is wd.dataloader.DataLoader
    assert wg.data.TensorDataset is wd.TensorDataset and wg.data.MNIST in wd.dataloader.TENSOR_INDEXED
    from webgrad.utils.data import (BatchSampler, ConcatDataset, Dataset, IterableDataset,  # noqa: F401
                                    RandomSampler, SequentialSampler, Subset, TensorDataset, random_split)
    from webgrad.utils.data._utils.collate import default_collate
    assert default_collate is wd.default_collate is wd.dataloader.default_collate
    assert set(wd.__all__) <= set(td.__all__)


def test_utils_data_needs_no_numpy(device):
    """Under Pyodide there is no NumPy: item-by-item loading of Python samples runs without it (on
    webgpu; the cpu device is NumPy itself, so there the import alone is checked)."""
    code = f"""
import sys
sys.modules["numpy"] = None
import webgrad as torch
from webgrad.utils.data import DataLoader, Dataset, random_split
if {device!r} == "webgpu":
    class Words(Dataset):
        def __len__(self):
            return 5
        def __getitem__(self, i):
            return {{"id": i, "score": i / 2, "word": "w" + str(i)}}
    train, test = random_split(Words(), [0.6, 0.4])
    batches = list(DataLoader(train, batch_size=2, shuffle=True))
    assert sorted(sum((b["id"].tolist() for b in batches), [])) == sorted(train.indices)
    assert batches[0]["score"].dtype is torch.float32 and batches[0]["id"].device == "webgpu"
print("ok")
"""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "WEBGRAD_DEVICE": device,
           "PYTHONPATH": os.pathsep.join(filter(None, [os.path.join(root, "py"), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr
