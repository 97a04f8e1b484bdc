"""Devices: "cpu" (NumPy, the reference) and "webgpu" (WGSL kernels, native or in the browser)."""
import os
import sys

from ..device import device as _device

DEVICES = ("cpu", "webgpu")
_NAMED = {name: _device(name) for name in DEVICES}
_backends = {}
_default_device = None


def resolve_device(device):
    if device is None:
        return default_device()
    name = str(getattr(device, "type", device))
    if name.startswith("webgpu"):
        return _NAMED["webgpu"]
    if name == "cpu":
        return _NAMED["cpu"]
    if name.startswith(("cuda", "mps")):
        raise RuntimeError(f"webgrad has no {name} device: its GPU device is 'webgpu' (torch.cuda.is_available() "
                           "is False here; torch.accelerator.current_accelerator() names 'webgpu')")
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
            _default_device = _NAMED["webgpu"]
        else:
            try:
                _default_device = _NAMED["cpu" if get_backend("webgpu").is_software else "webgpu"]
            except RuntimeError:
                _default_device = _NAMED["cpu"]
    return _default_device


from . import cuda, cudnn, mps  # noqa: E402  (torch.backends' namespaces, as programs read them)
