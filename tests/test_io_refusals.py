"""Refusing the wrong file in a user's terms: a file that is no safetensors file or no checkpoint
says what it is instead (not what its bytes would mean read as one), a damaged one says it is
damaged, and a weights file made for another model names the first tensor that differs, where
PyTorch's load_state_dict (the oracle) refuses the same files."""
import gzip

import pytest
import torch

import webgrad as wg
from conftest import rng, tag
from webgrad import nn
from webgrad.io import check_fits, load, save


def _random_tensors(device="cpu"):
    r = rng()
    return {f"layer{i}.weight": wg.tensor(r.standard_normal(tuple(r.integers(1, 6, 2))).astype("float32"), device=device)
            for i in range(int(r.integers(1, 4)))}


def test_random_bytes_are_not_a_safetensors_file(tmp_path):
    """20 MB of noise: its first 8 bytes, read as a header length, mean nothing, so the error must not
    quote them."""
    path = tmp_path / "noise.safetensors"
    path.write_bytes(rng().bytes(20 * 2**20))
    with pytest.raises(ValueError) as info:
        load(path)
    message = str(info.value)
    assert f"{path}: not a safetensors file" in message, tag(message)
    assert "header length" not in message and "valid" not in message, tag(message)


def _checkpoint_bytes(tmp_path):
    path = tmp_path / "model.pt"
    save(_random_tensors(), path)
    return path.read_bytes()


def _safetensors_bytes(tmp_path):
    path = tmp_path / "model.safetensors"
    save(_random_tensors(), path)
    return path.read_bytes()


OTHER_FILES = {
    "a PyTorch checkpoint": (_checkpoint_bytes, "it is a zip archive"),
    "a PNG image": (lambda _: b"\x89PNG\r\n\x1a\n" + rng().bytes(int(rng().integers(100, 5000))), "it is a PNG image"),
    "gzipped data": (lambda _: gzip.compress(rng().bytes(1000)), "it is gzip-compressed"),
    "text": (lambda _: " ".join(rng().choice(["weights", "of", "a", "model", "été"], 200)).encode(), "it is text"),
}


@pytest.mark.parametrize("kind", list(OTHER_FILES))
def test_another_kind_of_file_is_named(kind, tmp_path):
    make, says = OTHER_FILES[kind]
    path = tmp_path / "weights.safetensors"
    path.write_bytes(make(tmp_path))
    with pytest.raises(ValueError, match=f"not a safetensors file: {says}"):
        load(path)


def test_a_damaged_safetensors_file_is_told_apart(tmp_path):
    raw = _safetensors_bytes(tmp_path)
    path = tmp_path / "cut.safetensors"
    path.write_bytes(raw[:-int(rng().integers(1, 4))])
    with pytest.raises(ValueError, match="not a valid safetensors file"):
        load(path)


@pytest.mark.parametrize("kind", ["noise", "a safetensors file", "half a checkpoint"])
def test_what_is_no_checkpoint_says_what_it_is(kind, tmp_path):
    raw = {"noise": lambda: rng().bytes(int(rng().integers(1000, 100_000))),
           "a safetensors file": lambda: _safetensors_bytes(tmp_path),
           "half a checkpoint": lambda: (lambda c: c[:len(c) // 2])(_checkpoint_bytes(tmp_path))}[kind]()
    path = tmp_path / "weights.pt"
    path.write_bytes(raw)
    says = {"noise": r"not a PyTorch checkpoint \(the zip archive torch.save writes\): its bytes are no zip archive",
            "a safetensors file": "not a PyTorch checkpoint.*: it is a safetensors file",
            "half a checkpoint": "not a PyTorch checkpoint: a damaged zip archive"}[kind]
    with pytest.raises(ValueError, match=says):
        load(path)
    try:   # the oracle: PyTorch refuses it too (noise makes it raise all kinds of errors)
        torch.load(path, weights_only=True)
    except Exception:
        pass
    else:
        pytest.fail(f"PyTorch loaded {kind}")


def _mlp(lib, hidden):
    """784-hidden-10, as nn.mnist_mlp lays it out (Flatten first: its Linear layers are 1 and 3)."""
    return lib.nn.Sequential(lib.nn.Flatten(), lib.nn.Linear(784, hidden), lib.nn.ReLU(), lib.nn.Linear(hidden, 10))


def _torch_refuses(state, target):
    try:
        target.load_state_dict({k: torch.from_numpy(v.numpy()) for k, v in state.items()})
    except RuntimeError:
        return True
    return False


def test_a_file_for_another_width_is_made_for_a_different_model(tmp_path):
    r = rng()
    saved, wanted = (int(h) for h in r.integers(1, 64, 2))
    path = tmp_path / "mlp.safetensors"
    save(_mlp(wg, saved).state_dict(), path)
    state, model = load(path, device="cpu"), _mlp(wg, wanted)
    refused = _torch_refuses(state, _mlp(torch, wanted))
    assert refused == (saved != wanted), tag(f"widths {saved}, {wanted}")
    if refused:
        with pytest.raises(ValueError, match=f"{path}: made for a different model: "
                                             f"expected 1.weight {wanted}x784, got {saved}x784"):
            check_fits(state, model, str(path))
    else:
        model.load_state_dict(check_fits(state, model, str(path)))


def test_a_file_for_another_architecture_names_what_differs_is_missing_or_extra():
    hidden = int(rng().integers(1, 64))
    mlp = _mlp(wg, hidden)
    cnn = nn.mnist_cnn(device="cpu").state_dict()   # shares the name 3.weight with the MLP
    assert _torch_refuses(cnn, _mlp(torch, hidden))
    with pytest.raises(ValueError, match=f"cnn.safetensors: made for a different model: "
                                         f"expected 3.weight 10x{hidden}, got 32x16x3x3"):
        check_fits(cnn, mlp, "cnn.safetensors")

    wrapped = {f"net.{k}": v for k, v in mlp.state_dict().items()}   # saved from a model that held it as .net
    assert _torch_refuses(wrapped, _mlp(torch, hidden))
    with pytest.raises(ValueError, match=f"expected 1.weight {hidden}x784, got no tensor of that name "
                                         r"\(the file holds net.1.weight, net.1.bias, net.3.weight, \.\.\.\)"):
        check_fits(wrapped, mlp, "wrapped.safetensors")

    extra = {**mlp.state_dict(), "4.weight": wg.zeros(3, 3)}
    assert _torch_refuses(extra, _mlp(torch, hidden))
    with pytest.raises(ValueError, match="expected the model's 4 tensors, got 5: 4.weight 3x3 too"):
        check_fits(extra, mlp, "extra.safetensors")
