"""The webgpu device: each op becomes a WGSL kernel of one of the kernel families (kernels/), queued
on the shared runtime. Views arrive as (storage, shape, strides, offset) and every kernel reads
through the strides, so views and broadcasts cost no copies."""
import array
import sys

from ... import dtypes
from ..base import COPY, Backend, flat
from .kernels.attention import AttentionKernels
from .kernels.common import buffer_request
from .kernels.conv import ConvKernels
from .kernels.embedding import EmbeddingKernels
from .kernels.gather import GatherKernels
from .kernels.loss import LossKernels
from .kernels.map import MapKernels
from .kernels.matmul import MatmulKernels
from .kernels.norm import NormKernels
from .kernels.optim import OptimKernels
from .kernels.pool import PoolKernels
from .kernels.random import RandomKernels
from .kernels.reduce import ReduceKernels
from .kernels.scan import ScanKernels
from .kernels.sort import SortKernels
from .runtime import Runtime


class WebGPUBackend(MapKernels, ReduceKernels, MatmulKernels, ConvKernels, GatherKernels, PoolKernels,
                    LossKernels, RandomKernels, OptimKernels, ScanKernels, SortKernels, NormKernels, EmbeddingKernels,
                    AttentionKernels, Backend):
    """Backend's methods, each from its kernel family's module; here only storage and transfers."""
    name = "webgpu"

    def __init__(self, driver):
        self.driver = driver
        self.runtime = Runtime(driver)
        self.is_software = driver.is_software
        self.info = driver.info
        MapKernels.__init__(self)

    @classmethod
    def create(cls):
        if sys.platform == "emscripten":
            from .browser import BrowserDriver
            return cls(BrowserDriver())
        from .native import NativeDriver
        return cls(NativeDriver())

    def empty(self, numel, dtype):
        return self._empty((numel,), dtype)

    def check_fits(self, shape, dtype):
        buffer_request(shape, dtype, self.runtime)

    def _empty(self, shape, dtype):
        """A buffer for a tensor of this shape; shape only names the tensor in a too-large error."""
        return self.runtime.alloc(*buffer_request(shape, dtype, self.runtime))

    def upload(self, raw, dtype):
        raw = memoryview(raw).cast("B")
        numel = len(raw) // dtype.itemsize
        storage = self.empty(numel, dtype)
        if dtype is dtypes.bool_:
            raw = array.array("I", raw.tolist()).tobytes()
        if len(raw):
            self.runtime.write(storage, raw)
        return storage

    def bitcast(self, storage, dtype):
        """Storage is a buffer of 32-bit words whatever its dtype (uint8 packs four to a word)."""
        return storage

    def download(self, t):
        numel = t.numel()
        if t.dtype is dtypes.uint8:
            # bytes are packed four to a word; read the whole span and pick the elements here
            span = (t.offset, t.offset + sum((s - 1) * st for s, st in zip(t.shape, t.strides)) + 1)
            raw = bytes(self.runtime.read(t.storage, span[0], span[1] - span[0])) if numel else b""
            return raw[:numel] if t.is_contiguous() else bytes(raw[p - span[0]] for p in t.positions())
        if not t.is_contiguous():
            t = flat(self.map(COPY, (t,), t.shape, t.dtype, t.dtype), t.shape, t.dtype)
        size = t.dtype.gpu_itemsize
        raw = self.runtime.read(t.storage, t.offset * size, numel * size) if numel else b""
        if t.dtype is dtypes.bool_:   # one u32 word per element on the GPU, one byte on the host
            return bytes(memoryview(raw).cast("I").tolist())
        return bytes(raw)

    def sync(self):
        self.runtime.sync()

    def memory_stats(self):
        return self.runtime.memory_stats()
