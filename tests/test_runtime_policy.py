"""The WebGPU runtime's driver policy (runtime.py): the params arena and its growth, the bind-group
cache and its eviction, the buffer pool's trimming order, word alignment of reads and writes, and
the limits requested. The drivers only translate it, so it is tested here, once:

- over FakeDriver, which checks every call the way WebGPU (and the bridge's records) would and
  logs it, both directly and through browser.py with FakeBridge standing in for web/bridge.js;
- over the native driver on the real device, with results compared against NumPy.
"""
import importlib
import itertools
import json
import sys
import types

import numpy as np
import pytest

from webgrad.backends.webgpu import bind_groups as bind_groups_module, runtime as runtime_module
from webgrad.backends.webgpu.native import NativeDriver
from webgrad.backends.webgpu.runtime import (ARENA_MIN_BYTES, MAX_QUEUED, PARAMS_BYTES, RAISED_LIMITS,
                                             REPORTED_LIMITS, Runtime, f32_bits, word_aligned, word_window)
from conftest import rng, tag

# What a WebGPU adapter offers at least (the spec's defaults).
WEBGPU_DEFAULT_LIMITS = {
    "max_storage_buffer_binding_size": 128 << 20,
    "max_buffer_size": 256 << 20,
    "max_storage_buffers_per_shader_stage": 8,
    "max_compute_workgroup_storage_size": 16384,
    "max_compute_invocations_per_workgroup": 256,
    "max_compute_workgroup_size_x": 256,
    "max_compute_workgroup_size_y": 256,
    "max_compute_workgroups_per_dimension": 65535,
    "min_storage_buffer_offset_alignment": 256,
}
# The same limits as navigator.gpu spells them (GPUSupportedLimits).
JS_NAMES = {
    "max_storage_buffer_binding_size": "maxStorageBufferBindingSize",
    "max_buffer_size": "maxBufferSize",
    "max_storage_buffers_per_shader_stage": "maxStorageBuffersPerShaderStage",
    "max_compute_workgroup_storage_size": "maxComputeWorkgroupStorageSize",
    "max_compute_invocations_per_workgroup": "maxComputeInvocationsPerWorkgroup",
    "max_compute_workgroup_size_x": "maxComputeWorkgroupSizeX",
    "max_compute_workgroup_size_y": "maxComputeWorkgroupSizeY",
    "max_compute_workgroups_per_dimension": "maxComputeWorkgroupsPerDimension",
    "min_storage_buffer_offset_alignment": "minStorageBufferOffsetAlignment",
}


