"""repr / str / print of tensors against PyTorch's text for the same values, and set_printoptions.

Differences kept on purpose, and normalized here: webgrad's default integer dtype is int32 (torch's
int64), so a non-empty int32 tensor prints no dtype; dtypes print as webgrad.<name>; tensors on the
webgpu device print device='webgpu' (torch's cpu tensors print no device); webgrad's graph nodes are
not named as torch's, so a computed tensor prints requires_grad=True where torch prints grad_fn=<...>.
"""
import re

import numpy as np
import pytest
import torch

import webgrad as wg
from conftest import randn, rng, tag

OPTION_VARIANTS = [dict(precision=2), dict(threshold=10), dict(edgeitems=1), dict(linewidth=40),
                   dict(sci_mode=True), dict(sci_mode=False), dict(profile="short"), dict(profile="full"),
                   dict(edgeitems=0), dict(precision=6, threshold=50, edgeitems=2, linewidth=60)]


@pytest.fixture(autouse=True)
def _default_printoptions():
    yield
    wg.set_printoptions(profile="default")
    torch.set_printoptions(profile="default")


def _suffixes_on_one_line(text):
    return re.sub(r",\n +(?=(?:size|dtype|requires_grad)=)", ", ", text)


def assert_prints_as_torch(a, device, requires_grad=False):
    ours = wg.tensor(a, device=device)
    theirs = torch.from_numpy(np.array(a))
    if requires_grad:
        ours.requires_grad_()
        theirs.requires_grad_()
    expected, actual = repr(theirs), repr(ours)
    assert str(ours) == actual, tag("str and repr differ")
    normalized = re.sub(r",\s+device='webgpu'", "", actual) if device == "webgpu" else actual
    if theirs.numel():
        expected = re.sub(r",\s+dtype=torch\.int32", "", expected)
    if normalized != actual or expected != repr(theirs):   # a suffix fewer may move the others up a line
        expected, normalized = _suffixes_on_one_line(expected), _suffixes_on_one_line(normalized)
    expected = expected.replace("dtype=torch.", "dtype=webgrad.")
    assert normalized == expected, tag(f"shape {np.shape(a)} {np.asarray(a).dtype}:\n{actual}\nexpected\n{expected}")
    if device == "webgpu":
        assert "device='webgpu'" in actual, tag(actual)


# ---- values that reach each number format ----
def _integral(*shape):
    return rng().integers(-300, 300, shape).astype(np.float32)


def _scientific(*shape):   # magnitudes from 1e-6 to 1e9: a max/min ratio past 1000
    return randn(*shape) * np.float32(10.0) ** rng().integers(-6, 10, shape).astype(np.float32)


def _tiny(*shape):
    return randn(*shape) * np.float32(1e-5)


def _huge_integral(*shape):
    return _integral(*shape) * np.float32(1e9)


def _nonfinite(*shape):
    a = randn(*shape).reshape(-1)
    picks = rng().choice(a.size, size=min(a.size, 4), replace=False)
    a[picks] = [np.nan, np.inf, -np.inf, -0.0][:len(picks)]
    return a.reshape(shape)


def _integral_nonfinite(*shape):
    a = _nonfinite(*shape)
    return np.where(np.isfinite(a), np.round(a * 10), a).astype(np.float32)


def _negative_zeros(*shape):
    return np.where(rng().random(shape) < 0.5, np.float32(-0.0), np.float32(0.0))


VALUES = {"fixed": randn, "integral": _integral, "scientific": _scientific, "tiny": _tiny,
          "huge_integral": _huge_integral, "nonfinite": _nonfinite, "integral_nonfinite": _integral_nonfinite,
          "negative_zeros": _negative_zeros}
SHAPES = [(), (1,), (5,), (9,), (1000,), (1001,), (2000,), (3, 30), (40, 40), (2, 1000), (1, 1), (12, 3, 4),
          (11, 10, 10), (2, 3, 4, 5), (4, 5, 6, 7), (6, 7, 8, 9)]


@pytest.mark.parametrize("values", VALUES)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_float32(values, shape, device):
    assert_prints_as_torch(VALUES[values](*shape), device)


@pytest.mark.parametrize("shape", [(0,), (0, 3), (2, 0, 4)], ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_, np.uint8])
def test_empty(shape, dtype, device):
    assert_prints_as_torch(np.zeros(shape, dtype), device)


@pytest.mark.parametrize("shape", [(), (7,), (4, 25), (3000,), (20, 30, 40)], ids=str)
@pytest.mark.parametrize("dtype", ["int32", "bool", "uint8", "float16"])
def test_other_dtypes(dtype, shape, device):
    a = {"int32": lambda: rng().integers(-10**6, 10**6, shape).astype(np.int32),
         "bool": lambda: rng().random(shape) < 0.5,
         "uint8": lambda: rng().integers(0, 256, shape).astype(np.uint8),
         "float16": lambda: (randn(*shape) * 100).astype(np.float16)}[dtype]()
    assert_prints_as_torch(a, device)


@pytest.mark.parametrize("shape", [(), (4,), (3, 30), (2000,), (5, 50)], ids=str)
def test_requires_grad(shape, device):
    assert_prints_as_torch(randn(*shape), device, requires_grad=True)


def test_computed_tensor_prints_requires_grad():
    a = randn(3, 4)
    ours = wg.tensor(a, requires_grad=True) * 2
    theirs = torch.from_numpy(a).requires_grad_() * 2
    assert repr(ours) == re.sub(r"grad_fn=<\w+>", "requires_grad=True", repr(theirs)), tag(repr(ours))


def test_parameter_str_and_print(capsys):
    a = randn(2, 3)
    ours, theirs = wg.nn.Parameter(wg.tensor(a)), torch.nn.Parameter(torch.from_numpy(a))
    assert repr(ours) == repr(theirs) and str(ours) == str(theirs), tag(repr(ours))
    print(ours[0].detach())
    assert capsys.readouterr().out == str(theirs[0].detach()) + "\n"


@pytest.mark.parametrize("options", OPTION_VARIANTS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
@pytest.mark.parametrize("values", ["fixed", "integral", "scientific", "nonfinite"])
@pytest.mark.parametrize("shape", [(), (8,), (30,), (3000,), (4, 20), (6, 7, 8)], ids=str)
def test_printoptions(options, values, shape, device):
    wg.set_printoptions(**options)
    torch.set_printoptions(**options)
    assert wg._tensor_str.get_printoptions() == torch._tensor_str.get_printoptions(), tag()
    assert_prints_as_torch(VALUES[values](*shape), device)
    assert_prints_as_torch(rng().integers(-99, 99, shape).astype(np.int32), device)


def test_set_printoptions_keeps_what_it_is_not_given():
    for module in (wg, torch):
        module.set_printoptions(precision=2, sci_mode=True)
        module.set_printoptions(threshold=5)   # (sci_mode goes back to automatic, as in torch)
    assert wg._tensor_str.get_printoptions() == torch._tensor_str.get_printoptions(), tag()
    assert wg._tensor_str.get_printoptions()["precision"] == 2


def test_summarized_reads_back_only_the_edges(device, monkeypatch):
    x = wg.tensor(randn(300, 400), device=device)
    backend, read = x.backend, []
    download = backend.download
    monkeypatch.setattr(backend, "download", lambda view: read.append(view.numel()) or download(view))
    text = repr(x)
    assert sum(read) <= 36 and text.count("...") == 7, tag(f"read {read} values:\n{text}")   # 6 rows and a gap
