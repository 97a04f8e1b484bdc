"""The pool family (shaders/pool.wgsl): max pooling, one kernel each way; both are producers of
store epilogues (kernels/epilogue.py)."""
import functools
import math
import struct

from .... import dtypes
from ...base import COPY, flat
from .common import LOWEST, check_gpu_dtype, fill, groups
from .epilogue import Producer, bindings, epilogue_fields, store_function
from .params import ParamBlock, u32

# Pool layouts (geometry and src's strides) kept worked out (_pool_kernel); past this many the oldest go.
POOL_LAYOUTS_KEPT = 256

# Both kernels' parameters (their meanings: shaders/pool.wgsl); the geometry is compiled in. src's
# offset changes from call to call, so it comes last (ParamBlock.packer).
POOL_PARAMS = ParamBlock(u32("numel"), u32("src_strides", 4), u32("src_offset", 1))
_POOL_WORDS = len(POOL_PARAMS.pack(numel=0, src_strides=(0,) * 4, src_offset=(0,)))
# The kernels' buffers: (mode, name, WGSL element type; T is the pooled dtype's).
_POOL_BUFFERS = (("read_write", "out", "T"), ("read_write", "picked", "i32"), ("read", "src", "T"))
_POOL_MODES = tuple(mode for mode, _, _ in _POOL_BUFFERS)
_GEOMETRY_SLOTS = ("c", "h", "w", "ho", "wo", "kh", "kw", "sy", "sx", "py", "px", "dy", "dx")


class PoolKernels:
    def max_pool2d(self, x, shape, kernel, stride, padding, dilation):
        """(values, int32 indices in each input plane) of max pooling x into shape (N, C, Ho, Wo)."""
        check_gpu_dtype(x.dtype, "max_pool2d of")
        if x.dtype is dtypes.uint8:   # packed four bytes to a word: pool them widened to int32, narrow back
            wide = flat(self.map(COPY, (x,), x.shape, dtypes.int32, dtypes.int32), x.shape, dtypes.int32)
            values, indices = self.max_pool2d(wide, shape, kernel, stride, padding, dilation)
            return self.map(COPY, (flat(values, shape, dtypes.int32),), shape, dtypes.int32, dtypes.uint8), indices
        values, indices = self._empty(shape, x.dtype), self._empty(shape, dtypes.int32)
        self._pool("max_forward", values, indices, x, x.shape, shape, (kernel, stride, padding, dilation))
        return values, indices

    def max_pool2d_backward(self, grad, indices, shape, kernel, stride, padding, dilation):
        """The gradient of the (N, C, H, W) input of shape `shape`, from the pooled values' gradient.
        On a software adapter, windows apart take a thread per window's cell rather than per pixel
        (GPUs keep the thread per pixel, measured there)."""
        out = self._empty(shape, grad.dtype)
        entry = "max_backward_apart" if self.is_software and windows_apart(kernel, stride, dilation) else "max_backward"
        self._pool(entry, out, indices.storage, grad, shape, grad.shape, (kernel, stride, padding, dilation))
        return out

    def _pool(self, entry, out, picked, src, in_shape, out_shape, geometry):
        """One shaders/pool.wgsl dispatch."""
        threads, key, source, pack = _pool_kernel(entry, src.dtype, in_shape, out_shape, geometry, src.strides)
        if threads:
            pipeline = self.runtime.pipeline(key, source, entry=entry, bindings=_POOL_MODES)
            self.runtime.dispatch(pipeline, [out, picked, src.storage], pack([src.offset]), groups(threads))


def windows_apart(kernel, stride, dilation):
    """Whether each pooling window lies within its own stride x stride cell (along both axes: the
    span of its taps at most the stride), so that no input pixel is in two windows."""
    return all((k - 1) * d + 1 <= s for k, s, d in zip(kernel, stride, dilation))


@functools.lru_cache(maxsize=POOL_LAYOUTS_KEPT)
def _pool_kernel(entry, dtype, in_shape, out_shape, geometry, src_strides):
    """What a pool dispatch works out once per layout: its threads, its pipeline's key and source,
    and its parameters as a function of [src's offset]. numel is its result's element count: a
    thread each, but for max_backward_apart's cells (shaders/pool.wgsl)."""
    numel = math.prod(out_shape if entry == "max_forward" else in_shape)
    sizes = (*in_shape[1:], *out_shape[2:], *(v for pair in geometry for v in pair))
    threads = numel
    if entry == "max_backward_apart" and numel:
        cy, cx = _cells(sizes)
        threads = numel // (in_shape[2] * in_shape[3]) * cy * cx
    return (threads, ("pool", entry, dtype.name, sizes), lambda: _pool_source(dtype, sizes),
            POOL_PARAMS.packer(numel=numel, src_strides=src_strides))


def _cells(sizes):
    """max_backward_apart's cells along y and x: stride-sized, from the padding's start, covering
    every input row and column and every window."""
    g = dict(zip(_GEOMETRY_SLOTS, sizes))
    return (max(g["ho"], -(-(g["h"] + g["py"]) // g["sy"])), max(g["wo"], -(-(g["w"] + g["px"]) // g["sx"])))


def pool_producer(key, block):
    """A recorded float32 pool dispatch (its pipeline's key, its parameter bytes) as an epilogue's
    Producer, or None: the maps fused into a store compute on f32 results."""
    _, entry, dtype_name, sizes = key
    if dtype_name != "float32":
        return None
    words = struct.unpack_from(f"<{_POOL_WORDS}I", block)
    return Producer(key, entry, words, words[0], lambda epilogue: _pool_source(dtypes.float32, sizes, epilogue))


def _pool_source(dtype, sizes, epilogue=None):
    """shaders/pool.wgsl for these sizes (C, H, W, Ho, Wo, then the geometry's pairs), storing its
    results through the epilogue if there is one."""
    is_nan = "(bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u" if dtype.kind == "f" else "false"
    return fill("pool", ParamBlock(*POOL_PARAMS.fields, *epilogue_fields(epilogue)), type=dtype.wgsl,
                is_nan=is_nan, lowest=LOWEST[dtype.wgsl], bindings=bindings(_POOL_BUFFERS, epilogue),
                epilogue=store_function(epilogue, "T"), **dict(zip(("cy", "cx"), map(str, _cells(sizes)))),
                **dict(zip(_GEOMETRY_SLOTS, map(str, sizes))))
