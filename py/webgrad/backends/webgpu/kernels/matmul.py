"""The matmul family (shaders/matmul.wgsl): register-tiled batched products of strided operands,
with the bias added in the store, K split where a product has too few tiles, epilogues from fusion.py;
a software adapter's through shaders/matmul_small.wgsl, which reads its operands unstaged."""
import collections
import functools
import math
import struct

from .... import dtypes
from ...base import COPY, FILL, SUM, contiguous_strides, flat
from .common import check_gpu_dtype, fill, groups, pieces
from .epilogue import Producer, epilogue_fields
from .epilogue import bindings as epilogue_bindings
# The tilings (matmul_tuning.py), by their names here too, as the tests and the bench use them.
from .matmul_tuning import (MATMUL_GROUPS, MATMUL_MAX_SPLITS, MATMUL_MIN_SPLIT_K, MATMUL_SPLIT_BELOW,  # noqa: F401
                            MATMUL_SPLIT_FROM_K, MatmulTiles, MatmulTuner, matmul_splits, matmul_tiles)
from .matmul_small import unstaged_slots
from .params import ParamBlock, i32, u32

# Operand layouts and products planned (_strided_layout, _plan) and kept; past this many the least
# recently used go.
MATMUL_PLANS_KEPT = 512
# On a software adapter, a product of at most MATMUL_SMALL_MACS multiply-adds over all batches (a toy
# model's) takes shaders/matmul_small.wgsl at 4x4 outputs a thread: one pipeline for every layout,
# compiled in well under a second by SwiftShader; past it the table's 8x8 win (bench/NOTES.md).
MATMUL_SMALL_MACS = 1 << 18
MATMUL_SMALL = MatmulTiles(4, 16, 4, 4, 1)


class MatmulOperand(collections.namedtuple("MatmulOperand", "storage form along_k wide fields batch_strides")):
    """One side of a product as shaders/matmul.wgsl reads it. form, and its parameter fields
    (OPERAND_FIELDS, each prefixed a_ or b_ in the kernel's parameter block):
      strided: a view's rows and columns.
      ("split_k", K2) (A): K made of two dims (k = k1 * K2 + k2).
      ("window", Ky, Kx, Ny, Nx) (B): a convolution's input windows, read in place (implicit im2col):
        K and N each walk three dims (c, y, x) (the last two of sizes Ky, Kx for K, Ny, Nx for N), each
        moving the address (c) or a row y / column x of the (H, W) image; outside it reads zero
        (padding). The first window's corner is (y0, x0); steps may be negative.
    The sizes in a form are constants in the kernel: dividing by them is then cheap.
    along_k: stage along K (consecutive threads load consecutive k); wide: read as vec4s along the
    staging order (along K, or along M / N), which needs that dim contiguous, a multiple of 4 long,
    and every other stride and the offset multiples of 4; batch_strides: where each batch index
    moves the operand."""


OPERAND_FIELDS = {
    "strided": (u32("offset"), u32("row_stride"), u32("col_stride")),
    "split_k": (u32("offset"), u32("row_stride"), u32("k1_stride"), u32("k2_stride")),
    "window": (u32("offset"), u32("height"), u32("width"), i32("y0"), i32("x0"), u32("y_stride"), u32("x_stride"),
               u32("k_c_stride"), i32("k_y_step"), i32("k_x_step"), u32("n_c_stride"), i32("n_y_step"),
               i32("n_x_step")),
}


# Causal attention's products (ops/attention.py's _KeptWeights): shaders/matmul.wgsl's `triangle` for a
# result read only on and below its diagonal ("out_tril"), an A zero above its diagonal ("a_tril") or
# below it ("a_triu"); None, a dense product. The dense product is what each computes where it is read.
TRIANGLES = {None: 0, "out_tril": 1, "a_tril": 2, "a_triu": 3}


def _kind(form):
    return form if isinstance(form, str) else form[0]


