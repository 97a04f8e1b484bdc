"""The WebGPU runtime's driver policy (runtime.py): the limits requested, word alignment of reads
and writes, the params arena and its growth, compiles that go on while Python works, and the
bind-group cache and its eviction. The drivers only translate it, so it is tested here, once, over
runtime_fakes.FakeDriver, both directly and through browser.py with FakeBridge standing in for
web/bridge.js (the buffer pool and the real device: test_runtime_pool.py).
"""
import numpy as np
import pytest

from webgrad.backends.webgpu import runtime as runtime_module
from webgrad.backends.webgpu.runtime import (ARENA_MIN_BYTES, MAX_QUEUED, PARAMS_BYTES, RAISED_LIMITS,
                                             REPORTED_LIMITS, Runtime)
from webgrad.backends.webgpu.words import word_aligned, word_window
from conftest import rng, tag
from runtime_fakes import JS_NAMES, WEBGPU_DEFAULT_LIMITS, FakeBridge, FakeDriver, blocks_of, kernel


# ---- limits ----
def test_limits_requested_and_reported(fake_runtime):
    _, runtime = fake_runtime()
    assert set(RAISED_LIMITS) <= set(REPORTED_LIMITS) and set(REPORTED_LIMITS) == set(JS_NAMES)
    assert runtime.limits == WEBGPU_DEFAULT_LIMITS, tag("the limits reach the runtime by their names")
    assert runtime.max_tensor_bytes == 128 << 20


# ---- alignment ----
@pytest.mark.parametrize("offset, nbytes, window", [
    (0, 1, (0, 4)), (3, 1, (0, 4)), (3, 2, (0, 8)), (4, 4, (4, 4)), (5, 7, (4, 8)), (1, 8, (0, 12)), (8, 0, (8, 0)),
])
def test_word_window(offset, nbytes, window):
    assert word_window(offset, nbytes) == window


def test_word_aligned_keeps_the_neighbours():
    g = rng()
    cases = [(0, 0), (0, 4), (0, 1), (1, 1), (3, 1), (3, 2), (2, 4), (5, 7), (1, 8), (4, 9)]
    cases += [(int(g.integers(0, 40)), int(g.integers(0, 40))) for _ in range(40)]
    for offset, n in cases:
        buffer = bytearray(g.integers(0, 256, 96, dtype=np.uint8).tobytes())
        data = g.integers(0, 256, n, dtype=np.uint8).tobytes()
        reads = []

        def read_word(at):
            reads.append(at)
            return buffer[at: at + 4]
        start, span = word_aligned(offset, data, read_word)
        assert start % 4 == 0 and len(span) % 4 == 0 and start <= offset, tag(f"{offset}+{n}")
        want = bytearray(buffer)
        want[offset: offset + n] = data
        buffer[start: start + len(span)] = span
        assert buffer == want, tag(f"a write of {n} bytes at {offset}")
        aligned = offset % 4 == 0 and n % 4 == 0
        assert (reads == []) == (aligned or n == 0), tag(f"{offset}+{n}: read {reads}")


def test_runtime_reads_and_writes_whole_words(fake_runtime):
    # every driver call is word-aligned (FakeDriver checks); the bytes are the ones asked for
    driver, runtime = fake_runtime()
    g = rng()
    for _ in range(30):
        n = int(g.integers(1, 600))
        storage = runtime.alloc(n)
        old = g.integers(0, 256, storage.nbytes, dtype=np.uint8).tobytes()
        runtime.write(storage, old)
        data = g.integers(0, 256, n, dtype=np.uint8).tobytes()
        runtime.write(storage, data)
        want = data + old[n:]   # a write leaves the bytes past its end as they were
        assert driver.buffers[storage.handle] == want, tag(f"write of {n} bytes")
        for _ in range(6):
            offset = int(g.integers(0, storage.nbytes))
            size = int(g.integers(0, storage.nbytes - offset + 1))
            assert bytes(runtime.read(storage, offset, size)) == want[offset: offset + size], tag(f"{offset}+{size}")
    assert runtime.read(storage, 3, 0) == b""


