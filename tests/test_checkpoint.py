"""Checkpoints in PyTorch's format: wg.save / wg.load of nested objects (state_dicts, optimizer
states, training checkpoints) on both devices, against real torch.save / torch.load in both
directions, views sharing storage, map_location, dtype rules, and hostile files."""
import collections
import io
import math
import os
import pickle
import re
import struct
import warnings
import zipfile

import numpy as np
import pytest
import torch

import webgrad as wg
from conftest import DEVICES, assert_close, rng, seed, tag, to_numpy, wg_tensor
from test_io import _raises_within

OrderedDict = collections.OrderedDict
TORCH_DTYPES = {np.dtype("float32"): torch.float32, np.dtype("float64"): torch.float64, np.dtype("int32"): torch.int32,
                np.dtype("uint8"): torch.uint8, np.dtype("bool"): torch.bool}


# ---- random checkpoints ----
def _arrays(float64):
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


def _checkpoint(device, float64=False):
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
        "arrays": {name: wg_tensor(a, device) for name, a in _arrays(float64).items()},
        "history": [float(v) for v in r.standard_normal(5)],
    }


def _assert_same(got, want, device, path="object"):
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
            _assert_same(got[k], want[k], device, f"{path}[{k!r}]")
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want), tag(f"{path}: length {len(got)} != {len(want)}")
        for i, (g, w) in enumerate(zip(got, want)):
            _assert_same(g, w, device, f"{path}[{i}]")
    elif isinstance(want, float) and math.isnan(want):
        assert math.isnan(got), tag(f"{path}: {got} is not NaN")
    else:
        assert got == want, tag(f"{path}: {got!r} != {want!r}")


def _assert_torch_equal(theirs, ours, path="object"):
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
            _assert_torch_equal(theirs[k], ours[k], f"{path}[{k!r}]")
    elif isinstance(theirs, (list, tuple)):
        assert type(ours) is type(theirs) and len(ours) == len(theirs), tag(f"{path}: {type(ours)} {len(ours)}")
        for i, (t, o) in enumerate(zip(theirs, ours)):
            _assert_torch_equal(t, o, f"{path}[{i}]")
    elif isinstance(theirs, float) and math.isnan(theirs):
        assert math.isnan(ours), tag(path)
    else:
        assert type(ours) is type(theirs) and ours == theirs, tag(f"{path}: {ours!r} vs torch {theirs!r}")


# ---- round trips ----
@pytest.mark.parametrize("target", [None, *DEVICES])
def test_round_trip_of_a_training_checkpoint(device, target, tmp_path):
    """Saved from `device`, loaded back (by default onto the device it came from): the same object."""
    saved = _checkpoint(device, float64=device == "cpu" and target in (None, "cpu"))
    path = tmp_path / "ckpt.pt"
    wg.save(saved, path)
    _assert_same(wg.load(path, map_location=target), saved, target or device)
    _assert_same(wg.load(str(path), target), saved, target or device)


def test_file_objects(device, tmp_path):
    saved = _checkpoint(device)
    buffer = io.BytesIO()
    wg.save(saved, buffer)
    buffer.seek(0)
    _assert_same(wg.load(buffer), saved, device)
    with open(tmp_path / "ckpt.pt", "wb") as f:
        wg.save(saved, f)
    with open(tmp_path / "ckpt.pt", "rb") as f:
        _assert_same(wg.load(f), saved, device)
    assert buffer.getvalue() == (tmp_path / "ckpt.pt").read_bytes(), tag("a path and a file object get the same bytes")


def test_views_and_tied_weights_share_one_storage(device, tmp_path):
    """Views of one storage come back as views of one storage (with torch too), holding only the
    part of it they reach; one tensor saved twice comes back as one tensor."""
    r = rng()
    rows, cols = int(r.integers(3, 8)), int(r.integers(2, 6))
    base = wg_tensor(r.standard_normal((rows, cols)).astype(np.float32), device)
    tied = wg_tensor(r.standard_normal((4, 3)).astype(np.float32), device)
    saved = {"encoder.weight": tied, "decoder.weight": tied.detach(), "same": tied, "again": tied,
             "T": base.T, "middle": base[1:-1], "column": base[1:, 1], "row": base[2],
             "expanded": base[0:1].expand(3, cols), "empty": base[1:1]}
    path = tmp_path / "views.pt"
    wg.save(saved, path)
    with zipfile.ZipFile(path) as archive:
        sizes = sorted(i.file_size for i in archive.infolist() if "/data/" in i.filename)
    assert sizes == sorted([4 * 12, 4 * rows * cols]), tag(f"records of {sizes} bytes: not one per storage")
    loaded = wg.load(path)
    _assert_same(loaded, saved, device)
    assert loaded["same"] is loaded["again"], tag("one tensor saved twice loads as two")
    storages = {id(t._storage) for t in loaded.values()}
    assert len(storages) == 2, tag(f"{len(storages)} storages, saved from 2")
    theirs = torch.load(path)
    _assert_torch_equal(theirs, saved)
    assert len({t.untyped_storage().data_ptr() for t in theirs.values() if t.numel()}) == 2, tag("torch: storages")
    assert theirs["same"] is theirs["again"]


