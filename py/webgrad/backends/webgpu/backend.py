"""The webgpu device: turns each op into a WGSL kernel (from shaders/) and queues it.

Kernel sources are the .wgsl files with a few {{slots}} filled per op and dtype; a filled source
is compiled once and cached by its key. Tensors arrive as (storage, shape, strides, offset)
views and every kernel reads through the strides, so views and broadcasts cost no copies.
"""
import array
import collections
import math
import os
import sys

from ... import dtypes
from .runtime import Runtime, f32_bits

_SHADER_DIRS = (os.path.join(os.path.dirname(__file__), "..", "..", "shaders"),      # inside the wheel
                os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "shaders"))  # the repo
_sources = {}


def shader(name):
    """The text of shaders/<name>.wgsl, after the shared shaders/common.wgsl."""
    if name not in _sources:
        for folder in _SHADER_DIRS:
            path = os.path.join(folder, f"{name}.wgsl")
            if os.path.exists(path):
                with open(path) as f:
                    _sources[name] = f.read()
                break
        else:
            raise RuntimeError(f"webgpu: shader file {name}.wgsl not found in {_SHADER_DIRS}")
    return _sources[name]


def fill(template, **slots):
    source = shader("common") + "\n" + shader(template)
    for name, value in slots.items():
        source = source.replace("{{" + name + "}}", value)
    return source


def _word(value, dtype):
    """A scalar operand as the u32 word its WGSL type is bitcast from."""
    if dtype.kind == "f":
        return f32_bits(float(value))
    return int(value) & 0xFFFFFFFF


