"""The matmul tuner (kernels/matmul_tuning.py): it picks the fastest candidate by its timings (fake
ones here: lavapipe's say nothing of a GPU), keeps the choice per adapter in its cache file, reads it
back instead of timing again, ignores a corrupt file with a warning and entries the device cannot
run, and never changes what a product computes."""
import json
import math

import numpy as np
import pytest

import webgrad as wg
from webgrad.backends.webgpu.kernels import matmul as matmul_kernels
from webgrad.backends.webgpu.kernels import matmul_tuning
from conftest import assert_close, randn, rng, tag

# Quick compiles on lavapipe: loops over BK, 4x4 per thread.
CHEAP = (matmul_kernels.MatmulTiles(8, 8, 4, 4, 16), matmul_kernels.MatmulTiles(16, 16, 4, 4, 16))


@pytest.fixture
def backend(monkeypatch):
    backend = wg.get_backend("webgpu")
    monkeypatch.setattr(matmul_tuning, "TUNED_TILES", CHEAP)
    monkeypatch.setattr(matmul_tuning, "TUNED_FROM_MACS", 0)   # lavapipe's products are small
    monkeypatch.setattr(matmul_kernels, "MATMUL_SMALL_MACS", 0)   # the tiled kernels the tuner chooses among
    return backend


def _tuner(backend, path, timer):
    return matmul_tuning.MatmulTuner(backend.runtime, backend.info, backend.is_software, enabled=True,
                                     path=str(path), timer=timer)


def _product(backend, tuner, monkeypatch, m, k, n):
    """a @ b with this tuner, and the float64 product of the same inputs."""
    monkeypatch.setattr(backend, "matmul_tuner", tuner)
    a, b = randn(m, k), randn(k, n)
    out = (wg.tensor(a, device="webgpu") @ wg.tensor(b, device="webgpu")).numpy()
    return out, a.astype(np.float64) @ b


def test_the_fastest_is_kept_cached_and_read_back(backend, monkeypatch, tmp_path):
    path = tmp_path / "tiles.json"
    m, n, k = (int(v) for v in rng().integers(20, 70, size=3))
    k += 600   # long enough that splits are candidates too
    timings, timed = {}, []

    def timer(candidate, run):
        timed.append(candidate)
        return timings.setdefault(candidate, 1.0 + rng().random())
    tuner = _tuner(backend, path, timer)
    tiles = matmul_kernels.matmul_tiles(m, n, 1, backend.is_software)   # as _product's prior
    prior = (tiles, matmul_kernels.matmul_splits(m, n, k, 1, tiles, backend.is_software))
    candidates = tuner.candidates(m, n, k, 1, prior)
    assert len(candidates) >= 3 and any(s > 1 for _, s in candidates), tag(f"candidates {candidates}")
    fastest = candidates[int(rng().integers(1, len(candidates)))]
    timings[fastest] = 0.5
    out, expected = _product(backend, tuner, monkeypatch, m, k, n)
    assert_close(out, expected, atol=1e-4 * math.sqrt(k), rtol=1e-4, what=f"tuned m={m} k={k} n={n}")
    # in turns: a round of every candidate, then the next (a GPU's clock moves while it is tuned)
    assert timed == candidates * matmul_tuning.TUNING_RUNS, tag(f"timed in the order {timed}")
    layouts = next(iter(tuner.chosen))[4]
    assert tuner.choose(m, n, k, 1, layouts, prior, None) == fastest
    saved = json.loads(path.read_text())["adapters"][tuner.adapter]
    assert list(saved.values()) == [[*fastest[0], fastest[1]]], tag(f"cache {saved}")

    # a new process on the same adapter: the cache's choice, for any product of the class, untimed
    def no_timer(candidate, run):
        raise AssertionError("timed although the cache has the class")
    again = _tuner(backend, path, no_timer)
    top = matmul_tuning._bucket(m)   # the largest m of the class
    assert again.choose(top, n, k, 1, layouts, prior, None) == fastest
    out, expected = _product(backend, again, monkeypatch, m, k, n)
    assert_close(out, expected, atol=1e-4 * math.sqrt(k), rtol=1e-4, what="from the cache")


@pytest.mark.parametrize("slower", [1.01, 1.05])
def test_near_ties_go_to_the_earlier_candidate(slower, backend, monkeypatch, tmp_path):
    """A candidate within TUNED_MARGIN of the fastest that comes before it (the prior first) is kept."""
    m, n, k = (int(v) for v in rng().integers(20, 70, size=3))
    k += 600
    tiles = matmul_kernels.matmul_tiles(m, n, 1, backend.is_software)
    prior = (tiles, matmul_kernels.matmul_splits(m, n, k, 1, tiles, backend.is_software))
    candidates = _tuner(backend, tmp_path / "probe.json", None).candidates(m, n, k, 1, prior)
    earlier, fastest = sorted(rng().choice(len(candidates), size=2, replace=False))
    timings = {candidates[fastest]: 0.5, candidates[earlier]: 0.5 * slower}
    tuner = _tuner(backend, tmp_path / "tiles.json", lambda c, run: timings.get(c, 1.0 + rng().random()))
    _product(backend, tuner, monkeypatch, m, k, n)
    kept = candidates[earlier] if slower <= 1 + matmul_tuning.TUNED_MARGIN else candidates[fastest]
    assert list(tuner.chosen.values()) == [kept], tag(f"timings {timings}")