def test_a_view_saves_only_the_elements_it_reaches(device, tmp_path):
    r = rng()
    big = wg_tensor(r.standard_normal((50, 8)).astype(np.float32), device)
    lo, hi = sorted(int(v) for v in r.choice(50, 2, replace=False))
    path = tmp_path / "slice.pt"
    wg.save({"part": big[lo:hi + 1, 2:5]}, path)
    with zipfile.ZipFile(path) as archive:
        (record,) = [i for i in archive.infolist() if "/data/" in i.filename]
    assert record.file_size == 4 * ((hi - lo) * 8 + 3), tag(f"record of {record.file_size} bytes for rows {lo}..{hi}")
    assert_close(wg.load(path)["part"], to_numpy(big)[lo:hi + 1, 2:5], what="the slice")
    assert_close(torch.load(path)["part"], to_numpy(big)[lo:hi + 1, 2:5], what="torch: the slice")


# ---- PyTorch reads webgrad's files ----
@pytest.mark.parametrize("weights_only", [True, False])
def test_torch_loads_webgrad_checkpoints(device, weights_only, tmp_path):
    saved = _checkpoint(device, float64=device == "cpu")
    saved["params"] = [wg_tensor(rng().standard_normal(3).astype(np.float32), device).requires_grad_()]
    path = tmp_path / "webgrad.pt"
    wg.save(saved, path)
    theirs = torch.load(path, weights_only=weights_only)
    _assert_torch_equal(theirs, saved)
    for name, t in theirs["arrays"].items():
        assert t.device.type == "cpu", tag(f"{name} on {t.device}")
    buffer = io.BytesIO()   # and from a file object
    wg.save(saved, buffer)
    buffer.seek(0)
    _assert_torch_equal(torch.load(buffer, weights_only=weights_only), saved)


def test_a_webgrad_model_loads_into_torch(device, tmp_path):
    """A webgrad model's state_dict (running statistics included), saved as .pt, loads strictly into
    the same torch.nn model, which then gives webgrad's outputs."""
    wg.manual_seed(seed())
    ours = wg.nn.Sequential(wg.nn.Linear(5, 7), wg.nn.BatchNorm1d(7), wg.nn.ReLU(), wg.nn.Linear(7, 2)).to(device)
    x = rng().standard_normal((9, 5)).astype(np.float32)
    ours(wg_tensor(x, device))   # a training-mode pass moves the running statistics
    ours.eval()
    wg.save(ours.state_dict(), tmp_path / "model.pt")
    theirs = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.BatchNorm1d(7), torch.nn.ReLU(),
                                 torch.nn.Linear(7, 2)).eval()
    theirs.load_state_dict(torch.load(tmp_path / "model.pt"))
    with torch.no_grad(), wg.no_grad():
        assert_close(ours(wg_tensor(x, device)), theirs(torch.from_numpy(x)), what="torch model from webgrad's file")


def test_torch_memory_maps_webgrad_checkpoints(tmp_path):
    """torch.load(mmap=True) reads storages in place: the records start 64-byte aligned, as torch's do."""
    saved = {name: wg_tensor(a, "cpu") for name, a in _arrays(float64=True).items()}
    path = tmp_path / "m.pt"
    wg.save(saved, path)
    raw = path.read_bytes()
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            name_len, extra_len = struct.unpack("<HH", raw[info.header_offset + 26:info.header_offset + 30])
            start = info.header_offset + 30 + name_len + extra_len
            assert start % 64 == 0, tag(f"{info.filename} starts at byte {start}")
            assert raw[start:start + info.file_size] == archive.read(info), tag(info.filename)
    _assert_torch_equal(torch.load(path, mmap=True), saved)


# ---- webgrad reads PyTorch's files ----
def _torch_tensors():
    """Random torch tensors of every dtype wg.load reads, with views and a parameter."""
    r = rng()
    f32 = torch.from_numpy(r.standard_normal((4, 5)).astype(np.float32))
    return {
        "f32": f32, "T": f32.T, "slice": f32[1:3, 2:], "expanded": f32[0].expand(3, 5),
        "param": torch.nn.Parameter(torch.from_numpy(r.standard_normal(3).astype(np.float32))),
        "i32": torch.from_numpy(r.integers(-2**31, 2**31, 7).astype(np.int32)),
        "i64": torch.from_numpy(np.concatenate([r.integers(-2**31, 2**31, 5), [-2**31, 2**31 - 1]])),
        "i16": torch.from_numpy(r.integers(-2**15, 2**15, 6).astype(np.int16)),
        "i8": torch.from_numpy(r.integers(-128, 128, 6).astype(np.int8)),
        "u8": torch.from_numpy(r.integers(0, 256, (2, 3)).astype(np.uint8)),
        "bool": torch.from_numpy(r.random(5) < 0.5),
        "f16": torch.from_numpy(r.standard_normal(6).astype(np.float16)),
        "bf16": torch.from_numpy(r.standard_normal(6).astype(np.float32)).bfloat16(),
        "f16 specials": torch.tensor([math.inf, -math.inf, math.nan, -0.0, 6e-8, 65504.0], dtype=torch.float16),
        "scalar": torch.tensor(float(r.standard_normal())),
        "empty": torch.zeros(0, 2, dtype=torch.int64),
    }


