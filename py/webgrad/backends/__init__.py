"""Devices: "cpu" (NumPy, the reference) and "webgpu" (WGSL kernels, native or in the browser)."""
import os
import sys

DEVICES = ("cpu", "webgpu")
_backends = {}
_default_device = None


def resolve_device(device):
    if device is None:
        return default_device()
    name = str(getattr(device, "type", device))
    if name.startswith("webgpu"):
        return "webgpu"
    if name == "cpu":
        return "cpu"
    raise RuntimeError(f"unknown device {device!r}; webgrad has 'cpu' and 'webgpu'")


def get_backend(device):
    backend = _backends.get(device)
    if backend is None:
        if device == "cpu":
            from .cpu import CPUBackend
            backend = CPUBackend()
        elif device == "webgpu":
            from .webgpu.backend import WebGPUBackend
            backend = WebGPUBackend.create()
        else:
            raise ValueError(f"unknown device {device!r}; webgrad has 'cpu' and 'webgpu'")
        _backends[device] = backend
    return backend


def default_device():
    """WEBGRAD_DEVICE if set; else webgpu on a hardware adapter, cpu otherwise.

    A software adapter (lavapipe, SwiftShader) is not picked by default: NumPy beats it.
    """
    global _default_device
    if _default_device is None:
        chosen = os.environ.get("WEBGRAD_DEVICE")
        if chosen:
            _default_device = resolve_device(chosen)
        elif sys.platform == "emscripten":   # the page: no NumPy for a cpu device
            _default_device = "webgpu"
        else:
            try:
                _default_device = "cpu" if get_backend("webgpu").is_software else "webgpu"
            except RuntimeError:
                _default_device = "cpu"
    return _default_device
