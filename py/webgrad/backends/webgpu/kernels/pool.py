"""The pool family (shaders/pool.wgsl): max pooling, one kernel each way."""
import functools
import math

from .... import dtypes
from .common import LOWEST, check_gpu_dtype, fill, groups
from .params import ParamBlock, u32

# Pool layouts (geometry and src's strides) kept worked out (_pool_kernel); past this many the oldest go.
POOL_LAYOUTS_KEPT = 256

# Both kernels' parameters (their meanings: shaders/pool.wgsl); the geometry is compiled in. src's
# offset changes from call to call, so it comes last (ParamBlock.packer).
POOL_PARAMS = ParamBlock(u32("numel"), u32("src_strides", 4), u32("src_offset", 1))
_GEOMETRY_SLOTS = ("c", "h", "w", "ho", "wo", "kh", "kw", "sy", "sx", "py", "px", "dy", "dx")


class PoolKernels:
    def max_pool2d(self, x, shape, kernel, stride, padding, dilation):
        """(values, int32 indices in each input plane) of max pooling x into shape (N, C, Ho, Wo)."""
        check_gpu_dtype(x.dtype, "max_pool2d of")
        if x.dtype is dtypes.uint8:
            raise TypeError("webgpu: max_pool2d of uint8 tensors is not supported (bytes are packed four to a "
                            "word); convert with .int() or .float() first")
        values, indices = self._empty(shape, x.dtype), self._empty(shape, dtypes.int32)
        self._pool("max_forward", values, indices, x, x.shape, shape, (kernel, stride, padding, dilation))
        return values, indices

    def max_pool2d_backward(self, grad, indices, shape, kernel, stride, padding, dilation):
        """The gradient of the (N, C, H, W) input of shape `shape`, from the pooled values' gradient."""
        out = self._empty(shape, grad.dtype)
        self._pool("max_backward", out, indices.storage, grad, shape, grad.shape,
                   (kernel, stride, padding, dilation))
        return out

    def _pool(self, entry, out, picked, src, in_shape, out_shape, geometry):
        """One shaders/pool.wgsl dispatch, a thread per element of out (the output's or the input's)."""
        numel, key, source, pack = _pool_kernel(entry, src.dtype, in_shape, out_shape, geometry, src.strides)
        if numel:
            pipeline = self.runtime.pipeline(key, source, entry=entry, bindings=("read_write", "read_write", "read"))
            self.runtime.dispatch(pipeline, [out, picked, src.storage], pack([src.offset]), groups(numel))


@functools.lru_cache(maxsize=POOL_LAYOUTS_KEPT)
def _pool_kernel(entry, dtype, in_shape, out_shape, geometry, src_strides):
    """What a pool dispatch works out once per layout: its threads, its pipeline's key and source,
    and its parameters as a function of [src's offset]."""
    numel = math.prod(out_shape if entry == "max_forward" else in_shape)
    sizes = (*in_shape[1:], *out_shape[2:], *(v for pair in geometry for v in pair))
    is_nan = "(bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u" if dtype.kind == "f" else "false"

    def source():
        return fill("pool", POOL_PARAMS, type=dtype.wgsl, is_nan=is_nan, lowest=LOWEST[dtype.wgsl],
                    **dict(zip(_GEOMETRY_SLOTS, map(str, sizes))))
    return numel, ("pool", entry, dtype.name, sizes), source, POOL_PARAMS.packer(numel=numel, src_strides=src_strides)