@pytest.mark.parametrize("tiles", sorted({t for tiles in matmul_tuning.TUNED_TILES for t in (tiles, tiles._replace(
    wx=tiles.wy, wy=tiles.wx, tm=tiles.tn, tn=tiles.tm))} - {(16, 16, 8, 8, 8), (16, 8, 8, 8, 8), (8, 16, 8, 8, 8),
                                                             (16, 16, 4, 4, 16), (8, 8, 4, 4, 16)}), ids=str)
def test_every_candidate_tiling_computes_the_product(tiles, monkeypatch):
    """The tilings the tuner may choose that tests/test_ops_matmul.py's table tilings leave out,
    with partial tiles at every edge and an operand read through a transposed view."""
    monkeypatch.setattr(matmul_kernels, "MATMUL_SMALL_MACS", 0)
    monkeypatch.setattr(matmul_kernels, "matmul_tiles", lambda *_: tiles)
    m, k, n = (int(v) for v in rng().integers(1, 150, size=3))
    a, b = randn(m, k), randn(n, k)
    out = wg.tensor(a, device="webgpu") @ wg.tensor(b, device="webgpu").T
    assert_close(out.numpy(), a.astype(np.float64) @ b.T, atol=1e-4 * math.sqrt(k), rtol=1e-4,
                 what=f"{tiles} m={m} k={k} n={n}")


@pytest.mark.parametrize("text", ['{"format": 1, "adapters": {"x": [1, 2', '{"format": 1}', "[1, 2]",
                                  '{"format": 2, "adapters": {}}', '{"format": 1, "adapters": {ADAPTER: 3}}'])
def test_a_corrupt_cache_is_ignored_with_a_warning_and_replaced(text, backend, monkeypatch, tmp_path):
    path = tmp_path / "tiles.json"
    tuner = _tuner(backend, path, lambda candidate, run: 1.0)
    path.write_text(text.replace("ADAPTER", json.dumps(tuner.adapter)))
    with pytest.warns(RuntimeWarning, match="ignoring the matmul tuning cache"):
        out, expected = _product(backend, tuner, monkeypatch, 9, 13, 11)
    assert_close(out, expected, atol=1e-4, rtol=1e-4)
    assert tuner.adapter in json.loads(path.read_text())["adapters"], tag("the file was not rewritten")


def test_entries_the_device_cannot_run_are_ignored(backend, tmp_path):
    path = tmp_path / "tiles.json"
    huge = [32, 32, 16, 16, 32, 1]   # far more workgroup memory than any adapter has
    odd = [8, 8, 4, 4, 16, "two"]
    entries = {"a": huge, "b": [8, 8, 4, 4, 16, 2]}
    path.write_text(json.dumps({"format": 1, "adapters": {_tuner(backend, path, None).adapter: entries}}))
    assert _tuner(backend, path, None)._load() == {"b": (matmul_kernels.MatmulTiles(8, 8, 4, 4, 16), 2)}
    entries["c"] = odd
    path.write_text(json.dumps({"format": 1, "adapters": {_tuner(backend, path, None).adapter: entries}}))
    with pytest.warns(RuntimeWarning, match="ignoring"):
        assert _tuner(backend, path, None)._load() == {}


def test_the_default_timer_chooses_a_candidate(backend, monkeypatch, tmp_path):
    """The default timer (GPU time alone, plus a cost per dispatch) on this adapter's real runs."""
    tuner = matmul_tuning.MatmulTuner(backend.runtime, backend.info, backend.is_software, enabled=True,
                                      path=str(tmp_path / "tiles.json"))
    m, k, n = (int(v) for v in rng().integers(30, 70, size=3))
    out, expected = _product(backend, tuner, monkeypatch, m, k, n)
    assert_close(out, expected, atol=1e-4 * math.sqrt(k), rtol=1e-4)
    ((key, times),) = tuner.timings.items()
    for (tiles, splits), seconds in times.items():   # a split K's pieces are summed by a second dispatch
        least = matmul_tuning.DISPATCH_SECONDS * (1 + (splits > 1))
        assert least < seconds < 1, tag(f"{key}: {tiles}, {splits}: {seconds}")
    assert list(tuner.chosen.values()) == [min(times, key=times.get)]


def test_no_tuning_inside_a_profile_or_a_recording(backend, monkeypatch, tmp_path):
    def timer(candidate, run):
        raise AssertionError("timed inside a profile or a recording")
    tuner = _tuner(backend, tmp_path / "tiles.json", timer)
    with wg.profiler.profile():
        out, expected = _product(backend, tuner, monkeypatch, 12, 10, 7)
    assert_close(out, expected, atol=1e-4, rtol=1e-4)
    a, b = randn(6, 5), randn(5, 4)
    backend.runtime.start_recording()   # as wg.jit's recorded call
    try:
        result = wg.tensor(a, device="webgpu") @ wg.tensor(b, device="webgpu")
    finally:
        backend.runtime.stop_recording()
    assert_close(result.numpy(), a.astype(np.float64) @ b, atol=1e-4, rtol=1e-4)
    assert not tuner.chosen, tag("a choice was made without timing")