class FakeDriver:
    """A driver without a GPU: buffers are bytearrays. Every call is checked against what WebGPU
    requires and the runtime promises (word-aligned copies, whole params blocks inside the arena,
    bind groups that exist, were made on the current arena and bind live buffers, a destroyed
    buffer's groups named exactly), and logged."""

    def __init__(self):
        self.info = {"name": "fake", "vendor": "", "backend": "fake", "adapter_type": "CPU", "driver": ""}
        self.is_software = True
        self.limits = dict(WEBGPU_DEFAULT_LIMITS)
        self.buffers = {}       # handle -> bytearray
        self.pipelines = {}     # handle -> bindings
        self.bind_groups = {}   # id -> (bindings, buffer handles, the arena's number)
        self.arenas = []        # the sizes of the arenas made, in order
        self.made = set()       # every bind group id ever made
        self.log = []
        self._handles = itertools.count(1)

    def create_buffer(self, size):
        assert size % 4 == 0 and 0 < size <= self.limits["max_buffer_size"], size
        handle = next(self._handles)
        self.buffers[handle] = bytearray(size)
        return handle

    def write_buffer(self, handle, offset, data):
        data = bytes(data)
        assert offset % 4 == 0 and len(data) % 4 == 0 and data, (offset, len(data))
        assert offset + len(data) <= len(self.buffers[handle])
        self.buffers[handle][offset: offset + len(data)] = data
        self.log.append(("write", handle, offset, data))

    def read_buffers(self, regions):
        for handle, offset, size in regions:
            assert offset % 4 == 0 and size % 4 == 0 and size, (offset, size)
            assert offset + size <= len(self.buffers[handle])
        self.log.append(("read", tuple(regions)))
        return b"".join(bytes(self.buffers[handle][offset: offset + size]) for handle, offset, size in regions)

    def destroy_buffer(self, handle, bind_groups):
        binding = [g for g, (_, handles, _) in self.bind_groups.items() if handle in handles]
        assert sorted(bind_groups) == sorted(binding), f"buffer {handle}: told {bind_groups}, bound by {binding}"
        for group in bind_groups:
            del self.bind_groups[group]
        del self.buffers[handle]
        self.log.append(("destroy", handle, tuple(bind_groups)))

    def create_pipeline(self, label, wgsl, entry, bindings):
        handle = next(self._handles)
        self.pipelines[handle] = tuple(bindings)
        return handle

    def create_arena(self, size):
        assert not self.bind_groups, "bind groups of the old arena are still held"
        assert size >= runtime_module.ARENA_MIN_BYTES and size & (size - 1) == 0, size
        self.arenas.append(size)
        self.log.append(("arena", size))

    def forget_bind_groups(self):
        self.bind_groups.clear()
        self.log.append(("forget",))

    def submit(self, params, new_bind_groups, dispatches):
        params = bytes(params)
        assert dispatches and len(params) % PARAMS_BYTES == 0 and len(params) <= self.arenas[-1], len(params)
        arena = len(self.arenas)
        self.make_bind_groups(new_bind_groups)
        alignment, per_dim = self.limits["min_storage_buffer_offset_alignment"], \
            self.limits["max_compute_workgroups_per_dimension"]
        for pipeline, group, offset, grid in dispatches:
            bindings, handles, made_on = self.bind_groups[group]
            assert made_on == arena, f"bind group {group} binds an old arena"
            assert bindings == self.pipelines[pipeline] and all(h in self.buffers for h in handles)
            assert offset % alignment == 0 and offset + PARAMS_BYTES <= len(params), offset
            assert len(grid) == 3 and max(grid) <= per_dim, grid
        self.log.append(("submit", params, tuple(new_bind_groups), tuple(dispatches)))

    def make_bind_groups(self, new_bind_groups):
        for group, pipeline, handles in new_bind_groups:
            assert group not in self.made, f"bind group id {group} handed out twice"
            assert len(handles) == len(self.pipelines[pipeline]) and all(h in self.buffers for h in handles)
            self.bind_groups[group] = (self.pipelines[pipeline], tuple(handles), len(self.arenas))
            self.made.add(group)

    def sync(self):
        self.log.append(("sync",))

    def logged(self, *kinds):
        return [entry for entry in self.log if entry[0] in kinds]


class _JsBytes:
    """A Uint8Array as Pyodide hands it over."""

    def __init__(self, data):
        self._data = data

    def to_bytes(self):
        return self._data


class _FakePromise:
    """A JS promise as FakeBridge hands it over: run_sync (the fixture's) settles it."""

    def __init__(self, settle):
        self.settle = settle


def _js_error(message):
    error = sys.modules["pyodide.ffi"].JsException(message)
    error.message = message
    return error


class FakeBridge:
    """web/bridge.js as browser.py calls it: the arguments decoded by the layout bridge.js documents
    and passed on to a FakeDriver. As bridge.js, it hands out a pipeline's handle before its compile
    ends and a submit waits for the compiles of the kernels it runs (returning a promise); each compile
    ends then, logged as ("compiled", handle). A kernel whose WGSL says BROKEN fails to compile."""

    def __init__(self, driver):
        self.driver = driver
        self.compiling = {}   # handle -> (label, wgsl) of compiles under way

    def init(self, raised, reported):
        assert list(raised) == [JS_NAMES[k] for k in RAISED_LIMITS], raised
        limits = {JS_NAMES[k]: value for k, value in self.driver.limits.items()}
        return json.dumps({"info": self.driver.info, "limits": {k: limits[k] for k in reported}, "isSoftware": True})

    def createBuffer(self, size):
        return self.driver.create_buffer(size)

    def writeBuffer(self, handle, offset, data):
        self.driver.write_buffer(handle, offset, data)

    def readBuffers(self, regions):
        assert len(regions) % 3 == 0 and all(isinstance(n, int) for n in regions), regions
        return _JsBytes(self.driver.read_buffers([tuple(regions[i: i + 3]) for i in range(0, len(regions), 3)]))

    def destroyBuffer(self, handle, groups):
        self.driver.destroy_buffer(handle, list(groups))

    def createPipeline(self, label, wgsl, entry, bindings):
        handle = self.driver.create_pipeline(label, wgsl, entry, bindings.split(","))
        self.compiling[handle] = (label, wgsl)
        return handle

    def createArena(self, size, params_bytes):
        assert params_bytes == PARAMS_BYTES
        self.driver.create_arena(size)

    def forgetBindGroups(self):
        self.driver.forget_bind_groups()

    @staticmethod
    def _groups(records, groups_end):
        groups, i = [], 0
        while i < groups_end:
            group, pipeline, n = records[i: i + 3]
            groups.append((group, pipeline, tuple(records[i + 3: i + 3 + n])))
            i += 3 + n
        assert i == groups_end and (len(records) - groups_end) % 6 == 0
        return groups

    def makeBindGroups(self, records, groups_end):
        self.driver.make_bind_groups(self._groups(records, groups_end))
        self.driver.log.append(("groups only",))

    def submit(self, params, records, groups_end):
        groups = self._groups(records, groups_end)
        dispatches = [(records[j], records[j + 1], records[j + 2], tuple(records[j + 3: j + 6]))
                      for j in range(groups_end, len(records), 6)]
        waits = sorted({pipeline for pipeline, *_ in dispatches if pipeline in self.compiling})
        if not waits:
            return self.driver.submit(params, groups, dispatches)

        def settle():
            for handle in waits:
                label, wgsl = self.compiling[handle]
                if "BROKEN" in wgsl:   # bridge.js made the bind groups before it waited
                    self.driver.make_bind_groups(groups)
                    raise _js_error(f"Error: compile-failed: {label}\nerror at line 1:1: BROKEN is no WGSL")
                del self.compiling[handle]
                self.driver.log.append(("compiled", handle))
            self.driver.submit(params, groups, dispatches)
        return _FakePromise(settle)

    def sync(self):
        self.driver.sync()