# what each torch dtype loads as, and torch's own conversion of the values to it
WIDENED = {torch.int64: (np.int32, torch.int32), torch.int16: (np.int32, torch.int32),
           torch.int8: (np.int32, torch.int32), torch.bfloat16: (np.float32, torch.float32)}


def _assert_loaded_from_torch(ours, theirs, device, what):
    for name, t in theirs.items():
        got = ours[name]
        np_dtype, torch_dtype = WIDENED.get(t.dtype, (None, t.dtype))
        want = t.detach().to(torch_dtype).numpy()
        assert isinstance(got, wg.Tensor) and got.device == device, tag(f"{what}: {name} is {got!r:.60}")
        a = to_numpy(got)
        assert a.dtype == want.dtype and a.shape == want.shape, tag(f"{what}: {name} {a.dtype}{a.shape}")
        nan = np.isnan(want) if want.dtype.kind == "f" else np.zeros(want.shape, bool)
        assert np.array_equal(np.isnan(a) if a.dtype.kind == "f" else nan, nan), tag(f"{what}: {name} NaNs")
        assert a[~nan].tobytes() == want[~nan].tobytes(), tag(f"{what}: {name} values")   # torch's own NaN bits vary
        assert got.requires_grad == t.requires_grad, tag(f"{what}: {name} requires_grad")


def test_webgrad_loads_torch_checkpoints(device, tmp_path):
    theirs = _torch_tensors()
    if device == "cpu":
        theirs["f64"] = torch.from_numpy(rng().standard_normal(4))
    path = tmp_path / "torch.pt"
    torch.save(theirs, path)
    ours = wg.load(path, map_location=device)
    _assert_loaded_from_torch(ours, theirs, device, "torch.save file")
    assert ours["T"]._storage is ours["f32"]._storage and ours["slice"]._storage is ours["f32"]._storage, tag(
        "views of one torch storage load as views of one storage")
    buffer = io.BytesIO()
    torch.save(theirs, buffer)
    buffer.seek(0)
    _assert_loaded_from_torch(wg.load(buffer, device), theirs, device, "torch.save file object")