def _groups(count, size=256):
    return max(1, -(-count // size))


def _buffer_request(shape, dtype):
    """runtime.alloc's arguments for a tensor of this shape and dtype: its bytes, and its name for
    a too-large error."""
    _check_gpu_dtype(dtype, "tensors of")
    nbytes = max(4, math.ceil(math.prod(shape) * dtype.gpu_itemsize / 4) * 4)
    return nbytes, lambda: f"a {dtype.name} tensor of shape {tuple(shape)}"


class _MapKernel:
    """What map works out once per key: the output's buffer size, the fixed parameter words
    (numel, ndim, then when strided the shape and the strides), the workgroups, and the pipeline
    (runtime.pipeline's arguments in compile until the first dispatch compiles it)."""
    __slots__ = ("nbytes", "what", "numel", "words", "groups", "compile", "pipeline")


# map's kernels kept; past this many (ever new shapes or strides) the cache starts over
MAP_KERNELS_KEPT = 4096


# Reduced elements per reduce workgroup (64 threads, 256 each): bigger reductions take two passes.
REDUCE_SPAN = 64 * 256
# A reduction with few outputs is split into chunks of at least this many elements until it has
# REDUCE_GROUPS workgroups: a GPU needs hundreds of workgroups in flight (on an H100 a conv's bias
# gradient, 16 outputs of 100k elements each, took 134 us on 112 workgroups; on 1024 it takes 26 us,
# and 12 us more for the second pass).
REDUCE_MIN_SPAN = 1024
REDUCE_GROUPS = 1024
# Reductions this short take one thread per output rather than a workgroup (reduce.wgsl per_thread).
PER_THREAD_REDUCE = 32
# Index positions one scatter_add dispatch sums per output (each thread loops over them).
SCATTER_SPAN = 4096
# The most logits one thread reads (row after row) where a cross-entropy's sum or mean is taken by
# one workgroup of 256 threads in the loss's own dispatch; more take a reduce and a scale after it.
# On an H100 each logit costs a thread ~0.12 us and the two dispatches saved ~20 us.
CROSS_ENTROPY_SUM_SPAN = 128
# The longest inner dimension one matmul workgroup walks on a software adapter, whose shader loops
# stop after ~65535 iterations (longer products split K).
SOFTWARE_MATMUL_K = 16384
# On a GPU, a product with fewer output tiles than this and a K of at least MATMUL_SPLIT_FROM_K
# splits K (at least MATMUL_MIN_SPLIT_K each) until it has about as many workgroups: the MLP's
# 128x784 @ 784x128 has 16 tiles of 32x32, so one dispatch would leave most of the GPU idle while
# each tile walks all of K. A shorter K is not worth the dispatch that sums the pieces (~10 us).
MATMUL_GROUPS = 256
MATMUL_SPLIT_FROM_K = 512
MATMUL_MIN_SPLIT_K = 64
# At most this many pieces (a conv's weight gradient, 16x9 outputs over a K of 100k, takes them all).
MATMUL_MAX_SPLITS = 256


class MatmulTiles(collections.namedtuple("MatmulTiles", "wx wy tm tn bk")):
    """A matmul kernel's shape (shaders/matmul.wgsl): wx x wy threads, each computing tm x tn
    outputs, stepping bk along K."""

    @property
    def workgroup_bytes(self):   # two halves of padded A and B slices, vec4 rows
        return 2 * self.bk * (self.wy * self.tm // 4 + 1 + self.wx * self.tn // 4 + 1) * 16


# Measured on an H100 over Vulkan (bench/matmul.py --sweep, bench/NOTES.md): the largest output
# tile that still gives the GPU enough work (outputs over all batches), and wastes at most half a
# tile on each matrix's edges.
_MATMUL_BY_SIZE = ((128 * 128 * 64, MatmulTiles(16, 16, 8, 8, 8)),
                   (64 * 64 * 64, MatmulTiles(16, 16, 4, 4, 16)),
                   (0, MatmulTiles(8, 8, 4, 4, 16)))
_MATMUL_SOFTWARE = MatmulTiles(8, 8, 4, 4, 16)   # a CPU rasterizer: few workgroups run at once


def matmul_tiles(m, n, batch, is_software, workgroup_limit=16384):
    if is_software:
        return _MATMUL_SOFTWARE
    fits = (tiles for least, tiles in _MATMUL_BY_SIZE
            if batch * m * n >= least and tiles.workgroup_bytes <= workgroup_limit
            and 2 * m >= tiles.wy * tiles.tm and 2 * n >= tiles.wx * tiles.tn)
    return next(fits, _MATMUL_BY_SIZE[-1][1])


def matmul_splits(m, n, k, batch, tiles, is_software):
    """How many pieces of K one product is split into (see shaders/matmul.wgsl)."""
    if is_software:
        return -(-k // SOFTWARE_MATMUL_K)
    if k < MATMUL_SPLIT_FROM_K:
        return 1
    groups = _groups(m, tiles.wy * tiles.tm) * _groups(n, tiles.wx * tiles.tn) * batch
    return max(1, min(-(-MATMUL_GROUPS // groups), k // MATMUL_MIN_SPLIT_K, MATMUL_MAX_SPLITS))


# shaders/matmul.wgsl's params: where A's and B's words start, and where the batch shape follows.
_A_WORDS, _B_WORDS, _BATCH_WORDS = 7, 11, 24


class MatmulOperand(collections.namedtuple("MatmulOperand", "storage form along_k wide words batch_strides")):
    """One side of a product as shaders/matmul.wgsl reads it. form:
      strided: a view's rows and columns; words: offset, row stride, column stride.
      ("split_k", K2) (A): K made of two dims (k = k1 * K2 + k2); words: offset, row stride, k1's and
        k2's strides.
      ("window", Ky, Kx, Ny, Nx) (B): a convolution's input windows, read in place (implicit im2col):
        K and N each walk three dims (c, y, x) (the last two of sizes Ky, Kx for K, Ny, Nx for N), each
        moving the address (c) or a row y / column x of the (H, W) image; outside it reads zero
        (padding). words: offset, H, W, y0, x0, y stride, x stride, then for K: c stride, y step,
        x step, and the same three for N.
    The sizes in a form are constants in the kernel: dividing by them is then cheap.
    along_k: stage along K (consecutive threads load consecutive k); wide: aligned for vec4 loads."""


def _strided_operand(t, side):
    """A strided view as operand "a" (..., M, K) or "b" (..., K, N), staged along its contiguous dim."""
    *_, rows, cols = t.shape
    along_k = t._strides[-1] <= t._strides[-2] if side == "a" else t._strides[-2] < t._strides[-1]
    wide = t._strides[-1] == 1 and cols % 4 == 0 and _words_of_4(t._offset, *t._strides[:-1])
    return MatmulOperand(t._storage, "strided", along_k, wide, [t._offset, *t._strides[-2:]],
                         list(t._strides[:-2]))


# Per operand of shaders/matmul.wgsl: its staged slice's rows and columns, the global row and
# column of a slot s and their bounds.
_MATMUL_OPERANDS = {"a": ("BM", "BK", "row0 + s.x", "t + s.y", "m", "k"),
                    "b": ("BK", "BN", "t + s.x", "col0 + s.y", "k", "n")}


def _tile_loader(x, form, cols_fast, wide):
    """WGSL for operand x: {x}_slot, thread tid's l-th position in the staged slice (row, col;
    consecutive threads walk the columns when cols_fast, else the rows; wide: the first of 4
    columns, a multiple of 4 in number), and load_{x}, the value there, zero past the edges."""
    rows, cols, r, c, r_end, c_end = _MATMUL_OPERANDS[x]
    w = _A_WORDS if x == "a" else _B_WORDS
    kind, zero = ("vec4<f32>", "vec4<f32>()") if wide else ("f32", "0.0")
    inside = [f"r < {r_end}", f"c < {c_end}"]
    row, col = f"min(r, {r_end} - 1u)", f"min(c, {c_end} - 1u)"
    if wide:
        slot = f"vec2(i / ({cols} / 4u), i % ({cols} / 4u) * 4u)"
        body = [f"let at_rc = (at + {row} * p[{w + 1}] + min(c, {c_end} - 4u)) / 4u;"]
    else:
        slot = f"vec2(i / {cols}, i % {cols})" if cols_fast else f"vec2(i % {rows}, i / {rows})"
    if form == "strided" and not wide:
        body = [f"let at_rc = at + {row} * p[{w + 1}] + {col} * p[{w + 2}];"]
    elif form[0] == "split_k":
        k2 = f"{form[1]}u"
        body = [f"let kk = {col};",
                f"let at_rc = at + {row} * p[{w + 1}] + kk / {k2} * p[{w + 2}] + kk % {k2} * p[{w + 3}];"]
    elif form[0] == "window":
        ky, kx, ny, nx = (f"{size}u" for size in form[1:])
        body = [f"let kk = {row};",
                f"let nn = {col};",
                f"let iy = i32(p[{w + 3}]) + i32(kk / {kx} % {ky}) * i32(p[{w + 8}]) + i32(nn / {nx} % {ny}) * i32(p[{w + 11}]);",
                f"let ix = i32(p[{w + 4}]) + i32(kk % {kx}) * i32(p[{w + 9}]) + i32(nn % {nx}) * i32(p[{w + 12}]);",
                f"let at_rc = at + kk / ({ky} * {kx}) * p[{w + 7}] + nn / ({ny} * {nx}) * p[{w + 10}]"
                f" + u32(clamp(iy, 0, i32(p[{w + 1}]) - 1)) * p[{w + 5}] + u32(clamp(ix, 0, i32(p[{w + 2}]) - 1)) * p[{w + 6}];"]
        inside += ["iy >= 0", f"iy < i32(p[{w + 1}])", "ix >= 0", f"ix < i32(p[{w + 2}])"]
    lines = "\n".join("    " + line for line in body)
    # `&`, not `&&`: short-circuit chains become nested branches, and SwiftShader's compiler never
    # finished the window loader's six of them (Chromium's conv kernels hung at pipeline creation).
    inside = " & ".join(f"({term})" for term in inside)
    return f"""
fn {x}_slot(tid: u32, l: u32) -> vec2<u32> {{
    let i = tid + l * THREADS;
    return {slot};
}}

fn load_{x}(s: vec2<u32>, row0: u32, col0: u32, t: u32, at: u32, m: u32, n: u32, k: u32) -> {kind} {{
    let r = {r};
    let c = {c};
{lines}
    return select({zero}, {x}[at_rc], {inside});
}}"""


def _matmul_source(tiles, a_form, b_form, a_along_k, b_along_k, bias_along, a_wide, b_wide):
    """shaders/matmul.wgsl with each thread's per-element work unrolled over named variables;
    forms and staging orders as in MatmulOperand; bias_along: None, "col" or "row" (the bias vector
    follows the output's columns or rows); a_wide / b_wide: the operand is read as vec4s."""
    wx, wy, tm, tn, bk = tiles
    a_loads = wy * tm * bk // (wx * wy) // (4 if a_wide else 1)
    b_loads = wx * tn * bk // (wx * wy) // (4 if b_wide else 1)
    runs_m, runs_n = range(tm // 4), range(tn // 4)
    acc = [(g * 4 + i, j) for g in runs_m for i in range(4) for j in runs_n]
    declare = [f"let sa{l} = a_slot(tid, {l}u);" for l in range(a_loads)]
    declare += [f"let sb{l} = b_slot(tid, {l}u);" for l in range(b_loads)]
    declare += [f"var na{l} = {'vec4<f32>()' if a_wide else '0.0'};" for l in range(a_loads)]
    declare += [f"var nb{l} = {'vec4<f32>()' if b_wide else '0.0'};" for l in range(b_loads)]
    declare += [f"var acc{r}_{j} = vec4<f32>();" for r, j in acc]

    def load(t):
        return ([f"na{l} = load_a(sa{l}, row0, col0, {t}, a_at, m, n, k);" for l in range(a_loads)] +
                [f"nb{l} = load_b(sb{l}, row0, col0, {t}, b_at, m, n, k);" for l in range(b_loads)])
    if a_wide:   # 4 consecutive k of one row: one float into each of 4 staged rows
        stage = [f"tile_a[half_a + (sa{l}.y + {e}u) * ROW_A + sa{l}.x / 4u][sa{l}.x % 4u] = na{l}.{'xyzw'[e]};"
                 for l in range(a_loads) for e in range(4)]
    else:
        stage = [f"tile_a[half_a + sa{l}.y * ROW_A + sa{l}.x / 4u][sa{l}.x % 4u] = na{l};" for l in range(a_loads)]
    if b_wide:   # 4 consecutive columns: one staged vec4
        stage += [f"tile_b[half_b + sb{l}.x * ROW_B + sb{l}.y / 4u] = nb{l};" for l in range(b_loads)]
    else:
        stage += [f"tile_b[half_b + sb{l}.x * ROW_B + sb{l}.y / 4u][sb{l}.y % 4u] = nb{l};" for l in range(b_loads)]
    # The staged slices' BK rows: unrolled (constant workgroup-memory offsets) for the 8x8-per-thread
    # tiles, which it speeds up by 15% on an H100 (4096^3: 0.49 -> 0.56 of cuBLAS); a loop for the
    # smaller tiles, where unrolling measured no better.
    unrolled = tm * tn >= 64
    multiply = [] if unrolled else ["for (var kk = 0u; kk < BK; kk++) {"]
    for step in range(bk) if unrolled else ["kk"]:
        kk, name = (f"{step}u", f"_{step}") if unrolled else ("kk", "")
        multiply += [f"let b{j}{name} = tile_b[half_b + {kk} * ROW_B + {j}u * WX + lid.x];" for j in runs_n]
        multiply += [f"let a{g}{name} = tile_a[half_a + {kk} * ROW_A + {g}u * WY + lid.y];" for g in runs_m]
        multiply += [f"acc{r}_{j} = fma(vec4(a{r // 4}{name}.{'xyzw'[r % 4]}), b{j}{name}, acc{r}_{j});"
                     for r, j in acc]
    multiply += [] if unrolled else ["}"]
    store = []
    for g in runs_m:
        for i in range(4):
            store.append(f"if (row0 + {g * 4}u * WY + lid.y * 4u + {i}u < m) {{")
            store.append(f"    let at = base + (row0 + {g * 4}u * WY + lid.y * 4u + {i}u) * n;")
            for j in runs_n:
                for lane in range(4):
                    col = f"col0 + {j * 4}u * WX + lid.x * 4u + {lane}u"
                    row = f"row0 + {g * 4}u * WY + lid.y * 4u + {i}u"
                    value = f"acc{g * 4 + i}_{j}.{'xyzw'[lane]}"
                    if bias_along:
                        value += f" + bias_at({col if bias_along == 'col' else row}, split)"
                    store.append(f"    if ({col} < n) {{ out[at + {col}] = {value}; }}")
            store.append("}")

    def block(lines, indent):
        return "\n".join(" " * indent + line for line in lines)
    bias = "" if bias_along is None else (
        "@group(0) @binding(4) var<storage, read> bias: array<f32>;\n"
        "fn bias_at(i: u32, split: u32) -> f32 {\n"
        "    return select(0.0, bias[p[5] + i * p[6]], split == 0u);\n}")
    return fill("matmul", a_words=str(_A_WORDS), b_words=str(_B_WORDS), batch_words=str(_BATCH_WORDS),
                bias=bias, wx=str(wx), wy=str(wy), tm=str(tm), tn=str(tn), bk=str(bk),
                loaders=_tile_loader("a", a_form, a_along_k, a_wide) + "\n" + _tile_loader("b", b_form, not b_along_k, b_wide),
                a_type="vec4<f32>" if a_wide else "f32", b_type="vec4<f32>" if b_wide else "f32",
                declare=block(declare, 4), load_first=block(load("k0"), 4), stage=block(stage, 8),
                load_next=block(load("t + BK"), 12), multiply=block(multiply, 8), store=block(store, 4))


def _window_operand(image, padding, k_dims, n_dims, batch_strides, along_k):
    """B as MatmulOperand "window" over the (H, W) planes of image (..., H, W): k_dims and n_dims are
    ((sizes c, y, x), (c stride, y step, x step)); the first window starts at -padding."""
    (_, ky, kx), k_steps = k_dims
    (_, ny, nx), n_steps = n_dims
    words = [image._offset, *image.shape[-2:], -padding[0], -padding[1], *image._strides[-2:], *k_steps, *n_steps]
    words = [word & 0xFFFFFFFF for word in words]   # origins and steps may be negative: the kernel reads i32
    return MatmulOperand(image._storage, ("window", ky, kx, ny, nx), along_k, False, words, batch_strides)


def _words_of_4(*positions):
    """Offsets and strides that keep every row on a 16-byte boundary (vec4 loads)."""
    return all(v % 4 == 0 for v in positions)


def _check_gpu_dtype(dtype, what):
    if dtype is dtypes.float64:
        raise TypeError(f"webgpu: {what} float64 is not supported (WGSL has no f64); use float32")


_LOWEST = {"f32": "f32_from_bits(0xff800000u)", "i32": "bitcast<i32>(0x80000000u)", "u32": "0u"}
_HIGHEST = {"f32": "f32_from_bits(0x7f800000u)", "i32": "2147483647", "u32": "0xffffffffu"}


class WebGPUBackend:
    name = "webgpu"

    def __init__(self, driver):
        self.driver = driver
        self.runtime = Runtime(driver)
        self._map_kernels = {}   # map's key -> _MapKernel
        self.is_software = driver.is_software
        self.info = driver.info

    @classmethod
    def create(cls):
        if sys.platform == "emscripten":
            from .browser import BrowserDriver
            return cls(BrowserDriver())
        from .native import NativeDriver
        return cls(NativeDriver())

    # ---- host transfer ----
    def empty(self, numel, dtype):
        return self._empty((numel,), dtype)

    def _empty(self, shape, dtype):
        """A buffer for a tensor of this shape; shape only names the tensor in a too-large error."""
        return self.runtime.alloc(*_buffer_request(shape, dtype))

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
        if t.dtype is dtypes.uint8:
            # bytes are packed four to a word; read the whole span and pick the elements here
            span = (t._offset, t._offset + sum((s - 1) * st for s, st in zip(t.shape, t._strides)) + 1)
            raw = bytes(self.runtime.read(t._storage, span[0], span[1] - span[0])) if t.numel() else b""
            return bytes(raw[p - span[0]] for p in _positions(t)) if not t.is_contiguous() else raw[:t.numel()]
        if not t.is_contiguous():
            t = t.clone()
        size = t.dtype.gpu_itemsize
        raw = self.runtime.read(t._storage, t._offset * size, t.numel() * size) if t.numel() else b""
        if t.dtype is dtypes.bool_:   # one u32 word per element on the GPU, one byte on the host
            return bytes(memoryview(raw).cast("I").tolist())
        return bytes(raw)

    # ---- kernels ----
    def map(self, op, args, shape, compute, out_dtype, out=None):
        # All but the offsets and scalar operands follows from this key: a repeated op (the common
        # case) reuses its _MapKernel instead of working out its kernel and words again.
        key = [op, shape, compute, out_dtype, None if out is None else out._strides]
        storages = [None if out is None else out._storage]
        offsets = [0 if out is None else out._offset]
        scalars = []
        for a in args:
            if hasattr(a, "_storage"):
                key += (a.dtype, a._strides)
                storages.append(a._storage)
                offsets.append(a._offset)
            else:
                key.append(None)
                scalars.append(_word(a, compute))
        key = tuple(key)
        kernel = self._map_kernels.get(key) or self._map_kernel(key, op, args, shape, compute, out_dtype, out)
        if out is None:
            storages[0] = self.runtime.alloc(kernel.nbytes, kernel.what)
        if kernel.numel:
            if kernel.pipeline is None:   # compiled after the allocation, which raises first if too large
                kernel.pipeline = self.runtime.pipeline(*kernel.compile)
            self.runtime.dispatch(kernel.pipeline, storages, kernel.words + offsets + scalars, kernel.groups)
        return storages[0]

    def _map_kernel(self, key, op, args, shape, compute, out_dtype, out):
        """map's checks, and the _MapKernel for its key."""
        _check_gpu_dtype(compute, "computing in")
        if out_dtype is dtypes.uint8:
            raise TypeError(f"webgpu: {op.name} cannot produce uint8 (GPU kernels write 32-bit words); "
                            "convert with .float() or .int() first")
        kernel = _MapKernel()
        kernel.nbytes, kernel.what = _buffer_request(shape, out_dtype) if out is None else (0, None)
        kernel.numel = math.prod(shape)
        kinds = tuple(a.dtype if hasattr(a, "_storage") else None for a in args)
        tensors = [a for a in args if hasattr(a, "_storage")]
        layouts = [out] + tensors if out is not None else tensors
        nd = 0 if all(t.is_contiguous() for t in layouts) else len(shape)
        kernel.words = [kernel.numel, nd]
        if nd:
            kernel.words += [*shape, *(out._strides if out is not None else _contiguous(shape))]
            kernel.words += [stride for t in tensors for stride in t._strides]
        kernel.groups = _groups(kernel.numel)
        pipeline_key = ("elementwise", op.name, op.wgsl, compute.name, out_dtype.name, nd,
                        tuple("scalar" if kind is None else kind.name for kind in kinds))
        kernel.compile = (pipeline_key, lambda: self._map_source(op, kinds, compute, out_dtype, nd), "main",
                          ("read_write",) + ("read",) * len(tensors))
        kernel.pipeline = None
        if len(self._map_kernels) >= MAP_KERNELS_KEPT:
            self._map_kernels.clear()
        self._map_kernels[key] = kernel
        return kernel

    @staticmethod
    def _map_source(op, kinds, compute, out_dtype, nd):
        """The kernel for op over operands of nd strided dims (0: all contiguous); kinds: each
        operand's dtype, None for a scalar. The element's coordinates are found once, unrolled
        over the nd dims, and shared by every operand. Parameter words: shaders/elementwise.wgsl."""
        names = "abc"
        bindings = [f"@group(0) @binding(1) var<storage, read_write> out: array<{out_dtype.wgsl}>;"]
        body = []
        if nd:
            body.append("    var rest = i;")
            for d in range(nd - 1, 0, -1):
                body.append(f"    let c{d} = rest % p[{2 + d}u];")
                body.append(f"    rest /= p[{2 + d}u];")
            body.append("    let c0 = rest;")
        n_tensors = sum(1 for kind in kinds if kind is not None)
        offsets = 2 + nd + (n_tensors + 1) * nd   # after numel, ndim, the shape and the strides

        def element(slot):
            strides = 2 + nd + slot * nd
            return f"p[{offsets + slot}u]" + ("".join(f" + c{d} * p[{strides + d}u]" for d in range(nd)) or " + i")

        body.append(f"    let o = {element(0)};")
        slot = scalar = 0
        for k, kind in enumerate(kinds):
            raw = op.arg_kinds is not None and op.arg_kinds[k] is not None
            if kind is not None:
                slot += 1
                bindings.append(f"@group(0) @binding({slot + 1}) var<storage, read> in{slot}: "
                                f"array<{kind.wgsl}>;")
                body.append(f"    let e{slot} = {element(slot)};")
                value = f"byte_at(in{slot}[e{slot} >> 2u], e{slot})" if kind is dtypes.uint8 else f"in{slot}[e{slot}]"
                body.append(f"    let {names[k]} = {value if raw else f'T({value})'};")
            else:
                word = f"p[{offsets + n_tensors + 1 + scalar}u]"
                body.append(f"    let {names[k]} = {word if compute.wgsl == 'u32' else f'bitcast<T>({word})'};")
                scalar += 1
        body.append(f"    out[o] = {op.wgsl};")
        return fill("elementwise", compute=compute.wgsl, bindings="\n".join(bindings), body="\n".join(body))

    def reduce(self, op, x, dims, out_dtype):
        _check_gpu_dtype(x.dtype, "reducing")
        if out_dtype is dtypes.uint8:
            raise TypeError(f"webgpu: {op.name} cannot produce uint8 (GPU kernels write 32-bit words); "
                            "convert with .int() or .float() first")
        kept = [d for d in range(x.ndim) if d not in dims]
        n_out = math.prod(x.shape[d] for d in kept)
        n_red = math.prod(x.shape[d] for d in dims)
        chunks = max(1, -(-n_red // REDUCE_SPAN), min(-(-n_red // REDUCE_MIN_SPAN), -(-REDUCE_GROUPS // max(1, n_out))))
        if chunks == 1 or n_out == 0:
            return self._reduce_pass(op, x, kept, dims, out_dtype, n_out, n_red, 1)
        # Two passes: each chunk's result, then those reduced per output. An arg op's chunks give
        # the index they picked; the second pass compares x at those indices.
        if op.arg:
            picked = self._reduce_pass(op, x, kept, dims, dtypes.int32, n_out, n_red, chunks)
            return self._reduce_pass(op, x, kept, dims, out_dtype, n_out, chunks, 1, picked=picked)
        partial_dtype = dtypes.float32 if x.dtype.is_floating_point else dtypes.int32
        partial = self._reduce_pass(op, x, kept, dims, partial_dtype, n_out, n_red, chunks)
        from ..._tensor import Tensor
        return self.reduce(op, Tensor(partial, (n_out, chunks), partial_dtype, "webgpu"), (1,), out_dtype)

    def _reduce_pass(self, op, x, kept, dims, out_dtype, n_out, count, chunks, picked=None):
        """One dispatch of shaders/reduce.wgsl: `chunks` workgroups per output, each reducing up to
        REDUCE_SPAN of the `count` positions (reduced indices, or the chunks' picked indices)."""
        storage = self._empty((n_out * chunks,), out_dtype)
        if n_out == 0:
            return storage
        compute = "f32" if x.dtype.is_floating_point else "i32"
        load = "byte_at(x[at >> 2u], at)" if x.dtype is dtypes.uint8 else "x[at]"
        per_thread = chunks == 1 and count <= PER_THREAD_REDUCE
        entry = "per_thread" if per_thread else "main"
        key = ("reduce", op.name, x.dtype.name, out_dtype.name, picked is not None, entry)
        store = "out[w] = i32(at);" if op.arg else f"out[w] = {out_dtype.wgsl}(acc);"
        if picked is None:
            picked_binding, index = "", "let j = k;"
        else:
            picked_binding = "@group(0) @binding(3) var<storage, read> picked: array<i32>;"
            index = "let c = picked[o * p[1] + k];\n            if (c < 0) { continue; }\n            let j = u32(c);"
        pipeline = self.runtime.pipeline(key, lambda: fill(
            "reduce", compute=compute, out_type=out_dtype.wgsl, in_type=x.dtype.wgsl, load=f"T({load})",
            lowest=_LOWEST[compute], highest=_HIGHEST[compute], identity=op.identity,
            combine=op.combine, store=store, picked_binding=picked_binding, index=index),
            entry=entry, bindings=("read_write", "read") + (("read",) if picked is not None else ()))
        span = -(-count // chunks)
        words = [n_out, count, len(kept), len(dims), x._offset, chunks, span,
                 *(x.shape[d] for d in kept), *(x._strides[d] for d in kept),
                 *(x.shape[d] for d in dims), *(x._strides[d] for d in dims)]
        self.runtime.dispatch(pipeline, [storage, x._storage] + ([picked] if picked is not None else []),
                              words, _groups(n_out, 64) if per_thread else n_out * chunks)
        return storage

    def matmul(self, a, b, bias=None, bias_dim=-1):
        """(*B, M, K) @ (*B, K, N), plus bias along the columns (bias_dim -1) or rows (-2)."""
        _check_gpu_dtype(a.dtype, "matmul in")
        *batch, m, k = a.shape
        return self._product(_strided_operand(a, "a"), _strided_operand(b, "b"), m, b.shape[-1], k, batch,
                             bias, bias_dim, a.dtype)

    def _product(self, a, b, m, n, k, batch, bias, bias_dim, dtype):
        """One shaders/matmul.wgsl dispatch (then a sum over the pieces of a split K) of MatmulOperands."""
        nb, count = len(batch), math.prod(batch)
        if count * m * n == 0:
            return self._empty((*batch, m, n), dtype)
        if k == 0:
            return self._empty_product((*batch, m, n), bias, bias_dim, dtype)
        tiles = matmul_tiles(m, n, count, self.is_software, self.runtime.limits["max_compute_workgroup_storage_size"])
        splits = matmul_splits(m, n, k, count, tiles, self.is_software)
        split_k = -(-k // splits // tiles.bk) * tiles.bk
        splits = -(-k // split_k)
        storage = self._empty((splits, *batch, m, n) if splits > 1 else (*batch, m, n), dtype)
        bias_along = None if bias is None else ("col", "row")[bias_dim == -2]
        threads = tiles.wx * tiles.wy
        a_wide = a.wide and tiles.wy * tiles.tm * tiles.bk % (4 * threads) == 0
        b_wide = b.wide and tiles.wx * tiles.tn * tiles.bk % (4 * threads) == 0
        key = (tiles, a.form, b.form, a.along_k, b.along_k, bias_along, a_wide, b_wide)
        pipeline = self.runtime.pipeline(("matmul", *key), lambda: _matmul_source(*key),
                                         bindings=("read_write", "read", "read") + (("read",) if bias is not None else ()))
        words = [m, n, k, nb, split_k, *((bias._offset, bias._strides[0]) if bias is not None else (0, 0))]
        words += a.words + [0] * (_B_WORDS - _A_WORDS - len(a.words))
        words += b.words + [0] * (_BATCH_WORDS - _B_WORDS - len(b.words))
        words += [*batch, *a.batch_strides, *b.batch_strides]
        storages = [storage, a.storage, b.storage] + ([bias._storage] if bias is not None else [])
        self.runtime.dispatch(pipeline, storages, words,
                              (_groups(n, tiles.wx * tiles.tn), _groups(m, tiles.wy * tiles.tm), count * splits))
        if splits == 1:
            return storage
        from ...ops.reduce import SUM
        from ..._tensor import Tensor
        return self.reduce(SUM, Tensor(storage, (splits, count * m * n), dtype, "webgpu"), (0,), dtype)

    def _empty_product(self, shape, bias, bias_dim, dtype):
        """A product over an empty K: zeros, plus the bias."""
        from ...ops.creation import FILL
        from ...ops.elementwise import ADD
        from ..._tensor import Tensor
        zeros = self.map(FILL, (0.0,), shape, dtype, dtype)
        if bias is None:
            return zeros
        along = bias if bias_dim == -1 else bias.reshape(-1, 1)
        return self.map(ADD, (Tensor(zeros, shape, dtype, "webgpu"), along.expand(shape)), shape, dtype, dtype)

    # ---- convolution: products whose B operand reads an image's windows in place (implicit im2col) ----
    def conv2d(self, x, weight, bias, stride, padding, dilation):
        """(N, C, H, W) input, (Co, C, kh, kw) contiguous weight, bias (Co) or None -> (N, Co, Ho, Wo)."""
        _check_gpu_dtype(x.dtype, "conv2d in")
        n, c, h, w = x.shape
        co, _, kh, kw = weight.shape
        (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
        ho, wo = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1, (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
        k = c * kh * kw
        rows = MatmulOperand(weight._storage, "strided", True, k % 4 == 0 and _words_of_4(weight._offset),
                             [weight._offset, k, 1], [0])
        windows = _window_operand(x, padding, ((c, kh, kw), (x._strides[1], dh, dw)), ((1, ho, wo), (0, sh, sw)),
                                  [x._strides[0]], along_k=False)
        return self._product(rows, windows, co, ho * wo, k, (n,), bias, -2, x.dtype)

    def conv2d_input_grad(self, grad, weight, in_shape, padding, dilation):
        """The input's gradient of a stride-1 conv2d: grad (N, Co, Ho, Wo) through the flipped kernel
        (the windows of grad, walked backwards), weight (Co, C, kh, kw) contiguous -> (N, C, H, W)."""
        n, c, h, w = in_shape
        co, _, kh, kw = weight.shape
        weight_t = MatmulOperand(weight._storage, ("split_k", kh * kw), True, False,
                                 [weight._offset, kh * kw, c * kh * kw, 1], [0])
        windows = _window_operand(grad, (-padding[0], -padding[1]),
                                  ((co, kh, kw), (grad._strides[1], -dilation[0], -dilation[1])),
                                  ((1, h, w), (0, 1, 1)), [grad._strides[0]], along_k=False)
        return self._product(weight_t, windows, c, h * w, co * kh * kw, (n,), None, -1, grad.dtype)

    def conv2d_weight_grad(self, grad, x, kernel, stride, padding, dilation):
        """The weight's gradient: grad (N, Co, Ho, Wo) contiguous times x's windows, summed over the
        batch and the output pixels -> (Co, C * kh * kw)."""
        n, co, ho, wo = grad.shape
        c = x.shape[1]
        grad_rows = MatmulOperand(grad._storage, ("split_k", ho * wo), True, False,
                                  [grad._offset, ho * wo, co * ho * wo, 1], [])
        windows = _window_operand(x, padding, ((n, ho, wo), (x._strides[0], stride[0], stride[1])),
                                  ((c, *kernel), (x._strides[1], dilation[0], dilation[1])), [], along_k=True)
        return self._product(grad_rows, windows, co, c * kernel[0] * kernel[1], n * ho * wo, (), None, -1, grad.dtype)

    def gather(self, x, dim, index):
        return self._gather_kernel("gather", x.dtype, index.shape, [x, index], [
            x.shape[dim], math.prod(index.shape[dim + 1:]), *index.shape,
            x._offset, *x._strides, index._offset, *index._strides], dim)

    def scatter_add(self, grad, dim, index, shape):
        """Each output sums over the index's positions along dim, in pieces of SCATTER_SPAN
        positions (lavapipe ends longer loops early), the later pieces adding to the first's."""
        storage = None
        for start in range(0, max(1, index.shape[dim]), SCATTER_SPAN):
            size = min(SCATTER_SPAN, index.shape[dim] - start)
            piece = (*index.shape[:dim], size, *index.shape[dim + 1:])
            storage = self._gather_kernel("scatter_add", grad.dtype, shape, [grad, index], [
                size, int(storage is not None), *shape, *piece,
                index._offset + start * index._strides[dim], *index._strides,
                grad._offset + start * grad._strides[dim], *grad._strides], dim, storage)
        return storage

    def _gather_kernel(self, entry, dtype, shape, inputs, words, dim, storage=None):
        _check_gpu_dtype(dtype, f"{entry} of")
        if dtype is dtypes.uint8:
            raise TypeError(f"webgpu: {entry} of uint8 tensors is not supported; convert with .int() first")
        numel = math.prod(shape)
        storage = storage if storage is not None else self._empty(shape, dtype)
        if numel:
            pipeline = self.runtime.pipeline(("gather", entry, dtype.name), lambda: fill("gather", type=dtype.wgsl),
                                             entry=entry, bindings=("read_write", "read", "read"))
            self.runtime.dispatch(pipeline, [storage] + [t._storage for t in inputs],
                                  [numel, len(shape), dim] + words, _groups(numel))
        return storage

    def cross_entropy(self, logits, labels, scale=None):
        """(loss, lse) of (N, C) logits against int labels (shaders/cross_entropy.wgsl): the loss per
        row, or given a scale, the rows' sum times it, in the same dispatch where that fits."""
        rows, classes = logits.shape
        lse, words = self.empty(rows, logits.dtype), _cross_entropy_words(logits, labels, scale)
        inputs = [lse, logits._storage, labels._storage]
        if scale is not None and rows and _groups(rows) * classes <= CROSS_ENTROPY_SUM_SPAN:
            loss = self.empty(1, logits.dtype)
            self.runtime.dispatch(self._cross_entropy_kernel("forward_sum"), [loss] + inputs, words, 1)
            return loss, lse
        loss = self.empty(rows, logits.dtype)
        if rows:
            self.runtime.dispatch(self._cross_entropy_kernel("forward"), [loss] + inputs, words, rows)
        if scale is None:
            return loss, lse
        from ...ops.elementwise import MUL
        from ...ops.reduce import SUM
        from ..._tensor import Tensor
        total = Tensor(self.reduce(SUM, Tensor(loss, (rows,), logits.dtype, "webgpu"), (0,), logits.dtype),
                       (), logits.dtype, "webgpu")
        return self.map(MUL, (total, scale), (), logits.dtype, logits.dtype), lse

    def cross_entropy_backward(self, logits, labels, lse, grad, scale):
        """d logits, times scale, for an upstream gradient per row (grad, an (N,) view) or of 1 (None)."""
        numel = logits.numel()
        out = self.empty(numel, logits.dtype)
        if numel:
            words = _cross_entropy_words(logits, labels, scale)
            storages = [out, lse._storage, logits._storage, labels._storage]
            if grad is not None:
                words += [grad._offset, grad._strides[0]]
                storages.append(grad._storage)
            self.runtime.dispatch(self._cross_entropy_kernel("backward", grad is not None), storages, words,
                                  _groups(numel))
        return out

    def _cross_entropy_kernel(self, entry, with_grad=False):
        upstream = "grad[p[8] + n * p[9]] * pf(7)" if with_grad else "pf(7)"
        return self.runtime.pipeline(("cross_entropy", entry, with_grad),
                                     lambda: fill("cross_entropy", upstream=upstream), entry=entry,
                                     bindings=("read_write", "read_write", "read", "read") + ("read",) * with_grad)

    def fold(self, g, shape, kernel, stride, dilation, padding=(0, 0)):
        """Sum the sliding-window view g (N, C, kh, kw, Ho, Wo) of an (N, C, H, W) input, padded by
        `padding` on each side, back into that input's shape."""
        _check_gpu_dtype(g.dtype, "fold of")
        numel = math.prod(shape)
        storage = self._empty(shape, g.dtype)
        if numel:
            pipeline = self.runtime.pipeline(("fold",), lambda: fill("fold"))
            words = [numel, shape[2], shape[3], *kernel, *g.shape[4:], *stride, *dilation, shape[1],
                     g._offset, *g._strides, *padding]
            self.runtime.dispatch(pipeline, [storage, g._storage], words, _groups(numel))
        return storage

    def max_pool2d(self, x, shape, kernel, stride, padding, dilation):
        """(values, int32 indices in each input plane) of max pooling x into shape (N, C, Ho, Wo)."""
        _check_gpu_dtype(x.dtype, "max_pool2d of")
        if x.dtype is dtypes.uint8:
            raise TypeError("webgpu: max_pool2d of uint8 tensors is not supported (bytes are packed four to a "
                            "word); convert with .int() or .float() first")
        values, indices = self._empty(shape, x.dtype), self._empty(shape, dtypes.int32)
        self._pool("max_forward", values, indices, x, x.shape, shape, (kernel, stride, padding, dilation))
        return values, indices

    def max_pool2d_backward(self, grad, indices, shape, kernel, stride, padding, dilation):
        """The gradient of the (N, C, H, W) input of shape `shape`, from the pooled values' gradient."""
        out = self._empty(shape, grad.dtype)
        self._pool("max_backward", out, indices._storage, grad, shape, grad.shape,
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
                                             lambda: fill("pool", type=dtype.wgsl, is_nan=is_nan,
                                                          lowest=_LOWEST[dtype.wgsl], **constants),
                                             entry=entry, bindings=("read_write", "read_write", "read"))
            words = [numel, src._offset, *src._strides]
            self.runtime.dispatch(pipeline, [out, picked, src._storage], words, _groups(numel))

    def random(self, numel, normal, draw, dtype):
        """draw() gives (seed, offset) and moves the generator on; it runs again at each replay."""
        _check_gpu_dtype(dtype, "random")
        storage = self.empty(numel, dtype)
        if numel:
            pipeline = self.runtime.pipeline(("random",), lambda: fill("random"), bindings=("read_write",))

            def words():
                return [numel, *draw(), int(normal)]
            self.runtime.dispatch(pipeline, [storage], words(), _groups(numel), refresh=words)
        return storage

    def permutation(self, n, half, draw):
        """randperm(n) as int32 (shaders/random.wgsl's permutation); draw() as for random."""
        storage = self.empty(n, dtypes.int32)
        if n:
            pipeline = self.runtime.pipeline(("random", "permutation"), lambda: fill("random"),
                                             entry="permutation", bindings=("read_write",))

            def words():
                return [n, *draw(), half]
            self.runtime.dispatch(pipeline, [storage], words(), _groups(n), refresh=words)
        return storage

    def optimizer_step(self, kind, param, grad, states, hyper):
        """kind 'sgd', 'sgd_momentum' or 'adam': update param (and its state tensors) in place; hyper()
        gives the kernel's hyperparameters (floats, with flags as ints, see shaders/optim.wgsl) and
        runs again at each replay, so learning-rate changes and step counts reach replayed steps."""
        numel = param.numel()
        if numel == 0:
            return
        bindings = ("read_write", "read") + ("read_write",) * len(states)
        pipeline = self.runtime.pipeline(("optim", kind, len(states)), lambda: fill("optim"),
                                         entry=kind, bindings=bindings)

        def words():
            return [numel, param._offset, grad._offset] + [
                h if isinstance(h, int) and not isinstance(h, bool) else f32_bits(h) for h in hyper()]
        self.runtime.dispatch(pipeline, [param._storage, grad._storage] + [s._storage for s in states],
                              words(), _groups(numel), refresh=words)

    def sync(self):
        self.runtime.sync()

    def memory_stats(self):
        return self.runtime.memory_stats()


def _cross_entropy_words(logits, labels, scale):
    return [*logits.shape, logits._offset, *logits._strides, labels._offset, labels._strides[0],
            f32_bits(1.0 if scale is None else scale)]


def _contiguous(shape):
    from ..._tensor import contiguous_strides
    return contiguous_strides(shape)


def _positions(t):
    """Element positions of a strided view, in row-major order."""
    positions = [t._offset]
    for size, stride in zip(t.shape, t._strides):
        positions = [p + i * stride for p in positions for i in range(size)]
    return positions
