"""Native WebGPU driver (wgpu-py): the thin layer under webgrad's WebGPU runtime.

The runtime plans everything (kernels, buffers, parameter packing); this driver only owns the GPU
objects and hands out small integer handles for them, so that the browser's JS bridge can implement
the very same interface.

Every kernel's @group(0) @binding(0) is `var<storage, read> p: array<u32>`: a PARAMS_BYTES window
into one shared "params arena" buffer, selected per dispatch with a dynamic offset. Storage buffers
follow at @binding(1), @binding(2), ...
"""

import functools
import itertools
import re

import wgpu
from wgpu.backends.wgpu_native._ffi import ffi as _ffi, lib as _lib

from .runtime import DeviceLost, word_aligned

PARAMS_BYTES = 256  # one dispatch's parameter block (256 is also the largest legal offset alignment)

_ARENA_MIN_BYTES = 64 * 1024

# Raised from the WebGPU defaults to whatever the adapter supports; nothing else is requested.
_RAISED_LIMITS = (
    "max-storage-buffer-binding-size",
    "max-buffer-size",
    "max-storage-buffers-per-shader-stage",
    "max-compute-workgroup-storage-size",
    "max-compute-invocations-per-workgroup",
    "max-compute-workgroup-size-x",
    "max-compute-workgroup-size-y",
)
_REPORTED_LIMITS = (
    "max-storage-buffer-binding-size",
    "max-buffer-size",
    "max-compute-workgroups-per-dimension",
    "max-storage-buffers-per-shader-stage",
    "max-compute-invocations-per-workgroup",
    "max-compute-workgroup-storage-size",
    "max-compute-workgroup-size-x",
    "max-compute-workgroup-size-y",
    "min-storage-buffer-offset-alignment",
)
_BUFFER_TYPES = {"read": wgpu.BufferBindingType.read_only_storage, "read_write": wgpu.BufferBindingType.storage}

_NO_ADAPTER = (
    "webgrad: no WebGPU adapter was found, so the 'webgpu' device is unavailable. Natively, wgpu "
    "needs a Vulkan, Metal or DX12 driver: install your GPU's driver, or on Linux a software Vulkan "
    "adapter with `apt-get install mesa-vulkan-drivers` (lavapipe)."
)


def _align4(n):
    return (n + 3) & ~3


# wgpu-py 0.32 does not implement GPUDevice.lost and only logs wgpu-native's lost callback; a call on
# a lost device fails with a validation error that says so, which is how the driver learns of it.
_LOST = re.compile(r"device is lost|device lost", re.IGNORECASE)


def _on_device(method):
    """A driver call that needs the device: once it is lost, this and every later call raise
    DeviceLost (not a wgpu error from deep inside, nor a hang)."""

    @functools.wraps(method)
    def call(self, *args):
        if self.lost:
            raise DeviceLost(self.lost)
        try:
            return method(self, *args)
        except wgpu.GPUError as e:
            if not _LOST.search(str(e)):
                raise
            self.lost = str(e).strip().splitlines()[-1].strip()
            raise DeviceLost(self.lost) from None
    return call