def test_torch_training_state_loads(device, tmp_path):
    """A real model's and optimizer's state_dicts, with torch's _metadata, loads into webgrad
    and goes back to torch unchanged."""
    torch.manual_seed(seed())
    model = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.BatchNorm1d(5), torch.nn.ReLU(), torch.nn.Linear(5, 2))
    opt = torch.optim.AdamW(model.parameters(), lr=0.01, betas=(0.8, 0.95))
    x = torch.from_numpy(rng().standard_normal((8, 3)).astype(np.float32))
    for _ in range(2):
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()
    saved = {"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 2}
    path = tmp_path / "train.pt"
    torch.save(saved, path)
    ours = wg.load(path, map_location=device)
    with_narrowing = {"model": OrderedDict((k, v.int() if v.dtype == torch.int64 else v)
                                           for k, v in saved["model"].items()),
                      "optimizer": saved["optimizer"], "epoch": 2}
    _assert_torch_equal(with_narrowing, ours)
    assert ours["model"]._metadata == saved["model"]._metadata, tag("state_dict._metadata")
    again = tmp_path / "again.pt"
    wg.save(ours, again)
    back = torch.load(again)
    assert back["model"]._metadata == saved["model"]._metadata
    _assert_torch_equal(back, ours)


def test_resume_training_across_torch_and_webgrad(device, tmp_path):
    """torch trains 3 steps and saves; webgrad loads the checkpoint (its model gives torch's outputs)
    and saves it again; torch resumes from webgrad's file and matches a run never interrupted."""
    torch.manual_seed(seed())

    def make():
        return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))

    model = make()
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    r = rng()
    x = torch.from_numpy(r.standard_normal((16, 4)).astype(np.float32))
    y = torch.from_numpy(r.standard_normal((16, 3)).astype(np.float32))

    def step(model, opt):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()

    for _ in range(3):
        step(model, opt)
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 3,
                "args": {"lr": 0.05, "hidden": 8}}, tmp_path / "torch.pt")

    checkpoint = wg.load(tmp_path / "torch.pt", map_location=device)
    ours = wg.nn.Sequential(wg.nn.Linear(4, 8), wg.nn.Tanh(), wg.nn.Linear(8, 3)).to(device)
    ours.load_state_dict(checkpoint["model"])
    with torch.no_grad():
        assert_close(ours(wg_tensor(x.numpy(), device)), model(x), what="webgrad model from torch's checkpoint")
    wg.save(checkpoint, tmp_path / "webgrad.pt")

    resumed = make()
    resumed_opt = torch.optim.Adam(resumed.parameters(), lr=0.05)
    state = torch.load(tmp_path / "webgrad.pt")
    assert state["epoch"] == 3 and state["args"] == {"lr": 0.05, "hidden": 8}
    resumed.load_state_dict(state["model"])
    resumed_opt.load_state_dict(state["optimizer"])
    for _ in range(3):
        step(model, opt)
        step(resumed, resumed_opt)
    for (name, a), b in zip(model.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(a, b), tag(f"{name} after resuming from webgrad's file")


def test_resume_webgrad_training_from_a_checkpoint(device, tmp_path):
    """webgrad trains 3 steps and saves model and optimizer; fresh ones loaded from the file train
    on as the first run does; torch's Adam takes the same file's optimizer state."""
    r = rng()
    x = wg_tensor(r.standard_normal((16, 4)).astype(np.float32), device)
    y = wg_tensor(r.standard_normal((16, 3)).astype(np.float32), device)

    def make():
        model = wg.nn.Sequential(wg.nn.Linear(4, 8), wg.nn.Tanh(), wg.nn.Linear(8, 3)).to(device)
        return model, wg.optim.Adam(model.parameters(), lr=0.05)

    def step(model, opt):
        opt.zero_grad()
        wg.nn.functional.mse_loss(model(x), y).backward()
        opt.step()

    wg.manual_seed(seed())
    model, opt = make()
    for _ in range(3):
        step(model, opt)
    path = tmp_path / "webgrad.pt"
    wg.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 3}, path)

    resumed, resumed_opt = make()
    checkpoint = wg.load(path)
    assert checkpoint["epoch"] == 3
    resumed.load_state_dict(checkpoint["model"])
    resumed_opt.load_state_dict(checkpoint["optimizer"])
    for _ in range(3):
        step(model, opt)
        step(resumed, resumed_opt)
    for (name, a), b in zip(model.state_dict().items(), resumed.state_dict().values()):
        assert_close(b, a, atol=1e-6, rtol=1e-6, what=f"{name} after resuming")

    theirs = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    their_opt = torch.optim.Adam(theirs.parameters(), lr=0.05)
    state = torch.load(path)
    theirs.load_state_dict(state["model"])
    their_opt.load_state_dict(state["optimizer"])
    for i, p in enumerate(theirs.parameters()):
        saved = checkpoint["optimizer"]["state"][i]
        for name in ("exp_avg", "exp_avg_sq"):
            assert_close(their_opt.state[p][name], saved[name], atol=0, rtol=0, what=f"torch's Adam: {i}.{name}")
        assert float(their_opt.state[p]["step"]) == 3.0, tag(f"torch's Adam: {i}.step")


# ---- map_location and dtypes ----
def _relocated(path, location):
    """A copy of a torch.save file whose storages say they were saved on `location` (as on a GPU)."""
    with zipfile.ZipFile(path) as archive:
        records = {i.filename: archive.read(i) for i in archive.infolist()}
    (name,) = [n for n in records if n.endswith("/data.pkl")]
    records[name] = records[name].replace(b"X\x03\x00\x00\x00cpu", b"X" + struct.pack("<I", len(location))
                                          + location.encode())
    out = path.with_name(f"{location.replace(':', '_')}.pt")
    with zipfile.ZipFile(out, "w") as archive:
        for n, data in records.items():
            archive.writestr(n, data)
    return out


