"""The norm family (shaders/norm.wgsl): layer and RMS normalisation of rows, fused each way; its row-wise
entries (y, dx) are producers of store epilogues (kernels/epilogue.py)."""
import functools
import struct

from ...base import FILL, SUM, flat
from .common import check_gpu_dtype, fill
from .epilogue import Producer, bindings, epilogue_fields, store_function
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
# On a GPU, rows of at most NORM_ROW_THREADS * NORM_HELD values take norm.wgsl's forward_held and
# backward_input_held: each thread's values loaded once, together, into registers (the GPT's 384-wide
# rows, 6 a thread). Longer rows, and a software adapter's (4 threads a row), loop.
NORM_HELD = 8
# Layouts whose parameters are kept worked out (_packer); past this many the oldest go.
NORM_LAYOUTS_KEPT = 256

# The three kernels' parameters (their meanings: shaders/norm.wgsl). The starts (offsets) change from call
# to call, so they come last (ParamBlock.packer).
NORM_PARAMS = ParamBlock(u32("rows"), u32("cols"), u32("affine"), u32("centered"), f32("eps"),
                         u32("x_strides", 2), u32("dy_strides", 2), u32("starts", 4))
_NORM_BUFFERS = (("read_write", "out", "f32"), ("read_write", "stats", "f32"), ("read", "x", "f32"),
                 ("read", "dy", "f32"), ("read", "weight", "f32"), ("read", "bias", "f32"))
_NORM_BINDINGS = tuple(mode for mode, _, _ in _NORM_BUFFERS)
_NORM_WORDS = len(NORM_PARAMS.scalars) + sum(f.length for f in NORM_PARAMS.arrays)   # (the arrays' lengths are fixed)


def norm_producer(key, block):
    """A recorded forward or backward_input dispatch (its pipeline's key, its parameter bytes) as an
    epilogue's Producer: its (R, C) result y or dx, an element a store; None for backward_params, whose
    chunks' sums a reduction may still add."""
    _, entry, row_threads, held = key
    if entry == "backward_params":
        return None
    words = struct.unpack_from(f"<{_NORM_WORDS}I", block)
    return Producer(key, entry, words, words[0] * words[1], lambda epilogue: _norm_source(row_threads, held, epilogue))


def _norm_source(row_threads, held, epilogue=None):
    """shaders/norm.wgsl for rows of row_threads threads, `held` values a thread in the held entries,
    storing its results through the epilogue if there is one."""
    return fill("norm", ParamBlock(*NORM_PARAMS.fields, *epilogue_fields(epilogue)), includes=("workgroup",),
                cols=str(NORM_COLS), chunk_rows=str(NORM_CHUNK_ROWS), row_threads=str(row_threads),
                bindings=bindings(_NORM_BUFFERS, epilogue), epilogue=store_function(epilogue, "f32"),
                **_held_slots(held))


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
                                words, rows, cols)
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
        sums = None
        if param_grads:   # first, so that what reads dx next (a residual gradient's add) may join dx's store
            chunks = -(-rows // NORM_CHUNK_ROWS)
            sums = self._empty((chunks, 2, cols), x.dtype)
            self._norm_dispatch("backward_params", [sums, *inputs], words, (-(-cols // NORM_COLS), chunks, 1))
        self._norm_dispatch("backward_input", [dx, *inputs], words, rows, cols)
        if sums is None or chunks == 1:
            return dx, sums
        return dx, self.reduce(SUM, flat(sums, (chunks, 2 * cols), x.dtype), (0,), x.dtype)

    def _norm_dispatch(self, entry, storages, words, groups, cols=None):
        """One dispatch of norm.wgsl's `entry`; a row-wise entry (given its rows' length, cols) takes its
        held form where the rows are short enough."""
        row_threads = SOFTWARE_NORM_ROW_THREADS if self.is_software else NORM_ROW_THREADS
        held = 1   # (what the loops' module fills in)
        if cols is not None and not self.is_software and cols <= row_threads * NORM_HELD:
            entry, held = f"{entry}_held", -(-cols // row_threads)
        pipeline = self.runtime.pipeline(("norm", entry, row_threads, held), lambda: _norm_source(row_threads, held),
                                         entry=entry, bindings=_NORM_BINDINGS)
        self.runtime.dispatch(pipeline, storages, words, groups)


def _held_slots(held):
    """norm.wgsl's held entries written out for `held` values a thread: value i at column
    c{i} = li + i * ROW_THREADS, in the order the loops take them."""
    def each(template):
        return "\n".join(template.format(i=i) for i in range(held))
    return dict(
        held_x=each("""\
    let c{i} = li + {i}u * ROW_THREADS;
    let x{i} = held(r, c{i}, cols, false);"""),
        sum_x=" + ".join(f"x{i}" for i in range(held)),
        held_squares=each("""\
    if (c{i} < cols) {{
        let centred{i} = x{i} - mean;
        squares += centred{i} * centred{i};
    }}"""),
        held_y=each("""\
    if (c{i} < cols) {{
        var y{i} = (x{i} - mean) * rstd * weight_at(c{i});
        if ((params.affine & 2u) != 0u) {{
            y{i} += bias[params_starts(3u) + c{i}];
        }}
        store_epilogue(r * params.cols + c{i}, y{i});
    }}"""),
        held_g=each("""\
    let c{i} = li + {i}u * ROW_THREADS;
    let x{i} = held(r, c{i}, cols, false);
    let g{i} = held(r, c{i}, cols, true) * weight_at(min(c{i}, params.cols - 1u));
    if (c{i} < cols) {{
        sums += Partial(g{i}, g{i} * (x{i} - mean) * rstd);
    }}"""),
        held_dx=each("""\
    if (c{i} < cols) {{
        store_epilogue(r * params.cols + c{i}, rstd * (g{i} - shift - (x{i} - mean) * rstd * means.y));
    }}"""))


def _affine(x, weight, bias):
    """The weight and bias bindings: their storages, or x's where absent (bound, never read)."""
    return [x.storage if t is None else t.storage for t in (weight, bias)]


def _offsets(weight, bias):
    return [0 if t is None else t.offset for t in (weight, bias)]
