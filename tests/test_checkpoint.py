"""Checkpoints in PyTorch's format: wg.save / wg.load of nested objects (state_dicts, optimizer
states, training checkpoints) on both devices, against real torch.save / torch.load in both
directions, views sharing storage, and what save refuses (map_location, dtype rules and hostile
files: test_checkpoint_load.py)."""
import collections
import io
import math
import re
import struct
import zipfile

import numpy as np
import pytest
import torch

import webgrad as wg
from conftest import DEVICES, assert_close, rng, seed, tag, to_numpy, wg_tensor
from checkpoints import assert_same, assert_torch_equal, random_arrays, random_checkpoint

OrderedDict = collections.OrderedDict


# ---- round trips ----
@pytest.mark.parametrize("target", [None, *DEVICES])
def test_round_trip_of_a_training_checkpoint(device, target, tmp_path):
    """Saved from `device`, loaded back (by default onto the device it came from): the same object."""
    saved = random_checkpoint(device, float64=device == "cpu" and target in (None, "cpu"))
    path = tmp_path / "ckpt.pt"
    wg.save(saved, path)
    assert_same(wg.load(path, map_location=target), saved, target or device)
    assert_same(wg.load(str(path), target), saved, target or device)


def test_file_objects(device, tmp_path):
    saved = random_checkpoint(device)
    buffer = io.BytesIO()
    wg.save(saved, buffer)
    buffer.seek(0)
    assert_same(wg.load(buffer), saved, device)
    with open(tmp_path / "ckpt.pt", "wb") as f:
        wg.save(saved, f)
    with open(tmp_path / "ckpt.pt", "rb") as f:
        assert_same(wg.load(f), saved, device)
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
    assert_same(loaded, saved, device)
    assert loaded["same"] is loaded["again"], tag("one tensor saved twice loads as two")
    storages = {id(t._storage) for t in loaded.values()}
    assert len(storages) == 2, tag(f"{len(storages)} storages, saved from 2")
    theirs = torch.load(path)
    assert_torch_equal(theirs, saved)
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
    saved = random_checkpoint(device, float64=device == "cpu")
    saved["params"] = [wg_tensor(rng().standard_normal(3).astype(np.float32), device).requires_grad_()]
    path = tmp_path / "webgrad.pt"
    wg.save(saved, path)
    theirs = torch.load(path, weights_only=weights_only)
    assert_torch_equal(theirs, saved)
    for name, t in theirs["arrays"].items():
        assert t.device.type == "cpu", tag(f"{name} on {t.device}")
    buffer = io.BytesIO()   # and from a file object
    wg.save(saved, buffer)
    buffer.seek(0)
    assert_torch_equal(torch.load(buffer, weights_only=weights_only), saved)


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
    saved = {name: wg_tensor(a, "cpu") for name, a in random_arrays(float64=True).items()}
    path = tmp_path / "m.pt"
    wg.save(saved, path)
    raw = path.read_bytes()
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            name_len, extra_len = struct.unpack("<HH", raw[info.header_offset + 26:info.header_offset + 30])
            start = info.header_offset + 30 + name_len + extra_len
            assert start % 64 == 0, tag(f"{info.filename} starts at byte {start}")
            assert raw[start:start + info.file_size] == archive.read(info), tag(info.filename)
    assert_torch_equal(torch.load(path, mmap=True), saved)


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
    assert_torch_equal(with_narrowing, ours)
    assert ours["model"]._metadata == saved["model"]._metadata, tag("state_dict._metadata")
    again = tmp_path / "again.pt"
    wg.save(ours, again)
    back = torch.load(again)
    assert back["model"]._metadata == saved["model"]._metadata
    assert_torch_equal(back, ours)


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
    tensors = {name: wg_tensor(a, device) for name, a in random_arrays(device == "cpu").items()}
    path = tmp_path / "w.safetensors"
    wg.save(tensors, path, metadata={"note": "x"})
    raw = path.read_bytes()
    assert raw[8:9] == b"{", tag("a safetensors header")
    for name, t in load_file(str(path)).items():
        assert t.numpy().tobytes() == to_numpy(tensors[name]).tobytes(), tag(name)
    assert_same(wg.load(path, map_location=device), tensors, device)
    with pytest.raises(TypeError, match="no devices to map"):
        wg.load(path, map_location={"cpu": "cpu"})
    with pytest.raises(TypeError, match="list"):
        wg.save({"nested": [tensors["weight"]]}, tmp_path / "n.safetensors")
