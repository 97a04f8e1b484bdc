"""`python -m webgrad train ...`: a real subprocess, the in-process entry point, and bad options."""
import os
import re
import subprocess
import sys

import pytest

from webgrad import cli, cli_gpt, data
from conftest import seed

# `device` is conftest's fixture: every test runs on cpu and webgpu
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FINAL = re.compile(r"test accuracy: (\d\.\d{4})")


def test_module_trains_xor(device):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.path.join(ROOT, "py"),
                                                                    os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-m", "webgrad", "train", "xor", "--device", device],
                          capture_output=True, env=env, timeout=300)
    out, err = proc.stdout.decode(), proc.stderr.decode()   # bytes: text mode would turn \r into \n
    assert proc.returncode == 0, err
    match = FINAL.fullmatch(out.splitlines()[-1])
    assert match and float(match.group(1)) == 1.0, out
    # the bar is redrawn in place about every 5% and ends on the last step
    assert err.count("\r") == 20 and err.endswith("\n") and "step 500/500  loss " in err.split("\r")[-1]


def test_options_reach_train(device, capsys):
    s = seed()
    argv = ["train", "circles", "--device", device, "--hidden", "6", "--activation", "relu", "--optimizer", "sgd",
            "--lr", "0.2", "--steps", "40", "--batch-size", "16", "--samples", "120", "--test-ratio", "0.25",
            "--noise", "0.1", "--seed", str(s)]
    assert cli.main(argv) == 0
    out, err = capsys.readouterr()
    match = FINAL.fullmatch(out.splitlines()[-1])
    expected = cli.train("circles", device, (6,), "relu", 0.2, "sgd", 40, 16, 0.1, s, 120, 0.25)
    assert match and match.group(1) == f"{expected:.4f}"
    assert "step 40/40" in err and err.count("\r") == 20


@pytest.mark.parametrize("args,message", [
    (["xor", "--hidden", "8,x"], "comma-separated list of positive layer sizes"),
    (["xor", "--hidden", "8,0"], "comma-separated list of positive layer sizes"),
    (["moons"], "invalid choice: 'moons'"),
    (["xor", "--activation", "swish"], "invalid choice: 'swish'"),
    (["xor", "--noise", "2"], "noise must be in"),
    (["xor", "--steps", "0"], "--steps must be positive"),
])
def test_bad_options_exit_with_a_message(device, capsys, args, message):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["train", *args, "--device", device])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize("suffix", [".safetensors", ".pt"])
def test_mnist_save_writes_either_format(tmp_path, suffix):
    """--save writes safetensors (with the accuracy in its metadata) or PyTorch's format, by suffix;
    both load back into the model the run trained, giving the accuracy it reported."""
    import webgrad as wg
    path = tmp_path / f"model{suffix}"
    acc, net = cli.train_mnist("mlp", "cpu", epochs=1, limit=256, test_limit=128, steps=4, seed=seed(), save=path)
    state = wg.load(path)
    assert sorted(state) == sorted(net.state_dict())
    fresh = wg.nn.mnist_mlp(device="cpu")
    fresh.load_state_dict(state)
    assert cli.evaluate(fresh, wg.data.mnist("test", device="cpu", limit=128)) == acc


# ---- the GPT: `train gpt` and `sample` ----
VAL_LOSS = re.compile(r"val loss: (\d+\.\d{4})")
TINY_GPT = ["--layers", "1", "--heads", "2", "--embd", "16", "--block", "8", "--batch-size", "8", "--steps", "6"]


