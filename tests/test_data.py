"""webgrad.data: the Playground generators (checked against their geometric definitions),
TensorDataset and DataLoader (coverage, pairing, drop_last, determinism), on both devices."""
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import webgrad as wg
from webgrad import data
from conftest import rng, seed

# `device` is conftest's fixture: every test runs on cpu and webgpu
GENERATORS = [data.xor, data.circles, data.gaussians, data.spirals]
BOUND = {"xor": 5.3, "circles": 5, "gaussians": None, "spirals": 5 + 0.5}  # max |coordinate| * 6 at noise <= 0.5


def _points(split):
    x = np.concatenate([split.x_train.numpy(), split.x_test.numpy()]) * data.toy.SCALE
    y = np.concatenate([split.y_train.numpy(), split.y_test.numpy()])
    return x, y


@pytest.mark.parametrize("make", GENERATORS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("noise", [0.0, 0.5])
def test_shapes_dtypes_balance(device, make, noise):
    n, ratio = int(rng().integers(200, 400)), float(rng().uniform(0.2, 0.6))
    split = make(n=n, noise=noise, seed=seed(), test_ratio=ratio, device=device)
    n_test = round(n * ratio)
    assert split.x_train.shape == (n - n_test, 2) and split.x_test.shape == (n_test, 2)
    assert split.y_train.shape == (n - n_test,) and split.y_test.shape == (n_test,)
    assert split.x_train.dtype is wg.float32 and split.y_train.dtype is wg.int32
    assert {t.device for t in split} == {device}
    x, y = _points(split)
    # half the points are drawn from each class; circles labels the noisy point (as the Playground
    # does), so at noise 0.5 only ~35% are 1 (Monte Carlo, 200,000 points): within 5 sigma of that
    expected = 0.353 if (make.__name__, noise) == ("circles", 0.5) else 0.5
    assert set(np.unique(y)) <= {0, 1}
    for part in (y, split.y_train.numpy(), split.y_test.numpy()):   # shuffled before the split
        assert abs(part.mean() - expected) < 5 * np.sqrt(expected * (1 - expected) / part.size), part.mean()
    if BOUND[make.__name__]:
        assert np.abs(x).max() <= BOUND[make.__name__] + 1e-4


@pytest.mark.parametrize("make", GENERATORS, ids=lambda f: f.__name__)
def test_deterministic_per_seed_and_same_on_both_devices(device, make):
    s = seed()
    a = make(n=100, noise=0.2, seed=s, device=device)
    b = make(n=100, noise=0.2, seed=s, device=device)
    other = make(n=100, noise=0.2, seed=s, device="cpu" if device == "webgpu" else "webgpu")
    c = make(n=100, noise=0.2, seed=s + 1, device=device)
    assert [t.tolist() for t in a] == [t.tolist() for t in b] == [t.tolist() for t in other]
    assert a.x_train.tolist() != c.x_train.tolist()


def test_definitions_without_noise(device):
    s = seed()
    x, y = _points(data.xor(n=400, seed=s, device=device))
    assert np.array_equal(y, (x[:, 0] * x[:, 1] >= 0).astype(np.int32))
    assert np.abs(x).min() >= 0.3 - 1e-5 and np.abs(x).max() <= 5.3 + 1e-5       # 0.3 padding off the axes

    x, y = _points(data.circles(n=400, seed=s, device=device))
    r = np.hypot(x[:, 0], x[:, 1])
    assert np.array_equal(y, (r < 2.5).astype(np.int32)) and y.sum() == 200
    assert not ((r >= 2.5 + 1e-4) & (r < 3.5 - 1e-4)).any() and r.max() <= 5 + 1e-4   # a gap between disc and ring

    x, y = _points(data.gaussians(n=400, seed=s, device=device))
    for label, centre in ((1, 2.0), (0, -2.0)):
        blob = x[y == label]
        np.testing.assert_allclose(blob.mean(0), [centre, centre], atol=0.25)
        np.testing.assert_allclose(blob.std(0), [math.sqrt(0.5)] * 2, rtol=0.2)  # variance 0.5 at noise 0

    x, y = _points(data.spirals(n=400, seed=s, device=device))
    r = np.hypot(x[:, 0], x[:, 1])
    far = r > 0.2
    # on spiral k the angle (as sin/cos place it) is 1.75 turns * r / 5, plus pi for the second spiral
    expected = 1.75 * 2 * math.pi * r / 5 + np.where(y == 1, 0, math.pi)
    turn = np.angle(np.exp(1j * (np.arctan2(x[:, 0], x[:, 1]) - expected)))
    assert np.abs(turn[far]).max() < 1e-3 and r.max() < 5


def test_noise_blurs_labels_and_spreads_points(device):
    s = seed()
    x, y = _points(data.xor(n=400, noise=0.5, seed=s, device=device))
    flipped = (y != (x[:, 0] * x[:, 1] >= 0)).mean()
    assert 0.05 < flipped < 0.5
    x, y = _points(data.gaussians(n=400, noise=0.5, seed=s, device=device))
    assert x[y == 1].std(0) == pytest.approx([2.0, 2.0], rel=0.2)              # variance 4 at noise 0.5


@pytest.mark.parametrize("make", GENERATORS, ids=lambda f: f.__name__)
def test_bad_arguments(device, make):
    for kwargs, message in [(dict(noise=-0.1), "noise must be in"), (dict(test_ratio=1.0), "test_ratio"),
                            (dict(test_ratio=0), "test_ratio"), (dict(n=1), "n must be at least 2")]:
        with pytest.raises(ValueError, match=message):
            make(device=device, **kwargs)


def _indexed(n, device):
    """Rows [i, 2i] paired with label i, so a batch shows which rows it holds and that they stay paired."""
    x = wg.tensor([[float(i), 2.0 * i] for i in range(n)], device=device)
    return data.TensorDataset(x, wg.arange(n, device=device))


def _epoch(loader):
    rows, sizes = [], []
    for xb, yb in loader:
        assert xb.device == yb.device == loader.dataset.device
        labels = yb.tolist()
        assert xb.tolist() == [[float(i), 2.0 * i] for i in labels]
        rows += labels
        sizes.append(len(labels))
    return rows, sizes


@pytest.mark.parametrize("n,batch", [(10, 3), (12, 4), (5, 8), (1, 1), (37, 5)])
@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("shuffle", [False, True])
def test_loader_covers_the_dataset_once_per_epoch(device, n, batch, drop_last, shuffle):
    loader = data.DataLoader(_indexed(n, device), batch_size=batch, shuffle=shuffle, drop_last=drop_last,
                             seed=seed())
    full, rest = divmod(n, batch)
    assert len(loader) == full + (1 if rest and not drop_last else 0)
    epochs = []
    for _ in range(3):
        rows, sizes = _epoch(loader)
        assert len(sizes) == len(loader)
        assert sizes == [batch] * full + ([rest] if rest and not drop_last else [])
        assert len(set(rows)) == len(rows) and set(rows) <= set(range(n))
        if not drop_last:
            assert sorted(rows) == list(range(n))
        if not shuffle:
            assert rows == list(range(len(rows)))
        epochs.append(rows)
    if shuffle and n >= 10:   # a repeated order among 10! is (practically) impossible
        assert epochs[0] != epochs[1] != epochs[2] and epochs[0] != sorted(epochs[0])


def test_shuffle_is_repeatable(device):
    s = seed()
    ds, other = _indexed(20, device), _indexed(20, "cpu" if device == "webgpu" else "webgpu")
    first = [_epoch(data.DataLoader(d, 6, shuffle=True, seed=s))[0] for d in (ds, ds, other)]
    assert first[0] == first[1] == first[2]
    loader = data.DataLoader(ds, 6, shuffle=True)   # no seed: the orders follow webgrad's generator
    runs = []
    for _ in range(2):
        wg.manual_seed(s)
        runs.append([_epoch(loader)[0] for _ in range(2)])
    assert runs[0] == runs[1] and runs[0][0] != runs[0][1]


def test_tensor_dataset(device):
    x, y = wg.randn(6, 2, device=device), wg.arange(6, device=device)
    ds = data.TensorDataset(x, y)
    assert len(ds) == 6 and ds.device == device
    xi, yi = ds[4]
    assert yi.item() == 4 and xi.tolist() == x[4].tolist()
    with pytest.raises(ValueError, match="Size mismatch"):
        data.TensorDataset(x, wg.arange(5, device=device))
    with pytest.raises(ValueError, match="batch_size should be a positive integer"):
        data.DataLoader(ds, batch_size=0)


def test_package_needs_no_numpy(device):
    """nn, optim, data and the CLI import with NumPy unavailable (as under Pyodide), and, on webgpu,
    one training step runs; the cpu device is NumPy and must say so."""
    code = f"""
import sys
sys.modules["numpy"] = None
import webgrad as wg
from webgrad import cli, data, nn, optim
try:
    split = data.xor(n=40, device={device!r})
except ImportError:
    assert {device!r} == "cpu"
    print("ok")
    raise SystemExit
model = nn.mlp([2, 4, 2], "tanh", device={device!r})
opt = optim.Adam(model.parameters())
nn.functional.cross_entropy(model(split.x_train), split.y_train).backward()
opt.step()
for xb, yb in data.DataLoader(data.TensorDataset(split.x_train, split.y_train), 8, shuffle=True):
    pass
assert 0 <= cli.accuracy(model, split.x_test, split.y_test) <= 1
print("ok")
"""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.path.join(root, "py"),
                                                                    os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr
