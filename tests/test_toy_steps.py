"""The toy playground's "Steps run" (web/step_settings.js) in the script its controls write
(web/script.js's scriptFor, run by Node): replayed, train_step draws each batch in Python and hands it
to a wg.jit update. Run natively as the page's worker runs it (web/playground.py's Session), the
replayed script trains step for step as the eager one does from the same seed, the DataLoader's last,
smaller batch of each epoch included, while the update's Python runs only while it records: twice for
each batch shape."""
import json
import math
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import webgrad as wg
from conftest import rng, seed, tag

SCRIPT_JS = Path(__file__).resolve().parent.parent / "web" / "script.js"
SETS = {"classification": ["circles", "xor", "gaussians", "spirals"], "regression": ["plane", "multigauss"]}


def toy_script(settings):
    """scriptFor(settings over script.js's DEFAULTS): the script the page's code panel shows."""
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is missing: `make setup` installs it (apt-get install npm)")
    write = ("import(process.argv[1]).then((m) => process.stdout.write("
             "m.scriptFor({ ...m.DEFAULTS, ...JSON.parse(process.argv[2]) })))")
    # script.js is an ES module in a package.json without "type": Node 20 has to be told to look
    done = subprocess.run([node, "--experimental-detect-module", "--input-type=module", "-e", write,
                           SCRIPT_JS.as_uri(), json.dumps(settings)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


class CountedJit(wg.jit):
    """wg.jit that keeps the batch size of each run of its function's Python."""

    def __init__(self, fn, **kwargs):
        self.python_runs = []

        def counted(x, y):
            self.python_runs.append(x.shape[0])
            return fn(x, y)
        super().__init__(counted, **kwargs)


def trained(playground, source, steps):
    """(the session that ran source, train_step()'s loss at each of steps steps, then the frame)."""
    session = playground.Session(source)
    assert session.playable, tag(session.error or session.missing)
    session.points()
    losses = [session.ns["train_step"]().item() for _ in range(steps)]
    return session, losses, np.array(session.frame()[1:])   # all but the Session's step count (still 0)


@pytest.mark.parametrize("problem", SETS)
def test_replayed_toy_steps_train_as_eager_ones(page_module, monkeypatch, problem):
    playground, lm_view = page_module("playground"), page_module("lm_view")
    monkeypatch.setattr(wg, "jit", CountedJit)   # the script's @wg.jit
    r = rng()
    sizes = [b for b in range(12, 49) if 200 % b]   # the training set's 200 points end in a smaller batch
    settings = {"dataset": str(r.choice(SETS[problem])), "batch": int(r.choice(sizes)), "seed": seed() % 100000,
                "optimizer": str(r.choice(["adam", "adamw", "sgd"])), "l1": str(r.choice(["0", "0.001"])),
                "hidden": str(r.choice(["", "4", "8,8"]))}
    scripts = {stepping: toy_script({**settings, "stepping": stepping}) for stepping in ("eager", "replayed")}
    assert "wg.jit" not in scripts["eager"] and lm_view.REPLAY + "def update(x, y):" in scripts["replayed"], tag()

    n_train, batch = 200, settings["batch"]   # scriptFor's 400 points, half of them to train on
    steps = 3 * math.ceil(n_train / batch) + 1   # three epochs: each batch size is replayed
    eager, eager_losses, eager_frame = trained(playground, scripts["eager"], steps)
    replayed, losses, frame = trained(playground, scripts["replayed"], steps)
    assert len(replayed.ns["y_train"]) == n_train, tag(f"{settings}: {len(replayed.ns['y_train'])} points")
    assert not isinstance(eager.ns["train_step"], wg.jit) and isinstance(replayed.ns["update"], wg.jit), tag()

    what = f"{settings}, {steps} steps"
    runs = Counter(replayed.ns["update"].python_runs)
    assert runs == {batch: 2, n_train % batch: 2}, tag(f"{what}: update's Python ran for batches of {runs}")
    assert losses == pytest.approx(eager_losses, rel=1e-5, abs=1e-6), tag(f"{what}: {losses} != {eager_losses}")
    assert all(a != b for a, b in zip(losses, losses[1:])), tag(f"{what}: a batch came twice: {losses}")
    np.testing.assert_allclose(frame, eager_frame, rtol=1e-5, atol=1e-6, err_msg=tag(what))