def test_module_trains_a_gpt_on_names_and_saves_it(tmp_path):
    """A real subprocess on cpu: the bar (steps, loss, tokens/s) on stderr, the val loss line last on
    stdout, and a checkpoint that torch.load reads (weights, config, tokenizer)."""
    import torch
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.path.join(ROOT, "py"),
                                                                    os.environ.get("PYTHONPATH")]))}
    path = tmp_path / "names.pt"
    proc = subprocess.run([sys.executable, "-m", "webgrad", "train", "gpt", "--data", "names", "--device", "cpu",
                           *TINY_GPT, "--seed", str(seed()), "--save", str(path)], capture_output=True, env=env,
                          timeout=300)
    out, err = proc.stdout.decode(), proc.stderr.decode()
    assert proc.returncode == 0, err
    match = VAL_LOSS.fullmatch(out.splitlines()[-1])
    assert match and 0 < float(match.group(1)) < 5, out
    assert err.count("\r") == 6 and "step 6/6  loss " in err and " tok/s " in err and f"to {path}" in err, err
    saved = torch.load(path)
    assert saved["model_args"] == {"block_size": 8, "vocab_size": len(saved["tokenizer"]["chars"]), "n_layer": 1,
                                   "n_head": 2, "n_embd": 16, "dropout": 0.0, "bias": True}
    assert f"{saved['val_loss']:.4f}" == match.group(1) and saved["iter_num"] == 6
    assert set(saved["tokenizer"]["chars"]) == set(data.names())
    assert saved["model"]["lm_head.weight"].shape == (saved["model_args"]["vocab_size"], 16)


def test_train_gpt_options_reach_train_gpt(capsys):
    s = seed()
    assert cli.main(["train", "gpt", "--device", "cpu", *TINY_GPT, "--lr", "0.003", "--dropout", "0.1",
                     "--seed", str(s)]) == 0
    out, err = capsys.readouterr()
    expected, model, _ = cli_gpt.train_gpt("names", "cpu", 1, 2, 16, 8, 8, 6, 0.003, 0.1, seed=s)
    assert VAL_LOSS.fullmatch(out.splitlines()[-1]).group(1) == f"{expected:.4f}"
    assert model.config.dropout == 0.1 and "step 6/6" in err


def test_sample_prints_the_prompt_and_its_continuation(device, tmp_path, capsys):
    path = tmp_path / "gpt.pt"
    _, model, tokenizer = cli_gpt.train_gpt("names", "cpu", 1, 2, 16, 8, 8, steps=2, seed=seed(), save=path)
    argv = ["sample", str(path), "--prompt", "Al", "--tokens", "30", "--temperature", "0.8", "--top-k", "5",
            "--device", device, "--seed", str(seed())]
    assert cli.main(argv) == 0
    text = capsys.readouterr().out
    assert text.endswith("\n") and text[:-1].startswith("Al") and len(text[:-1]) == 32
    assert set(text[:-1]) <= set(tokenizer.chars)
    assert text[:-1] == cli_gpt.sample(path, "Al", 30, 0.8, 5, "cpu", seed())   # the same draws on every device
    loaded, _ = cli_gpt.load_gpt(path, device)
    assert not loaded.training and loaded.lm_head.weight.device == device


@pytest.mark.parametrize("args,message", [
    (["train", "gpt", "--layers", "0"], "--layers must be positive"),
    (["train", "gpt", "--block", "-1"], "--block must be positive"),
    (["train", "gpt", "--embd", "30", "--heads", "4", "--steps", "1"], "must be a multiple of n_head"),
    (["train", "gpt", "--hidden", "8"], "--hidden: only for the toy sets"),
    (["train", "gpt", "--optimizer", "sgd"], "--optimizer: only for the toy sets and mnist"),
    (["train", "xor", "--layers", "2", "--block", "4"], "--block, --layers: only for gpt"),
    (["train", "xor", "--save", "x.pt"], "--save: only for mnist and gpt"),
    (["sample", "x.pt", "--tokens", "0"], "--tokens must be positive"),
])
def test_bad_gpt_options_exit_with_a_message(capsys, args, message):
    with pytest.raises(SystemExit) as exit_info:
        cli.main([*args, "--device", "cpu"])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_gpt_missing_files_and_unknown_characters(tmp_path, capsys):
    assert cli.main(["train", "gpt", "--data", str(tmp_path / "none.txt"), "--device", "cpu"]) == 2
    assert "no text file at" in capsys.readouterr().err
    assert cli.main(["sample", str(tmp_path / "none.pt"), "--device", "cpu"]) == 2
    path = tmp_path / "abc.pt"
    (tmp_path / "abc.txt").write_text("abcab" * 40)
    cli_gpt.train_gpt(str(tmp_path / "abc.txt"), "cpu", 1, 1, 8, 4, 4, steps=1, save=path)
    with pytest.raises(SystemExit):
        cli.main(["sample", str(path), "--prompt", "abz", "--device", "cpu"])
    assert "not in the vocabulary: 'z'" in capsys.readouterr().err