@pytest.fixture
def browser_driver(monkeypatch):
    """browser.py's BrowserDriver class, imported with stand-ins for Pyodide and the page's bridge
    module; bridge(fake_bridge) sets the bridge it talks to."""
    ffi = types.ModuleType("pyodide.ffi")
    ffi.JsException = type("JsException", (Exception,), {})
    ffi.run_sync = lambda value: value.settle() if isinstance(value, _FakePromise) else value
    ffi.to_js = lambda value: value
    pyodide = types.ModuleType("pyodide")
    pyodide.ffi = ffi
    bridge_module = types.ModuleType("webgrad_bridge")
    for name, module in (("pyodide", pyodide), ("pyodide.ffi", ffi), ("webgrad_bridge", bridge_module)):
        monkeypatch.setitem(sys.modules, name, module)
    name = "webgrad.backends.webgpu.browser"
    monkeypatch.delitem(sys.modules, name, raising=False)
    module = importlib.import_module(name)

    def make(bridge):
        bridge_module.bridge = bridge
        return module.BrowserDriver()
    yield make
    sys.modules.pop(name, None)


@pytest.fixture(params=["fake", "browser"])
def fake_runtime(request):
    """make() -> (FakeDriver, a Runtime over it): directly, or through browser.py and FakeBridge."""
    def make():
        driver = FakeDriver()
        if request.param == "browser":
            return driver, Runtime(request.getfixturevalue("browser_driver")(FakeBridge(driver)))
        return driver, Runtime(driver)
    return make


def kernel(runtime, bindings=("read_write", "read"), name="k"):
    return runtime.pipeline((name, bindings), lambda: "", bindings=bindings)


def blocks_of(params):
    return [params[i: i + PARAMS_BYTES] for i in range(0, len(params), PARAMS_BYTES)]


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


# ---- the buffer pool ----
def test_a_full_pool_destroys_the_sizes_asked_for_least_recently(fake_runtime):
    driver, runtime = fake_runtime()
    pipeline = kernel(runtime)
    small, middle, large = 1024, 4096, 16384
    a = runtime.alloc(small)
    b = runtime.alloc(middle)
    c1, c2 = runtime.alloc(large), runtime.alloc(large)
    runtime.dispatch(pipeline, [b, c1], [], 1)   # groups that go with b and c1
    runtime.dispatch(pipeline, [a, b], [], 1)
    a2 = runtime.alloc(small)                    # small is now the size asked for last
    order = [b.handle, c1.handle, c2.handle]
    runtime.pool_limit = 2 * small + large       # room for both small ones and one large one
    del a, b, c1, c2, a2
    runtime.flush()
    destroyed = [entry[1] for entry in driver.logged("destroy")]
    # middle goes first, then the larger size's oldest buffer, until the pool fits
    assert destroyed == order[:2], tag(f"destroyed {destroyed}, buffers {order}")
    assert runtime.memory_stats()["pool_bytes"] == 2 * small + large
    assert set(driver.bind_groups) == set(runtime.bind_groups.ids.values()) == set(), tag("both groups went")