# ---- the params arena ----
def test_parameters_are_whole_blocks_submitted_together(fake_runtime):
    driver, runtime = fake_runtime()
    pipeline = kernel(runtime)
    a, b = runtime.alloc(64), runtime.alloc(64)
    runtime.flush()
    assert not driver.logged("submit"), tag("an empty queue submits nothing")
    g = rng()
    count = int(g.integers(2, MAX_QUEUED))
    words = [[int(w) for w in g.integers(0, 2**32, int(g.integers(0, runtime_module.PARAMS_WORDS + 1)))]
             for _ in range(count)]
    for w in words:
        runtime.dispatch(pipeline, [a, b], w, 1)
    assert not driver.logged("submit"), tag("queued until read or flushed")
    runtime.flush()
    [(_, params, _, dispatches)] = driver.logged("submit")
    assert [d[2] for d in dispatches] == [i * PARAMS_BYTES for i in range(count)]
    for block, w in zip(blocks_of(params), words):
        assert block == np.array(w, np.uint32).tobytes() + bytes(PARAMS_BYTES - 4 * len(w)), tag()
    for _ in range(MAX_QUEUED):
        runtime.dispatch(pipeline, [a, b], [1], 1)
    assert len(driver.logged("submit")) == 2, tag(f"{MAX_QUEUED} queued dispatches submit on their own")


def test_the_arena_grows_between_submits(fake_runtime, monkeypatch):
    # a small arena for the test: four blocks
    monkeypatch.setattr(runtime_module, "ARENA_MIN_BYTES", 4 * PARAMS_BYTES)
    monkeypatch.setattr(runtime_module, "MAX_QUEUED", 1000)
    driver, runtime = fake_runtime()
    pipeline = kernel(runtime)
    a, b = runtime.alloc(64), runtime.alloc(64)
    for i in range(13):
        runtime.dispatch(pipeline, [a, b], [i], 1)
    runtime.flush()
    # the fifth block did not fit: the four queued went first, then came an arena for all five
    # (eight blocks); the thirteenth did not fit: eight more went, and an arena for nine (sixteen)
    assert driver.arenas == [4 * PARAMS_BYTES, 8 * PARAMS_BYTES, 16 * PARAMS_BYTES], tag(str(driver.arenas))
    assert [len(entry[3]) for entry in driver.logged("submit")] == [4, 8, 1], tag()
    kinds = [entry[0] for entry in driver.logged("submit", "arena", "forget")]
    assert kinds == ["arena", "submit", "forget", "arena", "submit", "forget", "arena", "submit"], tag(str(kinds))
    # each submit makes the group anew: the old ones bound the old arena
    assert [len(entry[2]) for entry in driver.logged("submit")] == [1, 1, 1]
    words = [int.from_bytes(block[:4], "little") for entry in driver.logged("submit") for block in blocks_of(entry[1])]
    assert words == list(range(13)), tag("every dispatch's parameters, in order")


def test_a_replay_larger_than_the_arena(fake_runtime):
    driver, runtime = fake_runtime()
    pipeline = kernel(runtime)
    a, b = runtime.alloc(64), runtime.alloc(64)
    size = ARENA_MIN_BYTES // PARAMS_BYTES + int(rng().integers(1, 60))
    runtime.start_recording()
    for i in range(size):
        runtime.dispatch(pipeline, [a, b], [i], 1)
    recording = runtime.stop_recording()
    runtime.flush()
    assert driver.arenas == [ARENA_MIN_BYTES], tag("recording queues no more than MAX_QUEUED at a time")
    eager = int(rng().integers(1, MAX_QUEUED))
    for round_ in range(2):
        before = len(driver.log)
        for _ in range(eager):
            runtime.dispatch(pipeline, [a, b], [7], 1)
        runtime.replay(recording)
        runtime.flush()
        submits = [len(entry[3]) for entry in driver.log[before:] if entry[0] == "submit"]
        if round_ == 0:
            # the eager work goes first, on the old arena; the new one holds both, so that the next
            # round fits in one submit
            assert submits == [eager, size], tag(str(submits))
            assert driver.arenas == [ARENA_MIN_BYTES, runtime_module.arena_size((eager + size) * PARAMS_BYTES)]
        else:
            assert submits == [eager + size] and len(driver.arenas) == 2, tag(str(submits))
        params = driver.logged("submit")[-1][1]
        words = [int.from_bytes(block[:4], "little") for block in blocks_of(params)]
        assert words[-size:] == list(range(size)), tag("the recording's parameters")


