"""Browser WebGPU driver (Pyodide): the NativeDriver interface, over web/bridge.js and navigator.gpu.

The page's worker registers {bridge: new Bridge()} (web/bridge.js) as the JS module
`webgrad_bridge` before webgrad is imported. Calls into JS are coarse: one per buffer upload, readback or pipeline, and one per
submit carrying every queued dispatch (the params blob plus a flat int32 array of records).

WebGPU's readbacks, device requests and pipeline compiles are async in the browser. They are
awaited here with pyodide.ffi.run_sync (JS Promise Integration), so `.item()` stays synchronous;
that requires Python to have been entered through runPythonAsync or callPromising (the worker's
calls are).
"""
import array
import json

from pyodide.ffi import JsException, run_sync, to_js

import webgrad_bridge

from .runtime import DeviceLost, word_aligned

_LOST = "device-lost: "   # how bridge.js starts every error once the device is lost


def _align4(n):
    return (n + 3) & ~3


def _python_error(e, what="webgrad: "):
    """The exception to raise for a JS error: DeviceLost for a lost device, else a RuntimeError."""
    if _LOST in e.message:
        return DeviceLost(e.message.split(_LOST, 1)[1])
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
        init = json.loads(_await(self._bridge.init))
        self.info = init["info"]
        self.limits = init["limits"]
        self.is_software = init["isSoftware"]

    # ---- buffers

    def create_buffer(self, size):
        return _call(self._bridge.createBuffer, max(4, _align4(size)))

    def write_buffer(self, handle, offset, data):
        start, data = word_aligned(offset, data, lambda at: self.read_buffer(handle, at, 4))
        if data:
            _call(self._bridge.writeBuffer, handle, start, to_js(data))

    def read_buffer(self, handle, offset, size):
        if size == 0:
            return b""
        start, end = offset & ~3, _align4(offset + size)
        data = _await(self._bridge.readBuffer, handle, start, end - start).to_bytes()
        return data[offset - start : offset - start + size]

    def destroy_buffer(self, handle):
        self._bridge.destroyBuffer(handle)

    # ---- pipelines

    def create_pipeline(self, label, wgsl, entry, bindings):
        try:
            return run_sync(self._bridge.createPipeline(label, wgsl, entry, ",".join(bindings)))
        except JsException as e:
            raise _python_error(e, "") from None   # the runtime names the kernel

    # ---- execution

    def submit(self, params, dispatches):
        if not dispatches:
            return
        records = array.array("i")
        for pipeline, buffers, params_offset, (x, y, z) in dispatches:
            records.extend((pipeline, params_offset, x, y, z, len(buffers)))
            records.extend(buffers)
        if len(params) % 4:
            params = bytes(params) + bytes(4 - len(params) % 4)
        _call(self._bridge.submit, to_js(memoryview(params)), to_js(records))

    def sync(self):
        _await(self._bridge.sync)
