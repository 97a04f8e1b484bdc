"""The same data as webgrad's and as torch's datasets, and comparisons of webgrad's results with
torch's: what tests/test_utils_data.py and tests/test_utils_data_sampling.py share."""
import collections

import numpy as np
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