def test_a_replay_binds_what_the_recording_binds_now(fake_runtime):
    """A replay queues the groups it noted before, but new ones after the groups start over and where a
    rebind (a jit's new input or output buffer) changed what a dispatch binds; FakeDriver checks each
    group exists on the current arena."""
    driver, runtime = fake_runtime()
    pipeline = kernel(runtime)
    buffers = [runtime.alloc(256) for _ in range(4)]
    g = rng()
    pairs = [tuple(int(i) for i in g.choice(4, 2, replace=False)) for _ in range(int(g.integers(3, 12)))]
    runtime.start_recording()
    for i, j in pairs:
        runtime.dispatch(pipeline, [buffers[i], buffers[j]], [], 1)
    recording = runtime.stop_recording()
    runtime.flush()

    def replayed_handles():
        before = len(driver.log)
        runtime.replay(recording)
        runtime.flush()
        dispatches = [d for entry in driver.log[before:] if entry[0] == "submit" for d in entry[3]]
        return [driver.bind_groups[group][1] for _, group, _, _ in dispatches]
    expected = [(buffers[i].handle, buffers[j].handle) for i, j in pairs]
    assert replayed_handles() == expected, tag()
    made = len(driver.made)
    assert replayed_handles() == expected and len(driver.made) == made, tag("a steady replay makes no group")
    runtime.bind_groups.kept = 0   # the next flush forgets every group
    runtime.dispatch(pipeline, buffers[:2], [], 1)
    runtime.flush()
    assert len(driver.logged("forget")) == 1 and not driver.bind_groups, tag()
    runtime.bind_groups.kept = 1 << 20
    assert replayed_handles() == expected, tag("groups made anew after they started over")
    fresh = runtime.alloc(256)
    sites = recording.sites(buffers[pairs[0][0]])
    recording.rebind(buffers[pairs[0][0]], fresh, sites)
    expected = [tuple(fresh.handle if (k, slot) in sites else h for slot, h in enumerate(handles))
                for k, handles in enumerate(expected)]
    assert replayed_handles() == expected, tag("a rebound buffer is bound where the recording read the old one")


# ---- compiles that go on while Python works (the browser's) ----
def test_a_submit_waits_for_the_compiles_of_the_kernels_it_runs(browser_driver):
    driver = FakeDriver()
    runtime = Runtime(browser_driver(FakeBridge(driver)))
    g = rng()
    pipelines = [kernel(runtime, name=f"k{i}") for i in range(int(g.integers(3, 8)))]
    assert not driver.logged("compiled"), tag("no compile is waited for where it starts")
    a, b = runtime.alloc(64), runtime.alloc(64)
    run = [p for p in pipelines if g.integers(0, 2)] or pipelines[:1]
    for pipeline in run:
        runtime.dispatch(pipeline, [a, b], [], 1)
    runtime.flush()
    assert [entry[0] for entry in driver.log[-len(run) - 1:]] == ["compiled"] * len(run) + ["submit"], tag()
    assert sorted(entry[1] for entry in driver.logged("compiled")) == sorted(run), \
        tag("only the kernels the submit runs are waited for")
    rest = [p for p in pipelines if p not in run]
    for pipeline in rest + run:
        runtime.dispatch(pipeline, [a, b], [], 1)
    runtime.flush()
    assert sorted(entry[1] for entry in driver.logged("compiled")) == sorted(pipelines), tag("each compile once")
    assert [len(entry[3]) for entry in driver.logged("submit")] == [len(run), len(pipelines)]


def test_a_kernel_that_fails_to_compile_is_named_at_the_submit_that_runs_it(browser_driver):
    driver = FakeDriver()
    runtime = Runtime(browser_driver(FakeBridge(driver)))
    good = kernel(runtime, name="good")
    broken = runtime.pipeline(("broken_family", 3), lambda: "BROKEN", entry="forward")
    a, b = runtime.alloc(64), runtime.alloc(64)
    runtime.dispatch(good, [a, b], [], 1)
    runtime.dispatch(broken, [a, b], [], 1)
    with pytest.raises(RuntimeError, match=r"(?s)kernel broken_family \(shaders/broken_family.wgsl, "
                                           r"entry point 'forward'\) failed to compile:\nerror at line 1:1"):
        runtime.read(a, 0, 4)
    assert not driver.logged("submit"), tag("nothing of a submit with a broken kernel runs")
    with pytest.raises(RuntimeError, match="broken_family"):
        runtime.flush()   # the queue still holds it: every submit says so, none runs it