@functools.lru_cache(maxsize=None)
def matmul_params(a_kind, b_kind, epilogue=None):
    """The parameter block of a product of operands of these form kinds. split_k: K per split (a
    multiple of BK); out_offset, out_row_stride and out_split_stride: where the result's rows and a
    split K's pieces lie (a dense result's are 0, n and its element count); the batch is batch_ndim
    dims, its shape and each operand's strides and the result's. An epilogue's words come last
    (kernels/epilogue.py)."""
    operands = [f._replace(name=f"{x}_{f.name}") for x, kind in (("a", a_kind), ("b", b_kind))
                for f in OPERAND_FIELDS[kind]]
    return ParamBlock(u32("m"), u32("n"), u32("k"), u32("split_k"), u32("bias_offset"), u32("bias_stride"),
                      u32("triangle"), u32("out_offset"), u32("out_row_stride"), u32("out_split_stride"),
                      *operands, u32("batch_ndim"), u32("batch_shape", "batch_ndim"),
                      u32("a_batch_strides", "batch_ndim"), u32("b_batch_strides", "batch_ndim"),
                      u32("out_batch_strides", "batch_ndim"), *epilogue_fields(epilogue))


def product_producer(key, block):
    """A recorded unsplit f32 product (its pipeline's key, its dispatch's parameter bytes) as an
    epilogue's Producer, or None: a split K's result is the pieces (their sum after it takes the
    maps), an epilogue's fused maps store f32, not into a float16 product, and they index a dense
    result, not one written through strides."""
    if key[-1] != "f32":
        return None
    scalars = matmul_params(_kind(key[2]), _kind(key[3])).scalars
    head = dict(zip((f.name for f in scalars), struct.unpack_from(f"<{len(scalars)}I", block)))
    ndim = head["batch_ndim"]
    words = struct.unpack_from(f"<{len(scalars) + 4 * ndim}I", block)
    if head["split_k"] < head["k"]:
        return None
    batch = words[len(scalars):len(scalars) + ndim]
    if words[len(scalars) + 3 * ndim:] != _dense_strides(batch, head["m"], head["n"]) or (
            head["out_offset"], head["out_row_stride"]) != (0, head["n"]):
        return None
    return Producer(key, "main", words, math.prod(batch) * head["m"] * head["n"],
                    lambda epilogue: _matmul_source(*key[1:], epilogue))


def _dense_strides(batch, m, n):
    """The batch strides of a dense (*batch, M, N) result."""
    return contiguous_strides((*batch, m, n))[:len(batch)]


def _words_of_4(*positions):
    """Offsets and strides that keep every row on a 16-byte boundary (vec4 loads)."""
    return all(v % 4 == 0 for v in positions)


def _strided_operand(t, side):
    """A strided view as operand "a" (..., M, K) or "b" (..., K, N), staged along its contiguous dim."""
    return MatmulOperand(t.storage, *_strided_layout(t.shape, t.strides, t.offset, side))


@functools.lru_cache(maxsize=MATMUL_PLANS_KEPT)
def _strided_layout(shape, strides, offset, side):
    """MatmulOperand's fields after storage, for _strided_operand (views of a shape recur)."""
    along_k = strides[-1] <= strides[-2] if side == "a" else strides[-2] < strides[-1]
    staged = len(shape) - (1 if along_k == (side == "a") else 2)   # the dim consecutive threads walk
    others = (stride for d, stride in enumerate(strides) if d != staged)
    wide = strides[staged] == 1 and shape[staged] % 4 == 0 and _words_of_4(offset, *others)
    fields = {"offset": offset, "row_stride": strides[-2], "col_stride": strides[-1]}
    return "strided", along_k, wide, fields, strides[:-2]


# Per operand of shaders/matmul.wgsl: its staged slice's rows and columns, the global row and
# column of a slot s and their bounds.
_MATMUL_OPERANDS = {"a": ("BM", "BK", "row0 + s.x", "t + s.y", "m", "k"),
                    "b": ("BK", "BN", "t + s.x", "col0 + s.y", "k", "n")}