class NativeDriver:
    # Bind groups kept for reuse. Pooled buffers meet in ever new combinations over a long run, so
    # the cache starts over when it is past this size (at a submit, when no pass is using it).
    BIND_GROUPS_KEPT = 16384

    def __init__(self):
        try:
            adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
        except RuntimeError as e:  # wgpu-native raises here, where the WebGPU spec resolves to null
            raise RuntimeError(f"{_NO_ADAPTER}\n(wgpu: {e})") from e
        if adapter is None:
            raise RuntimeError(_NO_ADAPTER)
        self._device = adapter.request_device_sync(
            label="webgrad", required_limits={k: adapter.limits[k] for k in _RAISED_LIMITS}
        )
        self._queue = self._device.queue

        ai = adapter.info
        self.info = {
            "name": ai["device"],
            "vendor": ai["vendor"],
            "backend": ai["backend_type"],
            "adapter_type": ai["adapter_type"],
            "driver": ai["description"],
        }
        self.is_software = ai["adapter_type"] == "CPU"  # lavapipe / SwiftShader
        self.lost = None  # why the device was lost, once it is
        self.limits = {k.replace("-", "_"): self._device.limits[k] for k in _REPORTED_LIMITS}

        self._handles = itertools.count(1)
        self._buffers = {}  # handle -> GPUBuffer
        self._pipelines = {}  # handle -> (GPUComputePipeline, bindings)
        self._layouts = {}  # bindings -> (GPUBindGroupLayout, GPUPipelineLayout)
        self._bind_groups = {}  # (bindings, buffer handles) -> GPUBindGroup; all of them bind the arena
        self._bind_groups_of = {}  # buffer handle -> set of _bind_groups keys that use it
        self._fence = self._device.create_buffer(size=4, usage=wgpu.BufferUsage.COPY_SRC)
        self._arena = self._device.create_buffer(
            label="webgrad-params", size=_ARENA_MIN_BYTES, usage=wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_DST
        )

    # ---- buffers

    @_on_device
    def create_buffer(self, size):
        handle = next(self._handles)
        self._buffers[handle] = self._device.create_buffer(
            size=max(4, _align4(size)),
            usage=wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST,
        )
        return handle

    @_on_device
    def write_buffer(self, handle, offset, data):
        start, data = word_aligned(offset, data, lambda at: self.read_buffer(handle, at, 4))
        if data:
            self._queue.write_buffer(self._buffers[handle], start, data)

    @_on_device
    def read_buffer(self, handle, offset, size):
        if size == 0:
            return b""
        start, end = offset & ~3, _align4(offset + size)  # copies must be word-aligned too
        data = self._queue.read_buffer(self._buffers[handle], start, end - start)
        return data[offset - start : offset - start + size]

    def destroy_buffer(self, handle):
        self._buffers.pop(handle).destroy()
        for key in self._bind_groups_of.pop(handle, ()):
            del self._bind_groups[key]
            # Unlink the group from its other buffers too, or a long-lived buffer (a weight bound
            # with ever-new temporaries) would collect dead keys forever.
            for other in key[1]:
                if other != handle:
                    self._bind_groups_of[other].discard(key)

    # ---- pipelines

    @_on_device
    def create_pipeline(self, label, wgsl, entry, bindings):
        bindings = tuple(bindings)
        _, pipeline_layout = self._layout(bindings)
        # wgpu-native validates synchronously and wgpu-py raises the error from the failing call
        # (a GPUValidationError carrying naga's diagnostic), so catching is enough to never hand
        # out a broken pipeline.
        try:
            module = self._device.create_shader_module(label=label, code=wgsl)
            pipeline = self._device.create_compute_pipeline(
                label=label, layout=pipeline_layout, compute={"module": module, "entry_point": entry}
            )
        except wgpu.GPUError as e:
            if _LOST.search(str(e)):
                raise
            raise RuntimeError(str(e)) from e   # the runtime names the kernel
        handle = next(self._handles)
        self._pipelines[handle] = (pipeline, bindings)
        return handle

    def _layout(self, bindings):
        if bindings not in self._layouts:
            compute = wgpu.ShaderStage.COMPUTE
            params = {"type": wgpu.BufferBindingType.read_only_storage, "has_dynamic_offset": True}
            entries = [{"binding": 0, "visibility": compute, "buffer": params}]
            entries += [
                {"binding": i, "visibility": compute, "buffer": {"type": _BUFFER_TYPES[access]}}
                for i, access in enumerate(bindings, start=1)
            ]
            bgl = self._device.create_bind_group_layout(entries=entries)
            self._layouts[bindings] = (bgl, self._device.create_pipeline_layout(bind_group_layouts=[bgl]))
        return self._layouts[bindings]

    # ---- execution

    @_on_device
    def submit(self, params, dispatches):
        if not dispatches:
            return
        if len(params) % 4:
            params = bytes(params) + bytes(4 - len(params) % 4)
        needed = max(len(params), max(d[2] for d in dispatches) + PARAMS_BYTES)
        if needed > self._arena.size:
            self._grow_arena(needed)
        if params:
            self._queue.write_buffer(self._arena, 0, params)
        if len(self._bind_groups) > self.BIND_GROUPS_KEPT:
            self._forget_bind_groups()

        encoder = self._device.create_command_encoder()
        cpass = encoder.begin_compute_pass()
        # The pass is encoded through wgpu-native's C functions directly: wgpu-py's wrappers cost
        # ~3 us a call in error bookkeeping, most of a small step's time. The runtime only builds
        # valid dispatches; anything wrong still surfaces at encoder.finish() and queue.submit().
        pass_ptr, offset = cpass._internal, _ffi.new("uint32_t[1]")
        set_pipeline = _lib.wgpuComputePassEncoderSetPipeline
        set_bind_group = _lib.wgpuComputePassEncoderSetBindGroup
        dispatch = _lib.wgpuComputePassEncoderDispatchWorkgroups
        pipelines, bind_groups, current = self._pipelines, self._bind_groups, None
        for pipeline_handle, buffer_handles, params_offset, (x, y, z) in dispatches:
            pipeline, bindings = pipelines[pipeline_handle]
            if pipeline_handle != current:   # a run of one kernel (a common case) sets it once
                set_pipeline(pass_ptr, pipeline._internal)
                current = pipeline_handle
            group = bind_groups.get((bindings, buffer_handles)) or self._bind_group(bindings, buffer_handles)
            offset[0] = params_offset
            set_bind_group(pass_ptr, 0, group._internal, 1, offset)
            dispatch(pass_ptr, x, y, z)
        cpass.end()
        self._queue.submit([encoder.finish()])

    def _grow_arena(self, needed):
        # The old arena is just dropped: work already submitted keeps it alive until it completes.
        self._arena = self._device.create_buffer(
            label="webgrad-params",
            size=1 << (needed - 1).bit_length(),
            usage=wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_DST,
        )
        self._forget_bind_groups()   # every cached bind group binds the old arena

    def _forget_bind_groups(self):
        self._bind_groups.clear()
        self._bind_groups_of.clear()

    def _bind_group(self, bindings, buffer_handles):
        key = (bindings, buffer_handles)
        group = self._bind_groups.get(key)
        if group is None:
            entries = [{"binding": 0, "resource": {"buffer": self._arena, "offset": 0, "size": PARAMS_BYTES}}]
            entries += [
                {"binding": i, "resource": self._buffers[h]}  # a bare buffer binds its whole size
                for i, h in enumerate(buffer_handles, start=1)
            ]
            group = self._device.create_bind_group(layout=self._layout(bindings)[0], entries=entries)
            self._bind_groups[key] = group
            for h in buffer_handles:
                self._bind_groups_of.setdefault(h, set()).add(key)
        return group

    @_on_device
    def sync(self):
        # queue.on_submitted_work_done_sync() is broken in wgpu-py 0.32 (its callback type does not
        # match the bundled wgpu-native), so fence instead: a readback is queued behind all submitted
        # work and blocks until it has finished.
        self._queue.read_buffer(self._fence)