def test_map_location(tmp_path):
    w = torch.from_numpy(rng().standard_normal((2, 3)).astype(np.float32))
    torch.save({"w": w}, tmp_path / "cpu.pt")
    cuda = _relocated(tmp_path / "cpu.pt", "cuda:0")
    assert torch.load(cuda, map_location="cpu")["w"].equal(w)   # torch reads the relocated file
    cases = [
        (cuda, None, wg.default_device()),               # an accelerator's tensors: webgrad's default device
        (cuda, {"cuda:0": "cpu"}, "cpu"), (cuda, {"cuda:1": "cpu"}, wg.default_device()),
        (cuda, "webgpu", "webgpu"), (cuda, torch.device("cpu"), "cpu"),
        (cuda, lambda storage, location: storage, "cpu"),   # torch's idiom for "keep it on the cpu"
        (cuda, lambda storage, location: None, wg.default_device()),
        (cuda, lambda storage, location: "webgpu" if location == "cuda:0" else "cpu", "webgpu"),
        (tmp_path / "cpu.pt", None, "cpu"), (tmp_path / "cpu.pt", {"cpu": "webgpu"}, "webgpu"),
    ]
    for path, map_location, device in cases:
        t = wg.load(path, map_location=map_location)["w"]
        assert t.device == device, tag(f"{path.name} with map_location={map_location!r}: on {t.device}")
        assert_close(t, w, what=f"{path.name} with map_location={map_location!r}")
    ours = tmp_path / "ours.pt"
    wg.save({"g": wg.ones(2, device="webgpu"), "c": wg.ones(2, device="cpu")}, ours)
    loaded = wg.load(ours)
    assert (loaded["g"].device, loaded["c"].device) == ("webgpu", "cpu"), tag("each back where it was saved from")
    assert wg.load(ours, {"webgpu": "cpu"})["g"].device == "cpu"
    assert wg.load(ours, device="webgpu")["c"].device == "webgpu"
    with pytest.raises(TypeError, match="not both"):
        wg.load(ours, "cpu", device="cpu")


@pytest.mark.parametrize("target", DEVICES)
def test_int64_beyond_int32_and_float64_on_webgpu_raise_naming_the_tensor(target, tmp_path):
    r = rng()
    big = torch.from_numpy(r.integers(-2**31, 2**31, 4)).clone()
    big[int(r.integers(0, 4))] = int(r.choice([2**31, -2**31 - 1, 2**40]))
    path = tmp_path / "wide.pt"
    torch.save({"fine": torch.ones(3), "step": {"counts": [big]}}, path)
    before = wg.memory_stats(target).get("live_buffers")
    with pytest.raises(OverflowError, match=r"wide.pt: tensor \['step'\]\['counts'\]\[0\]: int64 values"):
        wg.load(path, map_location=target)
    assert wg.memory_stats(target).get("live_buffers") == before, tag("a failed load left tensors behind")
    torch.save({"fine": torch.ones(3), "double": torch.from_numpy(r.standard_normal(3))}, path)
    if target == "cpu":
        assert wg.load(path, map_location="cpu")["double"].dtype is wg.float64
    else:
        with pytest.raises(TypeError, match=r"tensor \['double'\] is float64.*map_location='cpu'"):
            wg.load(path, map_location=target)
        assert wg.memory_stats(target).get("live_buffers") == before, tag("a failed load left tensors behind")


def test_big_endian_files_load(device, tmp_path):
    """A file whose byteorder record says 'big': torch and webgrad read the same values."""
    r = rng()
    arrays = {"f": r.standard_normal(5).astype(np.float32), "i": r.integers(-2**40, 2**40, 3).astype(np.int64) >> 12,
              "h": r.standard_normal(4).astype(np.float16), "b": r.integers(0, 256, 3).astype(np.uint8)}
    names = {"f": torch.FloatStorage, "i": torch.LongStorage, "h": torch.HalfStorage, "b": torch.ByteStorage}
    obj = {k: _Tensor(_Storage(names[k], str(i), a.size), 0, a.shape, (1,)) for i, (k, a) in enumerate(arrays.items())}
    records = {f"data/{i}": a.astype(a.dtype.newbyteorder(">")).tobytes() for i, a in enumerate(arrays.values())}
    path = tmp_path / "big.pt"
    path.write_bytes(_archive(_pickle(obj), byteorder=b"big", **records))
    theirs = torch.load(path)
    ours = wg.load(path, map_location=device)
    for k, a in arrays.items():
        np.testing.assert_array_equal(theirs[k].numpy(), a, err_msg=tag(f"torch: {k}"))
        np.testing.assert_array_equal(to_numpy(ours[k]), a.astype(to_numpy(ours[k]).dtype), err_msg=tag(k))


# ---- what save and load refuse ----
def test_what_save_refuses(tmp_path):
    cases = {"['args']['fn']": {"args": {"fn": len}}, "[1]": [wg.ones(1, device="cpu"), np.zeros(2)],
             "['opt'][0]": {"opt": (collections.defaultdict(list),)}, "the top level": object()}
    for where, obj in cases.items():
        with pytest.raises(TypeError, match=f"at {re.escape(where)}"):
            wg.save(obj, tmp_path / "x.pt")
    with pytest.raises(TypeError, match="metadata"):
        wg.save({"w": wg.ones(1, device="cpu")}, tmp_path / "x.pt", metadata={"a": "b"})
    loop = []
    looped = (loop,)
    loop.append(looped)
    with pytest.raises(ValueError, match="contains itself"):
        wg.save(looped, tmp_path / "loop.pt")
    recursive = {"w": wg.ones(2, device="cpu")}
    recursive["self"] = recursive   # a dict that holds itself saves and loads as one, as in torch
    wg.save(recursive, tmp_path / "r.pt")
    back = wg.load(tmp_path / "r.pt")
    assert back["self"] is back
    assert torch.load(tmp_path / "r.pt")["self"]["self"]["w"].tolist() == [1.0, 1.0]