def test_every_split_count_that_leaves_enough_k_is_a_candidate(backend, tmp_path):
    """Not only powers of two: the count that fills a GPU's waves (7 for an H100's 36-tile weight
    gradient) is tried, as long as each piece keeps TUNED_MIN_SPLIT_K and all fit TUNED_MAX_GROUPS."""
    m, n = (int(v) for v in rng().integers(20, 70, size=2))
    k = int(rng().integers(5, 20)) * matmul_tuning.TUNED_MIN_SPLIT_K + int(rng().integers(0, 100))
    tiles = matmul_kernels.matmul_tiles(m, n, 1, backend.is_software)
    prior = (tiles, matmul_kernels.matmul_splits(m, n, k, 1, tiles, backend.is_software))
    candidates = _tuner(backend, tmp_path / "tiles.json", None).candidates(m, n, k, 1, prior)
    enough = {s for s in range(2, matmul_tuning.TUNED_MAX_SPLITS + 1) if k // s >= matmul_tuning.TUNED_MIN_SPLIT_K}
    for t in {t for t, _ in candidates[1:]}:   # one workgroup an output here, so only K limits the pieces
        splits = {s for tiles, s in candidates if tiles == t}
        expected = enough | {1, matmul_kernels.matmul_splits(m, n, k, 1, t, backend.is_software)}
        assert splits == expected, tag(f"k={k} {t}: {sorted(splits)} against {sorted(expected)}")


def test_small_products_keep_the_prior(backend, monkeypatch, tmp_path):
    monkeypatch.setattr(matmul_tuning, "TUNED_FROM_MACS", 1 << 20)
    tuner = _tuner(backend, tmp_path / "tiles.json", None)
    prior = (matmul_kernels.MatmulTiles(8, 8, 4, 4, 16), 1)
    assert tuner.choose(64, 128, 127, 1, "layouts", prior, None) == prior   # 2**20 - 2**13 multiply-adds
    with pytest.raises(TypeError):   # past it, the tuner times its candidates (with no run here)
        tuner.choose(64, 128, 128, 1, "layouts", prior, None)


def test_the_setting(monkeypatch):
    for value, software, expected in [("", False, True), ("", True, False), ("0", False, False), ("1", True, True)]:
        monkeypatch.setenv("WEBGRAD_MATMUL_TUNING", value)
        assert matmul_tuning.tuning_enabled(software) is expected, (value, software)
    monkeypatch.setenv("WEBGRAD_MATMUL_TUNING", "yes")
    with pytest.raises(ValueError, match="WEBGRAD_MATMUL_TUNING must be 0 or 1"):
        matmul_tuning.tuning_enabled(False)
    monkeypatch.setenv("WEBGRAD_CACHE_DIR", "/some/where")
    assert matmul_tuning.cache_path() == "/some/where/matmul-tiles.json"


def test_the_gpu_is_warmed_by_the_prior_before_the_candidates_are_timed(backend, monkeypatch, tmp_path):
    """With its own (GPU) timer, the tuner first runs the prior back to back for TUNING_WARM_SECONDS, so
    that the first candidates timed do not meet a clock still coming up; only then are they timed."""
    monkeypatch.setattr(matmul_tuning, "TUNING_WARM_SECONDS", 0.05 + 0.05 * rng().random())
    tuner = _tuner(backend, tmp_path / "tiles.json", None)
    runs, timed_at = [], []
    timer = tuner.timer

    def timing(candidate, run):
        timed_at.append(len(runs))
        return timer(candidate, run)
    tuner.timer = timing
    real = tuner._time

    def counting(candidates, run):
        return real(candidates, lambda *candidate: (runs.append(candidate), run(*candidate))[1])
    monkeypatch.setattr(tuner, "_time", counting)
    m, n, k = (int(v) for v in rng().integers(20, 70, size=3))
    out, expected = _product(backend, tuner, monkeypatch, m, k + 600, n)
    assert_close(out, expected, atol=1e-4 * math.sqrt(k + 600), rtol=1e-4, what="the tuned product")
    candidates = list(dict.fromkeys(runs))
    before_timing = runs[:timed_at[0]]
    warm = before_timing[len(candidates):]   # after each candidate's first run (its compile)
    assert before_timing[:len(candidates)] == candidates, tag(f"compile runs {before_timing[:len(candidates)]}")
    assert len(warm) >= matmul_tuning.WARM_RUNS_QUEUED and set(warm) == {candidates[0]}, tag(f"warm-up {warm}")
    assert len(timed_at) == matmul_tuning.TUNING_RUNS * len(candidates), tag(f"{len(timed_at)} timings")
