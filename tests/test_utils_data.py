"""webgrad.utils.data against torch.utils.data, run side by side on the same fresh random data:
batches (order, sizes, drop_last, collated structure, values and dtypes), lengths, random_split's
sizes and the exception types of bad arguments (the shuffles and samplers, where torch's randomness
differs: test_utils_data_sampling.py). Tensors live on both devices (conftest's `device` fixture)."""
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
from conftest import rng, tag
from data_pairs import Point, assert_same, assert_same_batches, our_maker, records, tensor_pair
from torch_api import raises_like


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


def test_uint8_samples_collate_like_torch(device):
    """uint8 images (MNIST's, CIFAR's) batch as uint8; odd sizes, so samples share packed words."""
    images = rng().integers(0, 256, (int(rng().integers(2, 6)), 3, 5), dtype=np.uint8)
    ours = wd.default_collate([wg.tensor(image, device=device) for image in images])
    assert ours.device == device
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
