"""PyTorch programs run as written on webgrad (tests/programs/): each runs under real torch, then
with `import torch` giving webgrad on the cpu and on the webgpu device, from torch's starting
weights and the same data; what each returns (losses over its steps, parameters after them,
outputs, gradients checked inside) must match torch's."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import seed, tag

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNNER = os.path.join(ROOT, "tests", "programs", "run_program.py")
PROGRAMS = ["gpt", "char_lstm", "mnist_example", "manual_backprop", "checkpoint", "cifar_cnn", "text_transformer", "vae"]
RTOL, ATOL = 2e-3, 2e-4   # float32 over a few optimizer steps


def _run(name, out, device=None, *extra):
    env = {**os.environ, "PROGRAM_SEED": str(seed()),
           "PYTHONPATH": os.pathsep.join(filter(None, [os.path.join(ROOT, "py"), os.environ.get("PYTHONPATH")]))}
    if device:
        env["WEBGRAD_DEVICE"] = device
    proc = subprocess.run([sys.executable, RUNNER, name, str(out), *extra], capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, tag(f"{name} on {device or 'torch'} failed:\n{proc.stderr[-4000:]}")
    with open(out) as f:
        return json.load(f)


def _same(ours, theirs, where):
    if isinstance(theirs, dict):
        assert sorted(ours) == sorted(theirs), tag(where)
        for key in theirs:
            _same(ours[key], theirs[key], f"{where}.{key}")
    elif isinstance(theirs, float) or (isinstance(theirs, list) and np.asarray(theirs).dtype.kind == "f"):
        np.testing.assert_allclose(np.asarray(ours, dtype=np.float64), np.asarray(theirs), rtol=RTOL, atol=ATOL,
                                   err_msg=tag(where))
    else:
        assert ours == theirs, tag(f"{where}: {ours!r} != {theirs!r}")


@pytest.mark.parametrize("device", ["cpu", "webgpu"])
@pytest.mark.parametrize("name", PROGRAMS)
def test_program_matches_torch(name, device, tmp_path):
    init = tmp_path / "init.npz"
    theirs = _run(name, tmp_path / "torch.json", None, "--init-out", str(init))
    ours = _run(name, tmp_path / "webgrad.json", device, "--webgrad", "--init-in", str(init))
    _same(ours, theirs, name)
