"""How the page's views run their training steps (web/step_settings.js): eagerly, or replayed with
wg.jit. The MNIST view's Trainer and the language-model view's script, run natively over the page's
own Python (web/mnist_view.py, web/lm_view.py, with a stand-in for Pyodide's to_js): replayed steps
train as eager ones do from the same seed, and replay (their Python runs only while recorded)."""
import gzip
import json

import pytest

import webgrad as wg
from webgrad.data.mnist_dataset import find
from conftest import seed, tag


class _JsBytes:
    """A Uint8Array as Pyodide hands it over."""

    def __init__(self, data):
        self.data = data

    def to_bytes(self):
        return self.data


def _runs(trainer, chunks, size):
    """Each chunk's [steps so far, mean loss, mean batch accuracy], as the page reads them."""
    return [list(trainer.step(size)) for _ in range(chunks)]


def _same_runs(replayed, eager, what):
    for r, e in zip(replayed, eager):
        assert r[0] == e[0], tag(what)
        assert r[1:] == pytest.approx(e[1:], rel=1e-4, abs=1e-5), tag(f"{what}: replayed {replayed}, eager {eager}")


def test_mnist_replayed_steps_train_as_eager_ones(page_module):
    mnist_view = page_module("mnist_view")
    paths = [*find("train"), *find("test")]   # as the page hands them over: unzipped
    files = [_JsBytes(gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes()) for p in paths]
    view = mnist_view.View(*files)
    runs = {}
    for replayed in (False, True):
        view.configure("mlp", 0.003, 64, 100, seed(), replayed)
        runs[replayed] = _runs(view.trainer, 3, 4)
        program_count = len(getattr(view.trainer.train_step, "_programs", {}))
        assert program_count == int(replayed), tag(f"replayed={replayed}: {program_count} recordings")
    _same_runs(runs[True], runs[False], "MNIST MLP, 12 steps")
    assert runs[True][-1][1] < runs[True][0][1], tag(f"the loss falls: {runs[True]}")


def test_lm_script_replays_its_step_when_asked(page_module):
    lm_view = page_module("lm_view")
    settings = dict(corpus="names", n_layer=1, n_head=2, n_embd=32, block_size=16, lr=0.01, batch=16, steps=50,
                    every=25, seed=seed())
    scripts, runs = {}, {}
    for replayed in (False, True):
        scripts[replayed] = lm_view.script({**settings, "replayed": replayed})
        session = lm_view.Session(scripts[replayed])
        runs[replayed] = [list(session.step(4)) for _ in range(3)]
        is_jit = isinstance(session.ns["train_step"], wg.jit)
        assert is_jit == replayed, tag(f"replayed={replayed}: train_step is {session.ns['train_step']!r}")
        json.loads(session.sample("Em", 5, 0.8, 0))   # an eager sample after replayed steps
    assert "@wg.jit\ndef train_step():" in scripts[True] and "wg.jit" not in scripts[False], tag()
    assert scripts[True].replace(lm_view.REPLAY, "") == scripts[False], tag("the decorator is all that differs")
    for r, e in zip(runs[True], runs[False]):
        assert r[0] == e[0] and r[1] == pytest.approx(e[1], rel=1e-4), tag(f"replayed {runs[True]}, eager {runs[False]}")