def test_a_loop_reuses_its_working_set_past_the_least_pool_limit(fake_runtime, monkeypatch):
    """A step whose buffers add up to more than POOL_LIMIT makes them once: the pool keeps up to
    the most bytes ever live, so later steps create and destroy none."""
    g = rng()
    monkeypatch.setattr(runtime_module, "POOL_LIMIT", 64 << 10)
    driver, runtime = fake_runtime()
    pipeline = kernel(runtime)
    sizes = [int(s) * 4096 for s in g.integers(4, 9, int(g.integers(6, 12)))]   # well over 64 KiB in all

    def step():
        held = [runtime.alloc(size) for size in sizes]
        for i in range(1, len(held)):
            runtime.dispatch(pipeline, [held[i], held[i - 1]], [], 1)
        del held   # all freed, as a step's activations are
        runtime.flush()

    step()
    buffers = set(driver.buffers)
    for _ in range(3):
        step()
    assert set(driver.buffers) == buffers and not driver.logged("destroy"), tag(f"sizes {sizes}")


def test_freed_buffers_are_reused_once_enough_wait_for_a_submit(fake_runtime, monkeypatch):
    """A chain of large ops, each freeing its input: once RELEASED_SUBMIT_BYTES wait, an allocation
    submits early and reuses them, instead of a new buffer per op until the queue is full."""
    g = rng()
    waiting = int(g.integers(2, 5))
    size = 4096 * int(g.integers(1, 4))
    monkeypatch.setattr(runtime_module, "RELEASED_SUBMIT_BYTES", waiting * size)
    driver, runtime = fake_runtime()
    pipeline = kernel(runtime)
    before = len(driver.buffers)
    x = runtime.alloc(size)
    for _ in range(MAX_QUEUED - 2):
        y = runtime.alloc(size)
        runtime.dispatch(pipeline, [y, x], [], 1)
        x = y
    made = len(driver.buffers) - before
    assert made <= waiting + 2, tag(f"{made} buffers for a chain of {MAX_QUEUED - 2} ops")


# ---- everything at once, at random ----
def test_random_work_keeps_the_driver_consistent(fake_runtime, monkeypatch):
    """Random allocations, frees, dispatches, recordings, replays, reads and pool trims with a small
    arena, bind-group limit and pool: every call passes FakeDriver's checks, and after every flush
    the driver holds exactly the bind groups and buffers the runtime accounts for."""
    g = rng()
    monkeypatch.setattr(runtime_module, "ARENA_MIN_BYTES", int(g.choice([2, 4])) * PARAMS_BYTES)
    monkeypatch.setattr(runtime_module, "MAX_QUEUED", int(g.integers(3, 12)))
    driver, runtime = fake_runtime()
    runtime.bind_groups.kept = int(g.integers(3, 12))
    runtime.pool_limit = int(g.integers(1, 6)) * 4096
    pipelines = [kernel(runtime, bindings, name=str(i)) for i, bindings in
                 enumerate([("read_write",), ("read_write", "read"), ("read_write", "read", "read")])]
    live, recordings, values = [], [], {}
    for step in range(400):
        op = g.integers(0, 10) if len(live) >= 3 else 0
        if op < 2:
            storage = runtime.alloc(int(g.integers(1, 3000)))
            data = g.integers(0, 256, int(g.integers(1, storage.nbytes + 1)), dtype=np.uint8).tobytes()
            runtime.write(storage, data)
            live.append(storage)
            values[storage] = data
        elif op < 4:
            storage = live.pop(int(g.integers(0, len(live))))
            values.pop(storage)
        elif op < 7:
            pipeline = pipelines[int(g.integers(0, 3))]
            picked = [live[int(i)] for i in g.integers(0, len(live), len(driver.pipelines[pipeline]))]
            runtime.dispatch(pipeline, picked, [int(step)], int(g.integers(1, 70000)))
        elif op == 7:
            if recordings and g.integers(0, 2):
                runtime.replay(recordings[int(g.integers(0, len(recordings)))])
            else:
                runtime.start_recording()
                for _ in range(int(g.integers(1, 30))):
                    runtime.dispatch(pipelines[0], [live[int(g.integers(0, len(live)))]], [int(step)], 1)
                recordings.append(runtime.stop_recording())
        elif op == 8:
            storage = live[int(g.integers(0, len(live)))]
            n = len(values[storage])
            assert bytes(runtime.read(storage, 0, n)) == values[storage], tag(f"step {step}")
        else:
            runtime.empty_pool() if g.integers(0, 4) == 0 else runtime.flush()
        if op >= 8:   # flushed
            assert set(driver.bind_groups) == set(runtime.bind_groups.ids.values()), tag(f"step {step}")
            stats = runtime.memory_stats()
            assert len(driver.buffers) == stats["live_buffers"] + stats["pool_buffers"], tag(f"step {step}")
    assert driver.logged("destroy") and driver.logged("forget") and len(driver.arenas) > 1, \
        tag("the run did not reach every policy")