def test_safetensors_paths_keep_the_safetensors_format(device, tmp_path):
    from safetensors.torch import load_file
    tensors = {name: wg_tensor(a, device) for name, a in _arrays(device == "cpu").items()}
    path = tmp_path / "w.safetensors"
    wg.save(tensors, path, metadata={"note": "x"})
    raw = path.read_bytes()
    assert raw[8:9] == b"{", tag("a safetensors header")
    for name, t in load_file(str(path)).items():
        assert t.numpy().tobytes() == to_numpy(tensors[name]).tobytes(), tag(name)
    _assert_same(wg.load(path, map_location=device), tensors, device)
    with pytest.raises(TypeError, match="no devices to map"):
        wg.load(path, map_location={"cpu": "cpu"})
    with pytest.raises(TypeError, match="list"):
        wg.save({"nested": [tensors["weight"]]}, tmp_path / "n.safetensors")


# ---- hostile files ----
class _Storage:
    """A storage as torch.save pickles one: a persistent id."""

    def __init__(self, kind, key, numel, location="cpu"):
        self.pid = ("storage", kind, key, location, numel)


class _Tensor:
    """A tensor as torch.save pickles one, with any arguments."""

    def __init__(self, storage, offset, size, stride, requires_grad=False, hooks=None):
        self.args = (storage, offset, tuple(size), tuple(stride), requires_grad,
                     OrderedDict() if hooks is None else hooks)


class _TorchPickler(pickle.Pickler):
    """Python's own pickler (protocol 2), writing tensors as torch.save does: an independent writer."""

    def persistent_id(self, obj):
        return obj.pid if isinstance(obj, _Storage) else None

    def reducer_override(self, obj):
        if isinstance(obj, _Tensor):
            return torch._utils._rebuild_tensor_v2, obj.args
        return NotImplemented


def _pickle(obj):
    out = io.BytesIO()
    _TorchPickler(out, protocol=2).dump(obj)
    return out.getvalue()


def _zip(records):
    """A zip archive of name -> bytes, stored as torch.save stores records."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in records.items():
            archive.writestr(name, data)
    return out.getvalue()


def _archive(pickled, byteorder=b"little", **records):
    """A checkpoint archive: data.pkl, byteorder, the given records, version."""
    return _zip({"archive/data.pkl": pickled, "archive/byteorder": byteorder,
                 **{f"archive/{name}": data for name, data in records.items()}, "archive/version": b"3\n"})


FLOATS = np.arange(4, dtype=np.float32).tobytes()
STORAGE = _Storage(torch.FloatStorage, "0", 4)


def _with_tensor(*args, kind=torch.FloatStorage, **kwargs):
    """An archive of {'w': a tensor of the given arguments} over a 4-float record."""
    storage = _Storage(kind, "0", 4) if kind is not torch.FloatStorage else STORAGE
    return _archive(_pickle({"w": _Tensor(storage, *args, **kwargs)}), **{"data/0": FLOATS})


GOOD = _with_tensor(0, (2, 2), (2, 1))
P2 = b"\x80\x02"
SENTINEL = "/tmp/webgrad-checkpoint-test-ran-code"


def _flip(raw, at, mask):
    raw = bytearray(raw)
    raw[at] ^= mask
    return bytes(raw)


def _duplicate_record():
    out = io.BytesIO()
    with pytest.warns(UserWarning), zipfile.ZipFile(out, "w") as archive:
        archive.writestr("archive/data.pkl", _pickle({"a": 1}))
        archive.writestr("archive/data.pkl", _pickle({"a": 2}))
    return out.getvalue()


def _compressed():
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("archive/data.pkl", _pickle({"a": 1}))
    return out.getvalue()


def _legacy():
    out = io.BytesIO()
    torch.save({"w": torch.ones(2)}, out, _use_new_zipfile_serialization=False)
    return out.getvalue()


def _torchscript():
    out = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)   # torch.jit's; the files still exist
        torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), out)
    return out.getvalue()


def _claimed_size(raw, size):
    """raw with the central directory's sizes of data/0 set to size (the local header keeps its own)."""
    at = raw.rfind(b"PK\x01\x02", 0, raw.find(b"archive/data/0", raw.find(b"PK\x01\x02")))
    return raw[:at + 20] + struct.pack("<II", size, size) + raw[at + 28:]


def _global_call(module, name, *args):
    """A pickle that calls module.name(*args): what pickle.loads would run."""
    body = b"c" + f"{module}\n{name}\n".encode() + b"("
    for a in args:
        raw = a.encode()
        body += b"X" + struct.pack("<I", len(raw)) + raw
    return P2 + body + b"tR."