def test_work_run_to_compile_ahead_starts_the_compiles_and_is_dropped(browser_driver):
    driver = FakeDriver()
    browser = browser_driver(FakeBridge(driver))
    runtime = Runtime(browser)
    a, b = runtime.alloc(64), runtime.alloc(64)
    g = rng()
    pipelines = [kernel(runtime, name=f"k{i}") for i in range(int(g.integers(2, 6)))]
    browser.compiling_ahead = True
    for pipeline in pipelines:
        runtime.dispatch(pipeline, [a, b], [], 1)
    runtime.sync()
    assert not driver.logged("submit", "compiled") and driver.logged("groups only"), \
        tag("nothing runs, nothing is waited for")
    assert set(driver.bind_groups) == set(runtime.bind_groups.ids.values()), tag("its bind groups are made")
    browser.compiling_ahead = False
    data = g.integers(0, 256, 64, dtype=np.uint8).tobytes()
    runtime.write(a, data)
    runtime.dispatch(pipelines[-1], [a, b], [], 1)
    assert runtime.read(a, 0, 64) == data
    [(_, _, new, dispatches)] = driver.logged("submit")
    assert new == () and len(dispatches) == 1, tag("the next work reuses the groups and waits for its kernel")


# ---- bind groups ----
def test_bind_groups_are_shared_by_layout_and_go_with_their_buffers(fake_runtime):
    driver, runtime = fake_runtime()
    first, second = kernel(runtime, name="first"), kernel(runtime, name="second")   # one layout
    other = kernel(runtime, ("read_write", "read_write"), name="other")
    x, y, z = (runtime.alloc(256 * (i + 1)) for i in range(3))
    for _ in range(2):
        runtime.dispatch(first, [x, y], [], 1)
        runtime.dispatch(second, [x, y], [], 1)
        runtime.dispatch(other, [x, y], [], 1)
        runtime.dispatch(first, [y, x], [], 1)
        runtime.dispatch(first, [z, y], [], 1)
    runtime.flush()
    [(_, _, new, dispatches)] = driver.logged("submit")
    groups = [d[1] for d in dispatches]
    assert groups[:5] == groups[5:] and groups[0] == groups[1] and len(set(groups)) == 4, tag(str(groups))
    assert sorted(g for g, _, _ in new) == sorted(set(groups)), tag("each group made once, at its first submit")
    assert set(driver.bind_groups) == set(runtime.bind_groups.ids.values())

    handle = x.handle
    del x
    runtime.empty_pool()   # destroys x: its three groups go, exactly (FakeDriver checks)
    [(_, destroyed, ids)] = driver.logged("destroy")
    assert destroyed == handle and len(ids) == 3, tag(str(ids))
    assert set(driver.bind_groups) == set(runtime.bind_groups.ids.values()) == {groups[4]}
    runtime.dispatch(first, [z, y], [], 1)
    runtime.flush()
    new, dispatches = driver.logged("submit")[-1][2:]
    assert new == () and dispatches[0][1] == groups[4], tag("the group of z and y is reused")


def test_bind_groups_start_over_past_their_limit(fake_runtime):
    driver, runtime = fake_runtime()
    kept = int(rng().integers(5, 20))
    runtime.bind_groups.kept = kept
    pipeline = kernel(runtime)
    buffers = [runtime.alloc(256) for _ in range(kept + 2)]
    per_submit = int(rng().integers(1, 4))
    made = 0
    for i in range(kept + 1):
        runtime.dispatch(pipeline, [buffers[i], buffers[i + 1]], [], 1)
        made += 1
        if made % per_submit == 0 or i == kept:
            runtime.flush()
            over = made > kept
            assert len(driver.logged("forget")) == over, tag(f"{made} groups, at most {kept} kept")
            assert len(runtime.bind_groups) == (0 if over else made) == len(driver.bind_groups), tag()
    # the next dispatch of a combination seen before makes a group anew, with a new id
    runtime.dispatch(pipeline, [buffers[0], buffers[1]], [], 1)
    runtime.flush()
    [(group, _, handles)] = driver.logged("submit")[-1][2]
    assert handles == (buffers[0].handle, buffers[1].handle) and group == max(driver.made), tag()