# ---- the same policy on the real device ----
# out[i] = a[i] * scale + b[i] over the segment [base, base + n); params: scale (f32 bits), n, base.
AXPB = """
@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x >= p[1]) { return; }
    let i = p[2] + gid.x;
    out[i] = a[i] * bitcast<f32>(p[0]) + b[i];
}
"""


@pytest.fixture(scope="module")
def native():
    """A runtime over a native driver of its own (its bind groups and arena start afresh)."""
    return Runtime(NativeDriver())


def _consistent(runtime):
    assert set(runtime.driver._bind_groups) == set(runtime.bind_groups.ids.values()), tag("driver and runtime groups")
    stats = runtime.memory_stats()
    assert len(runtime.driver._buffers) == stats["live_buffers"] + stats["pool_buffers"], tag(str(stats))


def test_unaligned_reads_and_writes_on_the_device(native):
    g = rng()
    for _ in range(10):
        n = int(g.integers(1, 700))
        storage = native.alloc(n)
        model = bytearray(g.integers(0, 256, storage.nbytes, dtype=np.uint8).tobytes())
        native.write(storage, model)
        for _ in range(8):
            k = int(g.integers(0, n + 1))
            data = g.integers(0, 256, k, dtype=np.uint8).tobytes()
            native.write(storage, [data, bytearray(data), memoryview(data)][k % 3])
            model[:k] = data
            offset = int(g.integers(0, storage.nbytes))
            size = int(g.integers(0, storage.nbytes - offset + 1))
            got = native.read(storage, offset, size)
            assert len(got) == size and bytes(got) == bytes(model[offset: offset + size]), tag(f"{offset}+{size}")
        assert bytes(native.read(storage, 0, storage.nbytes)) == bytes(model)
    _consistent(native)


def test_kernels_through_a_growing_arena_and_evicted_groups(native):
    g = rng()
    n = 8192
    a, b = g.standard_normal(n).astype(np.float32), g.standard_normal(n).astype(np.float32)
    pipeline = native.pipeline(("policy_axpb",), lambda: AXPB, bindings=("read", "read", "read_write"))
    sa, sb = native.alloc(a.nbytes), native.alloc(b.nbytes)
    native.write(sa, a.tobytes())
    native.write(sb, b.tobytes())

    def dispatch(out, scale, lo, hi):
        native.dispatch(pipeline, [sa, sb, out], [f32_bits(scale), hi - lo, lo], -(-(hi - lo) // 64))

    def check(out, want, what):
        got = np.frombuffer(bytes(native.read(out, 0, 4 * n)), np.float32)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, err_msg=tag(what))

    # a recording of more parameter blocks than the arena holds, each over its own segment
    size = 2 * native._arena_bytes // PARAMS_BYTES + int(g.integers(1, 50))
    cuts = np.sort(g.choice(np.arange(1, n), size - 1, replace=False))
    segments = list(zip([0, *cuts.tolist()], [*cuts.tolist(), n]))
    scales = g.standard_normal(size).astype(np.float32)
    out = native.alloc(4 * n)
    native.start_recording()
    for (lo, hi), scale in zip(segments, scales):
        dispatch(out, float(scale), lo, hi)
    recording = native.stop_recording()
    want = np.concatenate([a[lo:hi] * s + b[lo:hi] for (lo, hi), s in zip(segments, scales)])
    check(out, want, "recorded")
    arena = native._arena_bytes
    native.write(out, bytes(4 * n))
    dispatch(out, 2.0, 0, n)                 # eager work before the replay: it shares no submit
    native.replay(recording)
    assert native._arena_bytes > arena, tag("the arena grew")
    check(out, want, "replayed on a grown arena")
    _consistent(native)

    # outputs in ever new combinations: past `kept` the groups start over (the recording's too)
    kept = native.bind_groups.kept = int(g.integers(4, 10))
    outs = []
    for round_ in range(12):
        outs.append(native.alloc(4 * n))
        scale = float(g.standard_normal())
        dispatch(outs[-1], scale, 0, n)
        check(outs[-1], a * np.float32(scale) + b, f"round {round_}")
        assert len(native.driver._bind_groups) <= kept, tag(f"round {round_}")
        _consistent(native)
    native.bind_groups.kept = bind_groups_module.BIND_GROUPS_KEPT
    del outs
    native.empty_pool()      # their groups go with them
    _consistent(native)
    native.replay(recording)
    check(out, want, "replayed after the groups were evicted")
    _consistent(native)
