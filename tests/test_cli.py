"""`python -m webgrad train ...`: a real subprocess, the in-process entry point, and bad options."""
import os
import re
import subprocess
import sys

import pytest

from webgrad import cli
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
