"""Random checkpoints (nested objects of tensors and Python values, as training saves them) and
their comparisons, for tests/test_checkpoint.py and tests/test_checkpoint_load.py."""
import collections
import math

import numpy as np
import torch

import webgrad as wg
from conftest import rng, tag, to_numpy, wg_tensor

OrderedDict = collections.OrderedDict
TORCH_DTYPES = {np.dtype("float32"): torch.float32, np.dtype("float64"): torch.float64, np.dtype("int32"): torch.int32,
                np.dtype("uint8"): torch.uint8, np.dtype("bool"): torch.bool}


# ---- random checkpoints ----
def random_arrays(float64):
    """Random arrays of every dtype webgrad has (float64 if asked: the cpu device's alone), with edge
    shapes and bit patterns."""
    r = rng()
    arrays = {
        "weight": r.standard_normal((int(r.integers(1, 9)), int(r.integers(1, 9)))).astype(np.float32),
        "scalar": np.asarray(r.standard_normal(), np.float32),
        "ints": np.concatenate([r.integers(-2**31, 2**31, 9), [-2**31, 2**31 - 1]]).astype(np.int32),
        "bytes": r.integers(0, 256, (3, 5)).astype(np.uint8),
        "mask": r.random((2, 3)) < 0.5,
        "empty": np.zeros((0, 3), np.float32),
        "specials": np.array([np.inf, -np.inf, np.nan, -0.0, 1e-45, 3.4028235e38], np.float32),
    }
    if float64:
        arrays["double"] = np.concatenate([r.standard_normal(4), [np.nan, -0.0, 5e-324]])
    return arrays


def random_checkpoint(device, float64=False):
    """A training checkpoint as PyTorch programs save one, of fresh random values."""
    r = rng()
    sizes = [int(r.integers(1, 7)) for _ in range(3)]
    model = OrderedDict()
    for i, (n_in, n_out) in enumerate(zip(sizes, sizes[1:])):
        model[f"layers.{i}.weight"] = wg_tensor(r.standard_normal((n_out, n_in)).astype(np.float32), device)
        model[f"layers.{i}.bias"] = wg_tensor(r.standard_normal(n_out).astype(np.float32), device)
    model["norm.num_batches_tracked"] = wg_tensor(np.asarray(r.integers(0, 1000), np.int32), device)
    state = {i: {"step": wg_tensor(np.asarray(float(r.integers(1, 50)), np.float32), device),
                 "exp_avg": wg_tensor(r.standard_normal(t.shape).astype(np.float32), device),
                 "exp_avg_sq": wg_tensor(r.random(t.shape).astype(np.float32), device)}
             for i, t in enumerate(model.values()) if t.dtype is wg.float32}
    optimizer = {"state": state, "param_groups": [{
        "lr": float(r.uniform(1e-4, 1e-1)), "betas": (0.9, float(r.uniform(0.9, 1))), "eps": 1e-8,
        "weight_decay": 0, "amsgrad": bool(r.random() < 0.5), "foreach": None, "params": list(state)}]}
    return {
        "model": model, "optimizer": optimizer, "epoch": int(r.integers(0, 100)),
        "args": {"name": "mlp-é", "layers": sizes, "lr": float(r.standard_normal()), "seed": -int(r.integers(1, 2**62)),
                 "huge": 3**100, "nothing": None, "flags": (True, False), "nan": float("nan"), "inf": -math.inf,
                 "blob": bytes(r.integers(0, 256, 9).astype(np.uint8)), "no_bytes": b"", "tags": {"a", "b"},
                 "complex": complex(r.standard_normal(), 1.0), "shape": wg.Size(sizes), "nested": [[], [[1]], ()]},
        "arrays": {name: wg_tensor(a, device) for name, a in random_arrays(float64).items()},
        "history": [float(v) for v in r.standard_normal(5)],
    }


def assert_same(got, want, device, path="object"):
    """got (loaded) equals want (saved, webgrad): types, keys in order, numbers (NaN too) and every
    tensor's dtype, shape, device and bytes."""
    assert type(got) is type(want), tag(f"{path}: {type(got).__name__} != {type(want).__name__}")
    if isinstance(want, wg.Tensor):
        assert got.device == device and got.dtype is want.dtype and got.shape == want.shape, tag(
            f"{path}: {got.dtype}{list(got.shape)} on {got.device}, saved {want.dtype}{list(want.shape)}")
        assert to_numpy(got).tobytes() == to_numpy(want).tobytes(), tag(f"{path}: values differ")
        assert got.requires_grad == want.requires_grad, tag(f"{path}: requires_grad")
    elif isinstance(want, dict):
        assert list(got) == list(want), tag(f"{path}: keys {list(got)} != {list(want)}")
        for k in want:
            assert_same(got[k], want[k], device, f"{path}[{k!r}]")
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want), tag(f"{path}: length {len(got)} != {len(want)}")
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, device, f"{path}[{i}]")
    elif isinstance(want, float) and math.isnan(want):
        assert math.isnan(got), tag(f"{path}: {got} is not NaN")
    else:
        assert got == want, tag(f"{path}: {got!r} != {want!r}")


def assert_torch_equal(theirs, ours, path="object"):
    """A torch object (as torch.load read it) equals the webgrad one it was saved from, or the
    webgrad object (as wg.load read it) equals the torch one."""
    if isinstance(theirs, torch.Tensor):
        assert isinstance(ours, wg.Tensor), tag(f"{path}: {type(ours).__name__}, torch has a tensor")
        a = to_numpy(ours)
        assert TORCH_DTYPES[a.dtype] == theirs.dtype and tuple(theirs.shape) == a.shape, tag(
            f"{path}: torch {theirs.dtype}{list(theirs.shape)}, webgrad {ours.dtype}{list(a.shape)}")
        assert theirs.detach().numpy().tobytes() == a.tobytes(), tag(f"{path}: values differ")
        assert theirs.requires_grad == ours.requires_grad, tag(f"{path}: requires_grad")
    elif isinstance(theirs, torch.Size):
        assert type(ours) is wg.Size and tuple(ours) == tuple(theirs), tag(f"{path}: {ours!r} vs {theirs!r}")
    elif isinstance(theirs, dict):
        assert type(ours) is type(theirs) and list(ours) == list(theirs), tag(f"{path}: {type(ours)} keys {list(ours)}")
        for k in theirs:
            assert_torch_equal(theirs[k], ours[k], f"{path}[{k!r}]")
    elif isinstance(theirs, (list, tuple)):
        assert type(ours) is type(theirs) and len(ours) == len(theirs), tag(f"{path}: {type(ours)} {len(ours)}")
        for i, (t, o) in enumerate(zip(theirs, ours)):
            assert_torch_equal(t, o, f"{path}[{i}]")
    elif isinstance(theirs, float) and math.isnan(theirs):
        assert math.isnan(ours), tag(path)
    else:
        assert type(ours) is type(theirs) and ours == theirs, tag(f"{path}: {ours!r} vs torch {theirs!r}")
