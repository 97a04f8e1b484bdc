"""Stand-ins for testing the WebGPU runtime's policy without a GPU: FakeDriver, which checks every
call the way WebGPU (and the bridge's records) would and logs it; FakeBridge, standing in for
web/bridge.js under browser.py (conftest's fake_runtime and browser_driver make runtimes over them)."""
import itertools
import json
import sys

from webgrad.backends.webgpu import runtime as runtime_module
from webgrad.backends.webgpu.runtime import PARAMS_BYTES, RAISED_LIMITS

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
        self.features = frozenset()   # the optional WebGPU features granted: none, as SwiftShader's
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

    def init(self, raised, reported, features):
        assert list(raised) == [JS_NAMES[k] for k in RAISED_LIMITS], raised
        limits = {JS_NAMES[k]: value for k, value in self.driver.limits.items()}
        return json.dumps({"info": self.driver.info, "limits": {k: limits[k] for k in reported}, "isSoftware": True,
                           "features": [f for f in features if f in self.driver.features]})

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


def kernel(runtime, bindings=("read_write", "read"), name="k"):
    return runtime.pipeline((name, bindings), lambda: "", bindings=bindings)


def blocks_of(params):
    return [params[i: i + PARAMS_BYTES] for i in range(0, len(params), PARAMS_BYTES)]
