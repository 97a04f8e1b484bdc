"""Native WebGPU driver (wgpu-py): the driver interface of runtime.py, translated to wgpu-py.

The runtime decides everything (buffers, alignment, the params arena's size, which bind groups to
make and drop); this driver owns the GPU objects behind the runtime's integer handles and ids.
"""

import functools
import itertools
import re

import wgpu
from wgpu.backends.wgpu_native._api import libf as _checked
from wgpu.backends.wgpu_native._ffi import ffi as _ffi, lib as _lib

from .runtime import OPTIONAL_FEATURES, PARAMS_BYTES, RAISED_LIMITS, REPORTED_LIMITS, DeviceLost

_BUFFER_TYPES = {"read": wgpu.BufferBindingType.read_only_storage, "read_write": wgpu.BufferBindingType.storage}

_NO_ADAPTER = (
    "webgrad: no WebGPU adapter was found, so the 'webgpu' device is unavailable. Natively, wgpu "
    "needs a Vulkan, Metal or DX12 driver: install your GPU's driver, or on Linux a software Vulkan "
    "adapter with `apt-get install mesa-vulkan-drivers` (lavapipe)."
)


def _wgpu_name(limit):
    """max_buffer_size -> max-buffer-size, as wgpu-py spells it."""
    return limit.replace("_", "-")


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
    def __init__(self):
        try:
            adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
        except RuntimeError as e:  # wgpu-native raises here, where the WebGPU spec resolves to null
            raise RuntimeError(f"{_NO_ADAPTER}\n(wgpu: {e})") from e
        if adapter is None:
            raise RuntimeError(_NO_ADAPTER)
        self.features = frozenset(f for f in OPTIONAL_FEATURES if f in adapter.features)
        self._device = adapter.request_device_sync(
            label="webgrad", required_features=sorted(self.features),
            required_limits={_wgpu_name(k): adapter.limits[_wgpu_name(k)] for k in RAISED_LIMITS},
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
        self.limits = {k: self._device.limits[_wgpu_name(k)] for k in REPORTED_LIMITS}

        self._handles = itertools.count(1)
        self._buffers = {}  # handle -> GPUBuffer
        self._pipelines = {}  # handle -> GPUComputePipeline
        self._layout_of = {}  # pipeline handle -> its GPUBindGroupLayout
        self._layouts = {}  # bindings -> (GPUBindGroupLayout, GPUPipelineLayout)
        self._bind_groups = {}  # id -> wgpu-native's WGPUBindGroup handle (all of them bind the arena)
        self._fence = self._device.create_buffer(size=4, usage=wgpu.BufferUsage.COPY_SRC)
        self._arena = None

    # ---- buffers

    @_on_device
    def create_buffer(self, size):
        handle = next(self._handles)
        self._buffers[handle] = self._device.create_buffer(
            size=size, usage=wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
        )
        return handle

    @_on_device
    def write_buffer(self, handle, offset, data):
        self._queue.write_buffer(self._buffers[handle], offset, data)

    @_on_device
    def read_buffers(self, regions):
        staging = self._device.create_buffer(size=sum(size for _, _, size in regions),
                                             usage=wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST)
        encoder = self._device.create_command_encoder()
        at = 0
        for handle, offset, size in regions:
            encoder.copy_buffer_to_buffer(self._buffers[handle], offset, staging, at, size)
            at += size
        self._queue.submit([encoder.finish()])
        staging.map_sync(wgpu.MapMode.READ)
        data = staging.read_mapped()   # a copy: the staging buffer goes now
        staging.destroy()
        return data

    def destroy_buffer(self, handle, bind_groups):
        self._buffers.pop(handle).destroy()
        for group in bind_groups:
            _lib.wgpuBindGroupRelease(self._bind_groups.pop(group))

    # ---- pipelines

    @_on_device
    def create_pipeline(self, label, wgsl, entry, bindings):
        group_layout, pipeline_layout = self._layout(tuple(bindings))
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
        self._pipelines[handle] = pipeline
        self._layout_of[handle] = group_layout
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
    def create_arena(self, size):
        # The old arena is just dropped: work already submitted keeps it alive until it completes.
        self._arena = self._device.create_buffer(
            label="webgrad-params", size=size, usage=wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_DST
        )

    def forget_bind_groups(self):
        for group in self._bind_groups.values():
            _lib.wgpuBindGroupRelease(group)
        self._bind_groups.clear()

    def _bind_group(self, pipeline_handle, buffer_handles):
        """A bind group of the arena's first block and the buffers, each whole, made through wgpu-native's
        C function: wgpu-py's create_bind_group spent ~60 us of Python on each (its structs checked
        field by field), 10 ms of an eager GPT step that made 160 (bench/NOTES.md). The driver keeps
        the raw handle and releases it when the runtime drops the group."""
        entries = _ffi.new("WGPUBindGroupEntry[]", 1 + len(buffer_handles))   # zeroed: offsets 0, no label
        entries[0].buffer, entries[0].size = self._arena._internal, PARAMS_BYTES
        for i, handle in enumerate(buffer_handles, start=1):
            buffer, entry = self._buffers[handle], entries[i]
            entry.binding, entry.buffer, entry.size = i, buffer._internal, buffer.size
        descriptor = _ffi.new("WGPUBindGroupDescriptor *")
        descriptor.layout = self._layout_of[pipeline_handle]._internal
        descriptor.entryCount, descriptor.entries = len(entries), entries
        return _checked.wgpuDeviceCreateBindGroup(self._device._internal, descriptor)

    @_on_device
    def submit(self, params, new_bind_groups, dispatches, timed=False):
        for group, pipeline_handle, buffer_handles in new_bind_groups:
            self._bind_groups[group] = self._bind_group(pipeline_handle, buffer_handles)
        if not timed:
            self._submit(params, dispatches)
            return None
        self._queue.write_buffer(self._arena, 0, params)
        # Timed: each dispatch in a pass of its own that writes a timestamp as it begins and ends.
        encoder = self._device.create_command_encoder()
        count = 2 * len(dispatches)
        queries = self._device.create_query_set(type=wgpu.QueryType.timestamp, count=count)
        for i, one in enumerate(dispatches):
            cpass = encoder.begin_compute_pass(timestamp_writes={
                "query_set": queries, "beginning_of_pass_write_index": 2 * i, "end_of_pass_write_index": 2 * i + 1,
            })
            self._encode(cpass._internal, [one])
            cpass.end()
        resolved = self._device.create_buffer(size=8 * count,
                                              usage=wgpu.BufferUsage.QUERY_RESOLVE | wgpu.BufferUsage.COPY_SRC)
        encoder.resolve_query_set(queries, 0, count, resolved, 0)
        self._queue.submit([encoder.finish()])
        stamps = self._queue.read_buffer(resolved).cast("Q")
        return [stamps[2 * i + 1] - stamps[2 * i] for i in range(len(dispatches))]

    def _submit(self, params, dispatches):
        """The params upload and one pass of the dispatches, through wgpu-native's C functions: wgpu-py's
        objects and descriptors cost ~20 us a submit. A bad upload, pass or submit fails at the
        calls made through _checked (wgpu-py's error capture), which raise what went wrong."""
        queue = self._queue._internal
        _checked.wgpuQueueWriteBuffer(queue, self._arena._internal, 0, _ffi.from_buffer(params), len(params))
        encoder = _lib.wgpuDeviceCreateCommandEncoder(self._device._internal, _ffi.NULL)
        cpass = _lib.wgpuCommandEncoderBeginComputePass(encoder, _ffi.NULL)
        self._encode(cpass, dispatches)
        _lib.wgpuComputePassEncoderEnd(cpass)
        _lib.wgpuComputePassEncoderRelease(cpass)
        try:
            commands = _checked.wgpuCommandEncoderFinish(encoder, _ffi.NULL)
        finally:
            _lib.wgpuCommandEncoderRelease(encoder)
        try:
            _checked.wgpuQueueSubmit(queue, 1, _ffi.new("WGPUCommandBuffer[1]", [commands]))
        finally:
            _lib.wgpuCommandBufferRelease(commands)

    def _encode(self, pass_ptr, dispatches):
        # The pass is encoded through wgpu-native's C functions directly: wgpu-py's wrappers cost
        # ~3 us a call in error bookkeeping, most of a small step's time. The runtime only builds
        # valid dispatches; anything wrong still surfaces at the encoder's finish and the submit.
        offset = _ffi.new("uint32_t[1]")
        set_pipeline = _lib.wgpuComputePassEncoderSetPipeline
        set_bind_group = _lib.wgpuComputePassEncoderSetBindGroup
        dispatch = _lib.wgpuComputePassEncoderDispatchWorkgroups
        pipelines, bind_groups, current = self._pipelines, self._bind_groups, None
        for pipeline_handle, group, params_offset, (x, y, z) in dispatches:
            if pipeline_handle != current:   # a run of one kernel (a common case) sets it once
                set_pipeline(pass_ptr, pipelines[pipeline_handle]._internal)
                current = pipeline_handle
            offset[0] = params_offset
            set_bind_group(pass_ptr, 0, bind_groups[group], 1, offset)
            dispatch(pass_ptr, x, y, z)

    @_on_device
    def sync(self):
        # queue.on_submitted_work_done_sync() is broken in wgpu-py 0.32 (its callback type does not
        # match the bundled wgpu-native), so fence instead: a readback is queued behind all submitted
        # work and blocks until it has finished.
        self._queue.read_buffer(self._fence)