HOSTILE = {
    # not a checkpoint archive
    "empty file": (b"", ValueError, "not a PyTorch checkpoint"),
    "random bytes": (bytes(range(256)) * 4, ValueError, "not a PyTorch checkpoint"),
    "a safetensors file under another name": (b"\x0e\0\0\0\0\0\0\0{}            ", ValueError,
                                              "not a PyTorch checkpoint.*it is a safetensors file"),
    "torch's legacy format": (_legacy(), ValueError, "before torch 1.6"),
    "TorchScript archive": (_torchscript(), ValueError, "TorchScript"),
    "truncated archive": (GOOD[:-30], ValueError, "not a PyTorch checkpoint"),
    "half an archive": (GOOD[:len(GOOD) // 2], ValueError, "not a PyTorch checkpoint"),
    "corrupt storage bytes (CRC)": (_flip(GOOD, GOOD.find(FLOATS) + 5, 0x40), ValueError, "data/0.*corrupt"),
    "compressed record": (_compressed(), ValueError, "compressed"),
    "no data.pkl": (_zip({"archive/version": b"3\n"}), ValueError, "0 data.pkl"),
    "two archives": (_zip({"a/data.pkl": P2 + b"N.", "b/data.pkl": P2 + b"N."}), ValueError, "2 data.pkl"),
    "a record twice": (_duplicate_record(), ValueError, "twice"),
    "bad byteorder": (_archive(P2 + b"N.", byteorder=b"middle"), ValueError, "byteorder"),
    "devices record not JSON": (_archive(P2 + b"N.", webgrad_devices=b"{"), ValueError, "webgrad_devices"),
    "devices record not names": (_archive(P2 + b"N.", webgrad_devices=b'{"0": 1}'), ValueError, "webgrad_devices"),
    "record size claimed 4 GiB": (_claimed_size(GOOD, 2**32 - 4), ValueError, "holds 4294967292 bytes"),
    "record size claimed 4 GiB, as the pickle says": (
        _claimed_size(_archive(_pickle({"w": _Tensor(_Storage(torch.FloatStorage, "0", 2**30 - 1), 0, (4,), (1,))}),
                               **{"data/0": FLOATS}), 2**32 - 4), ValueError, "data/0.*corrupt"),
    # code and classes
    "os.system": (_archive(_global_call("os", "system", f"touch {SENTINEL}")), pickle.UnpicklingError, "os.system"),
    "posix.system": (_archive(_global_call("posix", "system", f"touch {SENTINEL}")), pickle.UnpicklingError,
                     "posix.system"),
    "builtins.exec": (_archive(_global_call("__builtin__", "exec", f"open('{SENTINEL}', 'w')")),
                      pickle.UnpicklingError, "builtins.exec"),
    "builtins.getattr": (_archive(_global_call("builtins", "getattr")), pickle.UnpicklingError, "builtins.getattr"),
    "torch.load": (_archive(_global_call("torch", "load", SENTINEL)), pickle.UnpicklingError, "torch.load"),
    "a class": (_archive(pickle.dumps(collections.Counter(a=1), protocol=2)), pickle.UnpicklingError,
                "collections.Counter"),
    "a numpy array": (_archive(pickle.dumps(np.zeros(2), protocol=2)), pickle.UnpicklingError, "numpy"),
    "complex storage": (_with_tensor(0, (2,), (1,), kind=torch.ComplexFloatStorage), pickle.UnpicklingError,
                        "torch.ComplexFloatStorage"),
    "protocol 4": (_archive(pickle.dumps({"a": [1]}, protocol=4)), pickle.UnpicklingError, "opcode"),
    "unknown opcode": (_archive(P2 + b"\xff."), pickle.UnpicklingError, "opcode"),
    "BUILD on a list": (_archive(P2 + b"]}b."), pickle.UnpicklingError, "BUILD"),
    "APPEND to a dict": (_archive(P2 + b"}Na."), pickle.UnpicklingError, "APPEND"),
    "SETITEM on a list": (_archive(P2 + b"]NNs."), pickle.UnpicklingError, "SETITEM"),
    "REDUCE on a string": (_archive(P2 + b"X\x01\x00\x00\x00a)R."), pickle.UnpicklingError, "REDUCE"),
    # broken pickles
    "empty pickle": (_archive(b""), ValueError, "ends inside"),
    "truncated pickle": (_archive(_pickle({"a": [1, 2]})[:-4]), ValueError, "ends inside"),
    "no STOP": (_archive(P2 + b"N"), ValueError, "ends inside"),
    "stack underflow": (_archive(P2 + b"R."), ValueError, "too few"),
    "tuple without MARK": (_archive(P2 + b"t."), ValueError, "MARK"),
    "memo read first": (_archive(P2 + b"h\x05."), ValueError, "memo entry 5"),
    "string longer than the file": (_archive(P2 + b"X\xff\xff\xff\x7fabc"), ValueError, "ends inside"),
    "string not UTF-8": (_archive(P2 + b"X\x02\x00\x00\x00\xff\xfe."), ValueError, "UTF-8"),
    "GLOBAL without end of line": (_archive(P2 + b"ctorch" + b"a" * 300), ValueError, "end of line"),
    "bytes after STOP": (_archive(P2 + b"N.N."), ValueError, "follow"),
    "objects left after STOP": (_archive(P2 + b"NN."), ValueError, "left|behind"),
    "unhashable key": (_archive(P2 + b"}]Ns."), ValueError, "unhashable"),
    "tuples nested a million deep as a key": (_archive(P2 + b"})" + b"\x85" * 10**6 + b"Ns."), ValueError, "nest"),
    "bad OrderedDict arguments": (_archive(P2 + b"ccollections\nOrderedDict\nK\x01\x85R."), ValueError,
                                  "collections.OrderedDict"),
    "bytes of another encoding": (_archive(P2 + b"c_codecs\nencode\nX\x01\x00\x00\x00aX\x05\x00\x00\x00utf-8\x86R."),
                                  ValueError, "_codecs.encode"),
    # storages and tensors
    "persistent id not a storage": (_archive(P2 + b"X\x01\x00\x00\x00x\x85Q."), ValueError, "persistent id"),
    "persistent id not a tuple": (_archive(P2 + b"NQ."), ValueError, "not a tuple"),
    "storage without a record": (_archive(_pickle({"w": _Tensor(STORAGE, 0, (4,), (1,))})), ValueError,
                                 "no record data/0"),
    "storage larger than its record": (_archive(_pickle({"w": _Tensor(_Storage(torch.FloatStorage, "0", 2**61), 0,
                                                                      (4,), (1,))}), **{"data/0": FLOATS}),
                                       ValueError, "holds 16 bytes"),
    "storage numel not an int": (_archive(_pickle({"w": _Tensor(_Storage(torch.FloatStorage, "0", 4.0), 0, (4,),
                                                                (1,))}), **{"data/0": FLOATS}), ValueError,
                                 "malformed"),
    "one storage as two types": (_archive(_pickle([_Tensor(STORAGE, 0, (4,), (1,)),
                                                   _Tensor(_Storage(torch.IntStorage, "0", 4), 0, (4,), (1,))]),
                                          **{"data/0": FLOATS}), ValueError, "named as"),
    "tensor past its storage": (_with_tensor(1, (4,), (1,)), ValueError, r"tensor \['w'\].*reaches past"),
    "huge size": (_with_tensor(0, (2**40, 2**40), (2**40, 1)), ValueError, "reaches past"),
    "negative offset": (_with_tensor(-1, (2,), (1,)), ValueError, "offset"),
    "negative size": (_with_tensor(0, (-2,), (1,)), ValueError, "size"),
    "stride of another rank": (_with_tensor(0, (2, 2), (1,)), ValueError, "stride"),
    "bool size": (_with_tensor(0, (True,), (1,)), ValueError, "size"),
    "integer tensor requiring grad": (_with_tensor(0, (4,), (1,), True, kind=torch.IntStorage), ValueError,
                                      "requires grad"),
    "hooks not a dict": (_with_tensor(0, (4,), (1,), False, []), ValueError, "hooks"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_files_raise_and_load_nothing(case, device, tmp_path):
    raw, error, match = HOSTILE[case]
    path = tmp_path / "bad.pt"
    path.write_bytes(raw)
    if os.path.exists(SENTINEL):
        os.remove(SENTINEL)
    before = wg.memory_stats(device).get("live_buffers")
    info = _raises_within(3 * len(raw) + 2**20, error, match, wg.load, path, map_location=device)
    assert str(path) in str(info.value), tag(f"the error does not name the file: {info.value}")
    assert not os.path.exists(SENTINEL), tag("loading ran code from the file")
    assert wg.memory_stats(device).get("live_buffers") == before, tag(f"{case}: a failed load left tensors behind")
    with pytest.raises(error):   # and from a file object, named by its type
        wg.load(io.BytesIO(raw), map_location=device)


def test_the_good_base_of_the_hostile_files_loads(device, tmp_path):
    path = tmp_path / "good.pt"
    path.write_bytes(GOOD)
    assert_close(wg.load(path, map_location=device)["w"], np.arange(4, dtype=np.float32).reshape(2, 2))
    assert torch.load(path)["w"].tolist() == [[0, 1], [2, 3]]   # torch reads the hostile files' base too


def test_not_a_file(tmp_path):
    with pytest.raises(IsADirectoryError):
        wg.load(tmp_path)
    with pytest.raises(ValueError, match="/dev/zero: not a regular file"):
        wg.load("/dev/zero")
    with pytest.raises(TypeError, match="path or a binary file"):
        wg.load(3)
    with pytest.raises(TypeError, match="binary mode"):
        wg.load(io.StringIO("text"))
