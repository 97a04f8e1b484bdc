"""The norm family (shaders/norm.wgsl): layer and RMS normalisation of rows, fused each way."""
import functools

from ...base import FILL, SUM, flat
from .common import check_gpu_dtype, fill
from .params import ParamBlock, f32, u32

# Rows one backward_params workgroup sums (its threads take every LANES-th row of them); past this
# many rows the chunks' sums are added by a reduction after it.
NORM_CHUNK_ROWS = 256
NORM_COLS = 32   # columns per backward_params workgroup (of 256 threads)
# Threads a row takes in forward and backward_input (their workgroup): 64 on a GPU; on a software
# adapter 4, one SIMD coroutine, whose barriers switch to no other (the row's two sums take ~14 of
# them at 64 threads: the language model's norms were half its step in the page on SwiftShader).
NORM_ROW_THREADS = 64
SOFTWARE_NORM_ROW_THREADS = 4
# Layouts whose parameters are kept worked out (_packer); past this many the oldest go.
NORM_LAYOUTS_KEPT = 256

# The three kernels' parameters (their meanings: shaders/norm.wgsl). The offsets change from call
# to call, so they come last (ParamBlock.packer).
NORM_PARAMS = ParamBlock(u32("rows"), u32("cols"), u32("affine"), u32("centered"), f32("eps"),
                         u32("x_strides", 2), u32("dy_strides", 2), u32("offsets", 4))


@functools.lru_cache(maxsize=NORM_LAYOUTS_KEPT)
def _packer(shape, affine, centered, eps, x_strides, dy_strides):
    return NORM_PARAMS.packer(rows=shape[0], cols=shape[1], affine=affine, centered=int(centered), eps=eps,
                              x_strides=x_strides, dy_strides=dy_strides)


class NormKernels:
    def norm(self, x, weight, bias, eps, centered):
        """(y, stats) of an (R, C) view x normalised along its rows: layer norm when centered, else
        RMS norm; times weight and plus bias (contiguous (C,) views, or None). stats: (R, 2) of the
        rows' (mean, rstd), the mean 0 for RMS norm."""
        check_gpu_dtype(x.dtype, "normalising")
        rows, cols = x.shape
        y, stats = self._empty(x.shape, x.dtype), self._empty((rows, 2), x.dtype)
        if rows and cols:
            affine = int(weight is not None) | int(bias is not None) << 1
            words = _packer(x.shape, affine, centered, eps, x.strides, (0, 0))([x.offset, 0, *_offsets(weight, bias)])
            self._norm_dispatch("forward", [y, stats, x.storage, x.storage, *_affine(x, weight, bias)],
                                words, rows)
        return y, stats

    def norm_backward(self, grad, x, stats, weight, centered, param_grads):
        """(dx, d params) from the upstream gradient of norm's y (both (R, C) views) and its stats;
        d params, where param_grads asks for it, is a (2, C) storage: d weight, then d bias."""
        rows, cols = x.shape
        dx = self._empty(x.shape, x.dtype)
        if not rows or not cols:
            return dx, self.map(FILL, (0.0,), (2, cols), x.dtype, x.dtype) if param_grads else None
        pack = _packer(x.shape, int(weight is not None), centered, 0.0, x.strides, grad.strides)
        words = pack([x.offset, grad.offset, *_offsets(weight, None)])
        inputs = [stats.storage, x.storage, grad.storage, *_affine(x, weight, None)]
        self._norm_dispatch("backward_input", [dx, *inputs], words, rows)
        if not param_grads:
            return dx, None
        chunks = -(-rows // NORM_CHUNK_ROWS)
        sums = self._empty((chunks, 2, cols), x.dtype)
        self._norm_dispatch("backward_params", [sums, *inputs], words, (-(-cols // NORM_COLS), chunks, 1))
        if chunks == 1:
            return dx, sums
        return dx, self.reduce(SUM, flat(sums, (chunks, 2 * cols), x.dtype), (0,), x.dtype)

    def _norm_dispatch(self, entry, storages, words, groups):
        row_threads = SOFTWARE_NORM_ROW_THREADS if self.is_software else NORM_ROW_THREADS
        pipeline = self.runtime.pipeline(
            ("norm", entry, row_threads),
            lambda: fill("norm", NORM_PARAMS, includes=("workgroup",), cols=str(NORM_COLS),
                         chunk_rows=str(NORM_CHUNK_ROWS), row_threads=str(row_threads)),
            entry=entry, bindings=("read_write", "read_write", "read", "read", "read", "read"))
        self.runtime.dispatch(pipeline, storages, words, groups)


def _affine(x, weight, bias):
    """The weight and bias bindings: their storages, or x's where absent (bound, never read)."""
    return [x.storage if t is None else t.storage for t in (weight, bias)]


def _offsets(weight, bias):
    return [0 if t is None else t.offset for t in (weight, bias)]
