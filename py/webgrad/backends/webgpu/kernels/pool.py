"""The pool family (shaders/pool.wgsl): max pooling, one kernel each way."""
import math

from .... import dtypes
from .common import LOWEST, check_gpu_dtype, fill, groups


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
        numel = math.prod(out_shape if entry == "max_forward" else in_shape)
        if numel:
            dtype = src.dtype
            is_nan = "(bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u" if dtype.kind == "f" else "false"
            sizes = (*in_shape[1:], *out_shape[2:], *(v for pair in geometry for v in pair))
            constants = dict(zip(("c", "h", "w", "ho", "wo", "kh", "kw", "sy", "sx", "py", "px", "dy", "dx"),
                                 map(str, sizes)))
            pipeline = self.runtime.pipeline(("pool", entry, dtype.name, sizes),
                                             lambda: fill("pool", None, type=dtype.wgsl, is_nan=is_nan,
                                                          lowest=LOWEST[dtype.wgsl], **constants),
                                             entry=entry, bindings=("read_write", "read_write", "read"))
            words = [numel, src.offset, *src.strides]
            self.runtime.dispatch(pipeline, [out, picked, src.storage], words, groups(numel))