def _tile_loader(x, form, cols_fast, wide, element="f32"):
    """WGSL for operand x: {x}_slot, thread tid's l-th position in the staged slice (row, col;
    consecutive threads walk the columns when cols_fast, else the rows; wide: the first of 4
    columns, or rows, along that walk, a multiple of 4 in number), and load_{x}, the value there
    (from the operand's element type to f32), zero past the edges."""
    rows, cols, r, c, r_end, c_end = _MATMUL_OPERANDS[x]
    f = f"params.{x}_"   # this operand's fields
    kind, zero = ("vec4<f32>", "vec4<f32>()") if wide else ("f32", "0.0")
    inside = [f"r < {r_end}", f"c < {c_end}"]
    row, col = f"min(r, {r_end} - 1u)", f"min(c, {c_end} - 1u)"
    if wide and cols_fast:
        slot = f"vec2(i / ({cols} / 4u), i % ({cols} / 4u) * 4u)"
        body = [f"let at_rc = (at + {row} * {f}row_stride + min(c, {c_end} - 4u)) / 4u;"]
    elif wide:
        slot = f"vec2(i % ({rows} / 4u) * 4u, i / ({rows} / 4u))"
        body = [f"let at_rc = (at + min(r, {r_end} - 4u) + {col} * {f}col_stride) / 4u;"]
    else:
        slot = f"vec2(i / {cols}, i % {cols})" if cols_fast else f"vec2(i % {rows}, i / {rows})"
    if form == "strided" and not wide:
        body = [f"let at_rc = at + {row} * {f}row_stride + {col} * {f}col_stride;"]
    elif form[0] == "split_k":
        k2 = f"{form[1]}u"
        body = [f"let kk = {col};",
                f"let at_rc = at + {row} * {f}row_stride + kk / {k2} * {f}k1_stride + kk % {k2} * {f}k2_stride;"]
    elif form[0] == "window":
        ky, kx, ny, nx = (f"{size}u" for size in form[1:])
        body = [f"let kk = {row};",
                f"let nn = {col};",
                f"let iy = {f}y0 + i32(kk / {kx} % {ky}) * {f}k_y_step + i32(nn / {nx} % {ny}) * {f}n_y_step;",
                f"let ix = {f}x0 + i32(kk % {kx}) * {f}k_x_step + i32(nn % {nx}) * {f}n_x_step;",
                f"let at_rc = at + kk / ({ky} * {kx}) * {f}k_c_stride + nn / ({ny} * {nx}) * {f}n_c_stride"
                f" + u32(clamp(iy, 0, i32({f}height) - 1)) * {f}y_stride"
                f" + u32(clamp(ix, 0, i32({f}width) - 1)) * {f}x_stride;"]
        inside += ["iy >= 0", f"iy < i32({f}height)", "ix >= 0", f"ix < i32({f}width)"]
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
    return select({zero}, {_as_f32(f"{x}[at_rc]", kind, element)}, {inside});
}}"""


def _as_f32(value, kind, element):
    """WGSL: a value of an operand's element type (f32 or f16, or vec4s of them) as the f32 `kind`
    the product accumulates in."""
    return value if element == "f32" else f"{kind}({value})"


def _matmul_source(tiles, a_form, b_form, a_along_k, b_along_k, bias_along, a_wide, b_wide, element="f32", out="f32",
                   epilogue=None):
    """shaders/matmul.wgsl (matmul_small.wgsl for unstaged tiles), each thread's work unrolled over named
    variables; forms and staging orders as in MatmulOperand; bias_along: None, "col" or "row" (the bias
    follows the output's columns or rows); a_wide / b_wide: the operand is read as vec4s; element: the
    operands' and bias's WGSL type (f32, or f16 read into f32), out: the result's (f32 for split K)."""
    wx, wy, tm, tn, bk = tiles
    write = ("out[at + {}] = " + ("{};" if out == "f32" else f"{out}({{}});") if epilogue is None
             else "store_epilogue(at + {}, {});")   # (a StoreEpilogue)
    bias = "" if bias_along is None else (
        "fn bias_at(i: u32, split: u32) -> f32 {\n"
        f"    return select(0.0, {_as_f32('bias[params.bias_offset + i * params.bias_stride]', 'f32', element)}, "
        "split == 0u);\n}")
    shared = dict(bias=bias, bindings=_bindings(a_wide, b_wide, bias_along, epilogue, element, out),
                  wx=str(wx), wy=str(wy), tm=str(tm), tn=str(tn), epilogue=getattr(epilogue, "function", ""))
    params = matmul_params(_kind(a_form), _kind(b_form), epilogue)
    if not tiles.staged:   # a thread's TM x TN outputs from its rows of A and columns of B (matmul_small.py)
        rows, cols = [f"row0 + {i}u * WY + lid.y" for i in range(tm)], [f"col0 + {j}u * WX + lid.x" for j in range(tn)]
        store = _store(rows, cols, lambda r, c: f"acc{r}_{c}", bias_along, write)
        return fill("matmul_small", params, ("matmul_batch",), **shared, store=_block(store, 4),
                    **unstaged_slots(rows, cols, a_form, b_form, lambda x, at: _as_f32(f"{x}[{at}]", "f32", element)))
    a_loads = wy * tm * bk // (wx * wy) // (4 if a_wide else 1)
    b_loads = wx * tn * bk // (wx * wy) // (4 if b_wide else 1)
    runs_m, runs_n = range(tm // 4), range(tn // 4)
    acc = [(g * 4 + i, j) for g in runs_m for i in range(4) for j in runs_n]
    declare = [f"let sa{q} = a_slot(tid, {q}u);" for q in range(a_loads)]
    declare += [f"let sb{q} = b_slot(tid, {q}u);" for q in range(b_loads)]
    declare += [f"var na{q} = {'vec4<f32>()' if a_wide else '0.0'};" for q in range(a_loads)]
    declare += [f"var nb{q} = {'vec4<f32>()' if b_wide else '0.0'};" for q in range(b_loads)]
    declare += [f"var acc{r}_{j} = vec4<f32>();" for r, j in acc]

    def load(t):
        return ([f"na{q} = load_a(sa{q}, row0, col0, {t}, start.a_at, m, n, start.k);" for q in range(a_loads)] +
                [f"nb{q} = load_b(sb{q}, row0, col0, {t}, start.b_at, m, n, start.k);" for q in range(b_loads)])
    # The staged slices are [k][m] and [k][n] in runs of 4: a vec4 read along M or N is one staged
    # vec4, a vec4 read along K one float into each of 4 staged rows.
    if a_wide and not a_along_k:
        stage = [f"tile_a[half][sa{q}.y][sa{q}.x / 4u] = na{q};" for q in range(a_loads)]
    elif a_wide:
        stage = [f"tile_a[half][sa{q}.y + {e}u][sa{q}.x / 4u][sa{q}.x % 4u] = na{q}.{'xyzw'[e]};"
                 for q in range(a_loads) for e in range(4)]
    else:
        stage = [f"tile_a[half][sa{q}.y][sa{q}.x / 4u][sa{q}.x % 4u] = na{q};" for q in range(a_loads)]
    if b_wide and not b_along_k:
        stage += [f"tile_b[half][sb{q}.x][sb{q}.y / 4u] = nb{q};" for q in range(b_loads)]
    elif b_wide:
        stage += [f"tile_b[half][sb{q}.x + {e}u][sb{q}.y / 4u][sb{q}.y % 4u] = nb{q}.{'xyzw'[e]};"
                  for q in range(b_loads) for e in range(4)]
    else:
        stage += [f"tile_b[half][sb{q}.x][sb{q}.y / 4u][sb{q}.y % 4u] = nb{q};" for q in range(b_loads)]
    # The staged slices' BK rows: unrolled (constant indices, which need no bounds check) for the
    # 8x8-per-thread tiles, which it speeds up by 15% on an H100 (4096^3: 0.49 -> 0.56 of cuBLAS); a
    # loop for the smaller tiles, where unrolling measured no better.
    unrolled = tm * tn >= 64
    multiply = [] if unrolled else ["for (var kk = 0u; kk < BK; kk++) {"]
    for step in range(bk) if unrolled else ["kk"]:
        kk, name = (f"{step}u", f"_{step}") if unrolled else ("kk", "")
        multiply += [f"let b{j}{name} = tile_b[half][{kk}][{j}u * WX + lid.x];" for j in runs_n]
        multiply += [f"let a{g}{name} = tile_a[half][{kk}][{g}u * WY + lid.y];" for g in runs_m]
        multiply += [f"acc{r}_{j} = fma(vec4(a{r // 4}{name}.{'xyzw'[r % 4]}), b{j}{name}, acc{r}_{j});"
                     for r, j in acc]
    multiply += [] if unrolled else ["}"]
    store = _store([f"row0 + {g * 4}u * WY + lid.y * 4u + {i}u" for g in runs_m for i in range(4)],
                   [f"col0 + {j * 4}u * WX + lid.x * 4u + {lane}u" for j in runs_n for lane in range(4)],
                   lambda r, c: f"acc{r}_{c // 4}.{'xyzw'[c % 4]}", bias_along, write)
    loaders = (_tile_loader("a", a_form, a_along_k, a_wide, element) + "\n" +
               _tile_loader("b", b_form, not b_along_k, b_wide, element))
    return fill("matmul", params, ("matmul_batch",), **shared, bk=str(bk), loaders=loaders, declare=_block(declare, 4),
                load_first=_block(load("start.k0"), 4), stage=_block(stage, 8), load_next=_block(load("t + BK"), 8),
                multiply=_block(multiply, 8), store=_block(store, 4))


def _block(lines, indent):
    return "\n".join(" " * indent + line for line in lines)


def _store(rows, cols, value, bias_along, write):
    """WGSL storing a thread's outputs: rows and cols, its rows' and columns' global indices;
    value(r, c), its accumulator at the r-th of them and the c-th; the bias added, edges skipped."""
    lines = []
    for r, row in enumerate(rows):
        lines += [f"if ({row} < m) {{", f"    let at = base + ({row}) * params.out_row_stride;"]
        for c, col in enumerate(cols):
            bias = f" + bias_at({col if bias_along == 'col' else row}, start.split)" if bias_along else ""
            lines.append(f"    if ({col} < n) {{ {write.format(col, value(r, c) + bias)} }}")
        lines.append("}")
    return lines


def _bindings(a_wide, b_wide, bias_along, epilogue, element="f32", out="f32"):
    """WGSL: the product's buffers, then the epilogue's (kernels/epilogue.py)."""
    buffers = [("read_write", "out", out), ("read", "a", f"vec4<{element}>" if a_wide else element),
               ("read", "b", f"vec4<{element}>" if b_wide else element)]
    buffers += [("read", "bias", element)] * (bias_along is not None)
    return epilogue_bindings(buffers, epilogue)


def _window_operand(image, padding, k_dims, n_dims, batch_strides, along_k):
    """B as MatmulOperand "window" over the (H, W) planes of image (..., H, W): k_dims and n_dims are
    ((sizes c, y, x), (c stride, y step, x step)); the first window starts at -padding."""
    (_, ky, kx), (k_c_stride, k_y_step, k_x_step) = k_dims
    (_, ny, nx), (n_c_stride, n_y_step, n_x_step) = n_dims
    fields = dict(offset=image.offset, height=image.shape[-2], width=image.shape[-1], y0=-padding[0], x0=-padding[1],
                  y_stride=image.strides[-2], x_stride=image.strides[-1], k_c_stride=k_c_stride, k_y_step=k_y_step,
                  k_x_step=k_x_step, n_c_stride=n_c_stride, n_y_step=n_y_step, n_x_step=n_x_step)
    return MatmulOperand(image.storage, ("window", ky, kx, ny, nx), along_k, False, fields, batch_strides)


def _layout(operand):
    """A MatmulOperand without its storage, hashable: what a product's plan depends on."""
    _, form, along_k, wide, fields, batch_strides = operand
    return form, along_k, wide, tuple(fields.items()), tuple(batch_strides)


@functools.lru_cache(maxsize=MATMUL_PLANS_KEPT)
def _plan(a, b, m, n, k, batch, bias_at, tiles, splits, element="f32", triangle=None, out_at=None):
    """One product's kernel key, parameter words, grid and number of K pieces (splits rounded to
    whole BK steps), from its operands' _layout, sizes, bias (offset, stride, along) or None, its
    tiles and splits, its operands' WGSL element type, its causal TRIANGLES entry and where its
    result goes: None, a dense tensor of its own; or (offset, row stride, batch strides) of a view
    with unit column stride (an unsplit product only): worked out once per layout, as a training step
    repeats its products."""
    split_k, splits = pieces(k, splits, tiles.bk)
    out_offset, out_row_stride, out_batch_strides = out_at or (0, n, _dense_strides(batch, m, n))
    threads = tiles.wx * tiles.wy
    a_form, a_along_k, a_wide, a_fields, a_batch_strides = a
    b_form, b_along_k, b_wide, b_fields, b_batch_strides = b
    if not tiles.staged:   # read an element at a time: its one kernel serves every staging order
        a_along_k = b_along_k = a_wide = b_wide = False
    a_wide = a_wide and tiles.wy * tiles.tm * tiles.bk % (4 * threads) == 0
    b_wide = b_wide and tiles.wx * tiles.tn * tiles.bk % (4 * threads) == 0
    bias_offset, bias_stride, bias_along = bias_at or (0, 0, None)
    key = (tiles, a_form, b_form, a_along_k, b_along_k, bias_along, a_wide, b_wide, element,
           element if splits == 1 else "f32")   # a split K's pieces are summed in f32
    words = matmul_params(_kind(a_form), _kind(b_form)).pack(
        m=m, n=n, k=k, split_k=split_k, bias_offset=bias_offset, bias_stride=bias_stride, triangle=TRIANGLES[triangle],
        **{f"a_{name}": value for name, value in a_fields}, **{f"b_{name}": value for name, value in b_fields},
        out_offset=out_offset, out_row_stride=out_row_stride, out_split_stride=math.prod(batch) * m * n,
        batch_ndim=len(batch), batch_shape=batch, a_batch_strides=a_batch_strides, b_batch_strides=b_batch_strides,
        out_batch_strides=out_batch_strides)
    grid = (groups(n, tiles.wx * tiles.tn), groups(m, tiles.wy * tiles.tm), math.prod(batch) * splits)
    return key, tuple(words), grid, splits


class MatmulKernels:
    def matmul(self, a, b, bias=None, bias_dim=-1, triangle=None, out=None):
        """(*B, M, K) @ (*B, K, N), plus bias along the columns (bias_dim -1) or rows (-2); triangle:
        a causal structure that lets work go (TRIANGLES); out: a view to write the result into."""
        check_gpu_dtype(a.dtype, "matmul in", float16=True)
        *batch, m, k = a.shape
        return self._product(_strided_operand(a, "a"), _strided_operand(b, "b"), m, b.shape[-1], k, batch,
                             bias, bias_dim, a.dtype, triangle, out)

    def _product(self, a, b, m, n, k, batch, bias, bias_dim, dtype, triangle=None, out=None):
        """One shaders/matmul.wgsl dispatch (then a sum over the pieces of a split K) of MatmulOperands,
        into a view out where one is given."""
        count = math.prod(batch)
        if out is not None and (count * m * n == 0 or k == 0 or out.strides[-1] != 1):   # (rare: through a copy)
            return self._copied(self._product(a, b, m, n, k, batch, bias, bias_dim, dtype, triangle), out, dtype)
        if count * m * n == 0:
            return self._empty((*batch, m, n), dtype)
        if k == 0:
            return self._empty_product((*batch, m, n), bias, bias_dim, dtype)
        tiles = matmul_tiles(m, n, count, self.is_software, self.runtime.limits["max_compute_workgroup_storage_size"])
        if self.is_software and count * m * n * k <= MATMUL_SMALL_MACS:
            tiles = MATMUL_SMALL
        splits = matmul_splits(m, n, k, count, tiles, self.is_software)
        bias_at = None if bias is None else (bias.offset, bias.strides[0], ("col", "row")[bias_dim == -2])
        layouts = _layout(a), _layout(b)
        tiles, splits = self.matmul_tuner.choose(   # the prior, or the adapter's fastest for such products
            m, n, k, count, (layouts[0][:3], layouts[1][:3], dtype.stored) + ((triangle,) if triangle else ()),
            (tiles, splits),
            lambda t, s: self._tiled_product(a, b, layouts, m, n, k, batch, bias, bias_at, dtype, t, s, triangle, out))
        return self._tiled_product(a, b, layouts, m, n, k, batch, bias, bias_at, dtype, tiles, splits, triangle, out)

    @functools.cached_property
    def matmul_tuner(self):
        return MatmulTuner(self.runtime, self.info, self.is_software)

    def _tiled_product(self, a, b, layouts, m, n, k, batch, bias, bias_at, dtype, tiles, splits, triangle=None,
                       out=None):
        """_product's dispatches with these tiles and K split (layouts: a's and b's _layout), into the
        view out where one is given."""
        count = math.prod(batch)
        key, words, grid, splits = _plan(*layouts, m, n, k, tuple(batch), bias_at, tiles, splits, dtype.stored,
                                         triangle, None if out is None else (out.offset, out.strides[-2],
                                                                             tuple(out.strides[:-2])))
        if out is not None and splits > 1:   # the pieces are dense: their sum, then a copy into out
            return self._copied(self._tiled_product(a, b, layouts, m, n, k, batch, bias, bias_at, dtype, tiles, splits,
                                                    triangle), out, dtype)
        pieces = dtype if splits == 1 else dtypes.float32
        storage = out.storage if out is not None else self._empty(
            (splits, *batch, m, n) if splits > 1 else (*batch, m, n), pieces)
        bindings = ("read_write", "read", "read") + (("read",) if bias is not None else ())
        pipeline = self.runtime.pipeline(("matmul", *key), lambda: _matmul_source(*key), bindings=bindings)
        storages = [storage, a.storage, b.storage] + ([bias.storage] if bias is not None else [])
        self.runtime.dispatch(pipeline, storages, words, grid)
        if splits == 1:
            return storage
        return self.reduce(SUM, flat(storage, (splits, count * m * n), pieces), (0,), dtype)

    def _copied(self, dense, out, dtype):
        """A dense product's storage copied into the view out (a product that cannot write it directly)."""
        return self.map(COPY, (flat(dense, out.shape, dtype),), out.shape, dtype, dtype, out=out)

    def _empty_product(self, shape, bias, bias_dim, dtype):
        """A product over an empty K: zeros, plus the bias."""
        if bias is None:
            return self.map(FILL, (0.0,), shape, dtype, dtype)
        # the bias broadcast over the other dim (stride 0), copied out
        strides = [0] * len(shape)
        strides[bias_dim] = bias.strides[0]
        return self.map(COPY, (bias._replace(shape=shape, strides=tuple(strides)),), shape, dtype, dtype)
