"""Browser WebGPU driver (Pyodide): the driver interface of runtime.py, over web/bridge.js and
navigator.gpu.

The page's worker registers {bridge: new Bridge()} (web/bridge.js) as the JS module
`webgrad_bridge` before webgrad is imported. Calls into JS cost much more than Python calls, so
they are coarse: one per buffer upload, readback or pipeline, and one per submit carrying
everything it needs (the params blob and one Int32Array of records, see submit).

WebGPU's readbacks, device requests and pipeline compiles are async in the browser. Readbacks
and device requests are awaited here with pyodide.ffi.run_sync (JS Promise Integration), so
`.item()` stays synchronous; that requires Python to have been entered through runPythonAsync or
callPromising (the worker's calls are). Compiles are not awaited where they start: a submit waits
for those of the kernels it runs, so the kernels of a step compile side by side.
"""
import array
import json

from pyodide.ffi import JsException, run_sync, to_js

import webgrad_bridge

from .runtime import OPTIONAL_FEATURES, PARAMS_BYTES, RAISED_LIMITS, REPORTED_LIMITS, DeviceLost

_LOST = "device-lost: "   # how bridge.js starts every error once the device is lost
_INTERRUPTED = "KeyboardInterrupt: "   # how bridge.js starts a GPU wait that the page's Stop ended
_COMPILE_FAILED = "compile-failed: "   # how bridge.js starts a submit's error when a kernel it runs did not compile


def _js_name(limit):
    """max_buffer_size -> maxBufferSize, as GPUSupportedLimits spells it."""
    first, *rest = limit.split("_")
    return first + "".join(word.capitalize() for word in rest)


def _python_error(e, what="webgrad: "):
    """The exception to raise for a JS error: DeviceLost for a lost device, KeyboardInterrupt for a
    wait that the page's Stop ended (as if Python had been interrupted there), else a RuntimeError."""
    if _LOST in e.message:
        return DeviceLost(e.message.split(_LOST, 1)[1])
    if _INTERRUPTED in e.message:
        return KeyboardInterrupt(e.message.split(_INTERRUPTED, 1)[1])
    if _COMPILE_FAILED in e.message:
        label, messages = e.message.split(_COMPILE_FAILED, 1)[1].split("\n", 1)
        family, entry = label.split(":", 1)
        return RuntimeError(f"webgpu: kernel {family} (shaders/{family}.wgsl, entry point '{entry}') "
                            f"failed to compile:\n{messages}")
    return RuntimeError(what + e.message)


def _call(fn, *args):
    try:
        return fn(*args)
    except JsException as e:
        raise _python_error(e) from None


def _await(promise_fn, *args):
    try:
        return run_sync(promise_fn(*args))
    except JsException as e:
        raise _python_error(e) from None


class BrowserDriver:
    def __init__(self):
        self._bridge = webgrad_bridge.bridge
        raised, reported = ([_js_name(k) for k in names] for names in (RAISED_LIMITS, REPORTED_LIMITS))
        init = json.loads(_await(self._bridge.init, to_js(raised), to_js(reported), to_js(list(OPTIONAL_FEATURES))))
        self.info = init["info"]
        self.features = frozenset(init["features"])
        self.limits = {k: init["limits"][_js_name(k)] for k in REPORTED_LIMITS}
        self.is_software = init["isSoftware"]
        # True while work runs only to start its kernels' compiles (see submit): the page's worker
        # runs a throwaway training step so while it waits for Play
        self.compiling_ahead = False

    # ---- buffers

    def create_buffer(self, size):
        return _call(self._bridge.createBuffer, size)

    def write_buffer(self, handle, offset, data):
        _call(self._bridge.writeBuffer, handle, offset, to_js(data))

    def read_buffers(self, regions):
        # [handle, offset, size] per region, as JS numbers (offsets may pass 2**31)
        flat = [number for region in regions for number in region]
        return _await(self._bridge.readBuffers, to_js(flat)).to_bytes()

    def destroy_buffer(self, handle, bind_groups):
        self._bridge.destroyBuffer(handle, to_js(bind_groups))

    # ---- pipelines

    def create_pipeline(self, label, wgsl, entry, bindings):
        # the handle comes back at once; the compile goes on in the browser, and the first submit
        # that runs the kernel waits for it (and raises the compiler's messages, if any)
        return _call(self._bridge.createPipeline, label, wgsl, entry, ",".join(bindings))

    # ---- execution

    def create_arena(self, size):
        _call(self._bridge.createArena, size, PARAMS_BYTES)

    def forget_bind_groups(self):
        self._bridge.forgetBindGroups()

    def submit(self, params, new_bind_groups, dispatches, timed=False):
        # records: [id, pipeline, n, buffer handle × n] per new bind group, then from `groups_end`
        # [pipeline, bind group, params offset, x, y, z] per dispatch
        records = array.array("i")
        for group, pipeline, buffers in new_bind_groups:
            records.extend((group, pipeline, len(buffers), *buffers))
        groups_end = len(records)
        for pipeline, group, params_offset, (x, y, z) in dispatches:
            records.extend((pipeline, group, params_offset, x, y, z))
        if self.compiling_ahead:   # the kernels compile on; the work is dropped (its bind groups are made)
            _call(self._bridge.makeBindGroups, to_js(records), groups_end)
            return None
        args = to_js(memoryview(params)), to_js(records), groups_end
        if timed:   # the timestamps as each dispatch began and ended, read back when it is done
            stamps = memoryview(_await(self._bridge.submitTimed, *args).to_bytes()).cast("Q")
            return [stamps[2 * i + 1] - stamps[2 * i] for i in range(len(dispatches))]
        compiling = _call(self._bridge.submit, *args)
        if compiling is not None:   # kernels it runs are still compiling: it submits once they are
            _await(lambda: compiling)
        return None

    def sync(self):
        _await(self._bridge.sync)
