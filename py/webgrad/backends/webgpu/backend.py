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


class MatmulTiles(collections.namedtuple("MatmulTiles", "wx wy tm tn bk")):
    """A matmul kernel's shape (shaders/matmul.wgsl): wx x wy threads, each computing tm x tn
    outputs, stepping bk along K."""

    @property
    def workgroup_bytes(self):   # two halves of padded A and B slices, vec4 rows
        return 2 * self.bk * (self.wy * self.tm // 4 + 1 + self.wx * self.tn // 4 + 1) * 16


# Measured on an H100 over Vulkan (bench/matmul.py --sweep, bench/NOTES.md): the largest output
# tile that still gives the GPU enough workgroups to fill it.
_MATMUL_BY_SIZE = ((128 * 128 * 64, MatmulTiles(16, 16, 8, 8, 8)),
                   (64 * 64 * 64, MatmulTiles(16, 16, 4, 4, 16)),
                   (0, MatmulTiles(8, 8, 4, 4, 16)))
_MATMUL_SOFTWARE = MatmulTiles(8, 8, 4, 4, 16)   # a CPU rasterizer: few workgroups run at once


def matmul_tiles(m, n, is_software, workgroup_limit=16384):
    if is_software:
        return _MATMUL_SOFTWARE
    return next(tiles for least, tiles in _MATMUL_BY_SIZE
                if m * n >= least and tiles.workgroup_bytes <= workgroup_limit)


def _matmul_source(tiles, a_along_k, b_along_k):
    """shaders/matmul.wgsl with each thread's per-element work unrolled over named variables."""
    wx, wy, tm, tn, bk = tiles
    a_loads, b_loads = wy * tm * bk // (wx * wy), wx * tn * bk // (wx * wy)
    runs_m, runs_n = range(tm // 4), range(tn // 4)
    acc = [(g * 4 + i, j) for g in runs_m for i in range(4) for j in runs_n]
    declare = [f"let sa{l} = a_slot(tid, {l}u);" for l in range(a_loads)]
    declare += [f"let sb{l} = b_slot(tid, {l}u);" for l in range(b_loads)]
    declare += [f"var na{l} = 0.0;" for l in range(a_loads)] + [f"var nb{l} = 0.0;" for l in range(b_loads)]
    declare += [f"var acc{r}_{j} = vec4<f32>();" for r, j in acc]

    def load(t):
        return ([f"na{l} = load_a(sa{l}, row0, {t}, a_at, m, k);" for l in range(a_loads)] +
                [f"nb{l} = load_b(sb{l}, col0, {t}, b_at, n, k);" for l in range(b_loads)])
    stage = [f"tile_a[half_a + sa{l}.y * ROW_A + sa{l}.x / 4u][sa{l}.x % 4u] = na{l};" for l in range(a_loads)]
    stage += [f"tile_b[half_b + sb{l}.x * ROW_B + sb{l}.y / 4u][sb{l}.y % 4u] = nb{l};" for l in range(b_loads)]
    multiply = [f"let b{j} = tile_b[half_b + kk * ROW_B + {j}u * WX + lid.x];" for j in runs_n]
    multiply += [f"let a{g} = tile_a[half_a + kk * ROW_A + {g}u * WY + lid.y];" for g in runs_m]
    multiply += [f"acc{r}_{j} = fma(vec4(a{r // 4}.{'xyzw'[r % 4]}), b{j}, acc{r}_{j});" for r, j in acc]
    store = []
    for g in runs_m:
        for i in range(4):
            store.append(f"if (row0 + {g * 4}u * WY + lid.y * 4u + {i}u < m) {{")
            store.append(f"    let at = base + (row0 + {g * 4}u * WY + lid.y * 4u + {i}u) * n;")
            for j in runs_n:
                for lane in range(4):
                    col = f"col0 + {j * 4}u * WX + lid.x * 4u + {lane}u"
                    store.append(f"    if ({col} < n) {{ out[at + {col}] = acc{g * 4 + i}_{j}.{'xyzw'[lane]}; }}")
            store.append("}")

    def block(lines, indent):
        return "\n".join(" " * indent + line for line in lines)
    return fill("matmul", wx=str(wx), wy=str(wy), tm=str(tm), tn=str(tn), bk=str(bk),
                a_along_k=str(a_along_k).lower(), b_along_k=str(b_along_k).lower(),
                declare=block(declare, 4), load_first=block(load("0u"), 4), stage=block(stage, 8),
                load_next=block(load("t + BK"), 12), multiply=block(multiply, 12), store=block(store, 4))


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
        _check_gpu_dtype(dtype, "tensors of")
        return self.runtime.alloc(max(4, math.ceil(numel * dtype.gpu_itemsize / 4) * 4))

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
        _check_gpu_dtype(compute, "computing in")
        if out_dtype is dtypes.uint8:
            raise TypeError(f"webgpu: {op.name} cannot produce uint8 (GPU kernels write 32-bit words); "
                            "convert with .float() or .int() first")
        numel = math.prod(shape)
        storage = out._storage if out is not None else self.empty(numel, out_dtype)
        if numel == 0:
            return storage
        tensors = [a for a in args if hasattr(a, "_storage")]
        layouts = [out] + tensors if out is not None else tensors
        contiguous = all(t.is_contiguous() for t in layouts)
        key = ("elementwise", op.name, op.wgsl, compute.name, out_dtype.name, contiguous,
               tuple((a.dtype.name if hasattr(a, "_storage") else "scalar") for a in args))
        pipeline = self.runtime.pipeline(key, lambda: self._map_source(op, args, compute, out_dtype, contiguous),
                                         bindings=("read_write",) + ("read",) * len(tensors))
        nd = 0 if contiguous else len(shape)
        words = [numel, nd, *(shape if nd else ())]
        words += [out._offset if out is not None else 0, *((out._strides if out is not None else
                                                             _contiguous(shape)) if nd else ())]
        for t in tensors:
            words += [t._offset, *(t._strides if nd else ())]
        words += [_word(a, compute) for a in args if not hasattr(a, "_storage")]
        self.runtime.dispatch(pipeline, [storage] + [t._storage for t in tensors], words, _groups(numel))
        return storage

    @staticmethod
    def _map_source(op, args, compute, out_dtype, contiguous):
        names = "abc"
        bindings = [f"@group(0) @binding(1) var<storage, read_write> out: array<{out_dtype.wgsl}>;"]
        body = []

        def element(slot):
            layout = f"2u + nd + {slot}u * (1u + nd)"
            return f"p[{layout}] + i" if contiguous else f"strided(i, nd, 2u, {layout})"

        body.append(f"    let o = {element(0)};")
        n_tensors = sum(1 for a in args if hasattr(a, "_storage"))
        slot = scalar = 0
        for k, a in enumerate(args):
            raw = op.arg_kinds is not None and op.arg_kinds[k] is not None
            if hasattr(a, "_storage"):
                slot += 1
                bindings.append(f"@group(0) @binding({slot + 1}) var<storage, read> in{slot}: "
                                f"array<{a.dtype.wgsl}>;")
                body.append(f"    let e{slot} = {element(slot)};")
                value = f"byte_at(in{slot}[e{slot} >> 2u], e{slot})" if a.dtype is dtypes.uint8 else f"in{slot}[e{slot}]"
                body.append(f"    let {names[k]} = {value if raw else f'T({value})'};")
            else:
                word = f"p[2u + nd + {n_tensors + 1}u * (1u + nd) + {scalar}u]"
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
        storage = self.empty(n_out, out_dtype)
        if n_out == 0:
            return storage
        compute = "f32" if x.dtype.is_floating_point else "i32"
        load = "byte_at(x[at >> 2u], at)" if x.dtype is dtypes.uint8 else "x[at]"
        key = ("reduce", op.name, x.dtype.name, out_dtype.name)
        store = "out[o] = i32(at);" if op.arg else f"out[o] = {out_dtype.wgsl}(acc);"
        pipeline = self.runtime.pipeline(key, lambda: fill(
            "reduce", compute=compute, out_type=out_dtype.wgsl, in_type=x.dtype.wgsl, load=f"T({load})",
            lowest=_LOWEST[compute], highest=_HIGHEST[compute], identity=op.identity,
            combine=op.combine, store=store))
        words = [n_out, n_red, len(kept), len(dims), x._offset,
                 *(x.shape[d] for d in kept), *(x._strides[d] for d in kept),
                 *(x.shape[d] for d in dims), *(x._strides[d] for d in dims)]
        self.runtime.dispatch(pipeline, [storage, x._storage], words, n_out)
        return storage

    def matmul(self, a, b):
        _check_gpu_dtype(a.dtype, "matmul in")
        *batch, m, k = a.shape
        n = b.shape[-1]
        nb, count = len(batch), math.prod(batch)
        if k == 0:   # an empty sum: zeros
            from ...ops.creation import FILL
            return self.map(FILL, (0.0,), (count * m * n,), a.dtype, a.dtype)
        storage = self.empty(count * m * n, a.dtype)
        if count * m * n == 0:
            return storage
        tiles = matmul_tiles(m, n, self.is_software, self.runtime.limits["max_compute_workgroup_storage_size"])
        # Stage each operand along whichever of its dims is contiguous, so tile loads coalesce.
        a_along_k = a._strides[-1] <= a._strides[-2]
        b_along_k = b._strides[-2] < b._strides[-1]
        pipeline = self.runtime.pipeline(
            ("matmul", tiles, a_along_k, b_along_k),
            lambda: _matmul_source(tiles, a_along_k, b_along_k),
            bindings=("read_write", "read", "read"))
        words = [m, n, k, nb, a._offset, a._strides[-2], a._strides[-1], b._offset, b._strides[-2],
                 b._strides[-1], *batch, *a._strides[:nb], *b._strides[:nb]]
        self.runtime.dispatch(pipeline, [storage, a._storage, b._storage], words,
                              (_groups(n, tiles.wx * tiles.tn), _groups(m, tiles.wy * tiles.tm), count))
        return storage

    def gather(self, x, dim, index):
        return self._gather_kernel("gather", x.dtype, index.shape, [x, index], [
            x.shape[dim], math.prod(index.shape[dim + 1:]), *index.shape,
            x._offset, *x._strides, index._offset, *index._strides], dim)

    def scatter_add(self, grad, dim, index, shape):
        return self._gather_kernel("scatter_add", grad.dtype, shape, [grad, index], [
            index.shape[dim], 0, *shape, *index.shape,
            index._offset, *index._strides, grad._offset, *grad._strides], dim)

    def _gather_kernel(self, entry, dtype, shape, inputs, words, dim):
        _check_gpu_dtype(dtype, f"{entry} of")
        if dtype is dtypes.uint8:
            raise TypeError(f"webgpu: {entry} of uint8 tensors is not supported; convert with .int() first")
        numel = math.prod(shape)
        storage = self.empty(numel, dtype)
        if numel:
            pipeline = self.runtime.pipeline(("gather", entry, dtype.name), lambda: fill("gather", type=dtype.wgsl),
                                             entry=entry, bindings=("read_write", "read", "read"))
            self.runtime.dispatch(pipeline, [storage] + [t._storage for t in inputs],
                                  [numel, len(shape), dim] + words, _groups(numel))
        return storage

    def fold(self, g, shape, kernel, stride, dilation):
        """Sum the sliding-window view g (N, C, kh, kw, Ho, Wo) back into an (N, C, H, W) tensor."""
        _check_gpu_dtype(g.dtype, "fold of")
        numel = math.prod(shape)
        storage = self.empty(numel, g.dtype)
        if numel:
            pipeline = self.runtime.pipeline(("fold",), lambda: fill("fold"))
            words = [numel, shape[2], shape[3], *kernel, *g.shape[4:], *stride, *dilation, shape[1],
                     g._offset, *g._strides]
            self.runtime.dispatch(pipeline, [storage, g._storage], words, _groups(numel))
        return storage

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


def _contiguous(shape):
    from ..._tensor import contiguous_strides
    return contiguous_strides(shape)


def _positions(t):
    """Element positions of a strided view, in row-major order."""
    positions = [t._offset]
    for size, stride in zip(t.shape, t._strides):
        positions = [p + i * stride for p in positions for i in range(size)]
    return positions
