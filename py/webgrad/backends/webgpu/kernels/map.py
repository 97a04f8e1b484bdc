"""The map family (shaders/map.wgsl): out[i] = op(a, b, c) elementwise over broadcast views and
scalars, one thread per element, for every backends.base.Elementwise.

uint8 results are packed four to a u32 word, which one thread must write whole: there the thread of
the view's first element in a word computes every element of the view in that word (_packed_store)."""
import functools
import math
import struct
from typing import Any, NamedTuple

from .... import dtypes
from ...base import View, contiguous_strides
from ..runtime import PARAMS_BYTES, PARAMS_WORDS, PAST_32_BITS, TOO_MANY_WORDS
from .common import buffer_request, check_gpu_dtype, fill, groups, load, word
from .params import ParamBlock, u32

# map's kernels kept; past this many (ever new shapes or strides) the cache starts over
MAP_KERNELS_KEPT = 4096
_OPERANDS = "abc"


@functools.lru_cache(maxsize=None)
def map_params(nd, tensors, scalars):
    """The parameter block of a kernel over `tensors` tensor operands (their letters) and `scalars`
    scalar ones, strided over nd dims (0: all contiguous, read at offset + i). The offsets and
    scalars change from call to call, so they come last (block_packer's tail)."""
    strides = [u32(f"{x}_strides", nd) for x in ("out", *tensors)] if nd else []
    return ParamBlock(u32("numel"), *([u32("shape", nd)] if nd else []), *strides,
                      u32("offsets", 1 + len(tensors)), u32("scalars", scalars))


def block_packer(head, tail_words):
    """A parameter block packed whole at each dispatch, as runtime.dispatch takes it: (the bytes of its
    leading words, fixed per kernel; a struct for the tail_words words given per call and the padding),
    so head + tail.pack(*words) is the block: a dispatch packs only its offsets and scalars."""
    words = len(head) + tail_words
    if words > PARAMS_WORDS:
        raise RuntimeError(TOO_MANY_WORDS)
    try:
        packed = struct.pack(f"<{len(head)}I", *head)
    except struct.error:
        raise RuntimeError(PAST_32_BITS) from None
    return packed, struct.Struct(f"<{tail_words}I{PARAMS_BYTES - 4 * words}x")


class MapSpec(NamedTuple):
    """What a map dispatch computes, for the fusion pass (fusion.py) to rebuild it: op over operands
    of `kinds` (a dtype each, None for a scalar) in `compute`, into out_dtype, over shape; layouts:
    the strides of out and of each tensor operand, None where contiguous (read at offset + i)."""
    op: Any
    kinds: tuple
    compute: Any
    out_dtype: Any
    shape: tuple
    layouts: tuple


class _MapKernel:
    """What map works out once per key: the output's buffer size (and its name for a too-large
    error), the number of elements, the parameter block's packing (block_packer), the workgroups, the
    pipeline (runtime.pipeline's arguments in compile until the first dispatch compiles it) and its MapSpec.
    Called with its tensor operands' storages and offsets and its scalar operands, it runs map into a
    new storage: Backend.map_runner's runner for its key's layout."""
    __slots__ = ("runtime", "compute", "nbytes", "what", "numel", "head", "tail", "groups", "compile", "pipeline",
                 "spec", "unbound")

    def __call__(self, storages, offsets, scalars):
        out = self.runtime.alloc(self.nbytes, self.what)
        self.launch([out, *storages], [0, *offsets], [word(a, self.compute) for a in scalars] if scalars else scalars)
        return out

    def into(self, storages, offsets, scalars):
        """The runner of a kernel keyed with an output layout: into the storage given first (map's out)."""
        if self.unbound:   # operands read from the output's binding (_split's `own`)
            storages = [s for k, s in enumerate(storages) if k not in self.unbound]
        self.launch(storages, offsets, [word(a, self.compute) for a in scalars] if scalars else scalars)
        return storages[0]

    def launch(self, storages, offsets, words):
        """Queue the kernel over storages at offsets (the output's first), with the scalar operands' words."""
        if self.numel:
            if self.pipeline is None:   # compiled after the allocation, which raises first if too large
                self.pipeline = self.runtime.pipeline(*self.compile)
            self.runtime.dispatch(self.pipeline, storages, self.head + self.tail.pack(*offsets, *words), self.groups,
                                  elementwise=(self.spec, offsets, words) if self.spec else None)


class MapKernels:
    def __init__(self):
        self._map_kernels = {}   # _split's key -> _MapKernel

    def map(self, op, args, shape, compute, out_dtype, out=None):
        key, storages, offsets, words = _split(op, args, shape, compute, out_dtype, out)
        kernel = self._map_kernels.get(key) or self._map_kernel(key, op, args, shape, compute, out_dtype, out)
        if out is None:
            storages[0] = self.runtime.alloc(kernel.nbytes, kernel.what)
        kernel.launch(storages, offsets, words)
        return storages[0]

    def map_reads_out(self):
        """Backend.map_reads_out: but while a recording is made, whose fusion rebuilds maps from their
        MapSpec (a kernel reading its output's binding has none: it would stay one dispatch there, where
        the copy of its operand fuses)."""
        return self.runtime._recording is None

    def map_runner(self, op, args, shape, compute, out_dtype, out=None):
        """Backend.map_runner: the _MapKernel of map's key for args (the kernel is its own runner; into out's
        layout, its `into`)."""
        key = _split(op, args, shape, compute, out_dtype, out)[0]
        kernel = self._map_kernels.get(key) or self._map_kernel(key, op, args, shape, compute, out_dtype, out)
        return kernel if out is None else kernel.into

    def _map_kernel(self, key, op, args, shape, compute, out_dtype, out):
        """map's checks, and the _MapKernel for its key."""
        check_gpu_dtype(compute, "computing in", float16=True)
        kernel = _MapKernel()
        kernel.runtime, kernel.compute = self.runtime, compute
        kernel.nbytes, kernel.what = buffer_request(shape, out_dtype, self.runtime) if out is None else (0, None)
        kernel.numel = math.prod(shape)
        kinds = tuple(a.dtype if isinstance(a, View) else None for a in args)
        views = [a for a in args if isinstance(a, View)]
        owns = tuple(isinstance(a, View) and _own(a, out) for a in args)
        # the storages' slots (0: out's) of the operands read from out's binding, left out of the bindings
        kernel.unbound = frozenset(1 + k for k, v in enumerate(views) if _own(v, out))
        letters = tuple(x for x, kind in zip(_OPERANDS, kinds) if kind is not None)
        contiguous = all(v.is_contiguous() for v in ([out] if out is not None else []) + views)
        layout_shape, layout = shape, [out.strides if out is not None else contiguous_strides(shape),
                                       *(v.strides for v in views)]
        if out_dtype is dtypes.uint8 and not contiguous and kernel.numel:
            layout_shape, layout = _packed_layout(op, shape, layout)
        nd = 0 if contiguous else len(layout_shape)
        params = map_params(nd, letters, len(kinds) - len(views))
        strides = {}
        if nd:
            strides = {"shape": layout_shape, **{f"{x}_strides": s for x, s in zip(("out", *letters), layout)}}
        # the block's words but the offsets and scalars (the last ones) are packed once
        tail = 1 + len(kinds)
        words = params.pack(numel=kernel.numel, **strides, offsets=[0] * (1 + len(views)),
                            scalars=[0] * (len(kinds) - len(views)))
        kernel.head, kernel.tail = block_packer(words[:-tail], tail)
        kernel.groups = groups(kernel.numel)
        pipeline_key = ("map", op.name, op.wgsl, compute.name, out_dtype.name, nd,
                        tuple("scalar" if kind is None else kind.name for kind in kinds), owns)
        kernel.compile = (pipeline_key, lambda: _map_source(op, kinds, compute, out_dtype, nd, params, owns), "main",
                          ("read_write",) + ("read",) * (len(views) - len(kernel.unbound)))
        kernel.pipeline = None
        # (a kernel reading its output's binding is not fusion's to rebuild: it stays one dispatch there)
        kernel.spec = None if kernel.unbound else MapSpec(
            op, kinds, compute, out_dtype, shape,
            tuple(None if v is None or v.is_contiguous() else v.strides for v in (out, *views)))
        if len(self._map_kernels) >= MAP_KERNELS_KEPT:
            self._map_kernels.clear()
        self._map_kernels[key] = kernel
        return kernel


def _own(view, out):
    """Whether an operand is out's own elements (its storage, offset and strides): the kernel reads it
    from out's binding (a WebGPU dispatch may not bind one buffer read-only and writable), each
    element before its thread writes it (x.add_(y) without a copy of x)."""
    return out is not None and view.storage is out.storage and view.offset == out.offset and \
        view.strides == out.strides


def _split(op, args, shape, compute, out_dtype, out):
    """map's arguments as (its kernel's key, the storages and offsets of out and of each tensor operand
    (no storage for those out holds: _own), the scalar operands' words); out's are None and 0 where map
    allocates it. All but the offsets and words follows from the key (the op, shape and dtypes, the
    strides of out and of each operand), so a repeated op (the common case) reuses its _MapKernel
    instead of working it out again."""
    if out is None:
        key, storages, offsets = [op, shape, compute, out_dtype, None], [None], [0]
    else:
        key, storages, offsets = [op, shape, compute, out_dtype, out.strides], [out.storage], [out.offset]
    words = []
    for a in args:
        if isinstance(a, View):
            own = _own(a, out)
            key += (a.dtype, a.strides, own)
            if not own:
                storages.append(a.storage)
            offsets.append(a.offset)
        else:
            key.append(None)
            words.append(word(a, compute))
    return tuple(key), storages, offsets, words


def _map_source(op, kinds, compute, out_dtype, nd, params, owns):
    """The kernel for op over operands of nd strided dims (0: all contiguous); kinds: each
    operand's dtype, None for a scalar; owns: whether each is read from out's binding (_own). The
    element's coordinates are found once, unrolled over the nd dims, and shared by every operand; a
    uint8 result is stored by _packed_store."""
    bindings = [f"@group(0) @binding(1) var<storage, read_write> out: array<{out_dtype.stored}>;"]
    body = []
    if nd:
        body.append("    var rest = i;")
        for d in range(nd - 1, 0, -1):
            body.append(f"    let c{d} = rest % params_shape({d}u);")
            body.append(f"    rest /= params_shape({d}u);")
        body.append("    let c0 = rest;")
    body.append(f"    let o = {_position(0, 'out', 'c' if nd else 'i', nd)};")
    bound = [(x, kind) for x, kind, own in zip(_OPERANDS, kinds, owns) if kind is not None and not own]
    bindings += [f"@group(0) @binding({binding}) var<storage, read> in_{x}: array<{kind.stored}>;"
                 for binding, (x, kind) in enumerate(bound, start=2)]
    if out_dtype is dtypes.uint8:
        body += _packed_store(nd, _operands(op, kinds, compute, nd, "e" if nd else "i", owns), op.wgsl)
    else:
        body += [f"    {line}" for line in _operands(op, kinds, compute, nd, "c" if nd else "i", owns)]
        body.append(f"    out[o] = {stored(out_dtype, op.wgsl)};")
    return fill("map", params, compute=compute.wgsl, bindings="\n".join(bindings), body="\n".join(body))


def _operands(op, kinds, compute, nd, index, owns):
    """WGSL: the lines that give the operands a, b, c their values at the element `index` names
    (_position's), as the compute type T; those of owns from out's binding."""
    lines, slot, scalar = [], 0, 0
    for k, kind in enumerate(kinds):
        x = _OPERANDS[k]
        if kind is None:
            lines.append(f"let {x} = {scalar_operand(scalar, compute)};")
            scalar += 1
        else:
            slot += 1
            lines += [f"let at_{x} = {_position(slot, x, index, nd)};",
                      f"let {x} = {operand(op, k, load(kind, 'out' if owns[k] else f'in_{x}', f'at_{x}'))};"]
    return lines


def _position(slot, x, index, nd):
    """WGSL: where operand x (parameter slot `slot`) holds an element: given its coordinates
    index0..index{nd-1}, or with nd 0 its index `index` (contiguous, at offset + index)."""
    return f"params_offsets({slot}u)" + ("".join(f" + {index}{d} * params_{x}_strides({d}u)" for d in range(nd))
                                         or f" + {index}")


def _packed_store(nd, operands, value):
    """WGSL: element i's thread of a uint8 result (bytes packed four to a word, as byte_at reads
    them): if i is the view's first element in o's word, it computes every element of the view in
    that word and writes the word whole (keeping its other bytes), so no two threads write one word.
    A byte's element follows from its position p in the view (its offset to the view's first byte):
    with nd 0 its index is p; else its coordinates are p divided by the output's strides, largest
    first (the order _packed_layout gives the dims), and p is in the view if each is in range and
    nothing is left over. value: WGSL of the element's value, i32 or u32, of which the low byte is kept."""
    lines = ["let p = first + k - params_offsets(0u);"]   # (wraps to beyond the view for bytes before it)
    if nd:
        lines.append("var left = p;")
        for d in range(nd):
            lines += [f"let e{d} = left / params_out_strides({d}u);", f"left -= e{d} * params_out_strides({d}u);"]
        outside = " || ".join(["left != 0u"] + [f"e{d} >= params_shape({d}u)" for d in range(nd)])
    else:   # the element's index, named as op expressions read it (arange's)
        lines.append("let i = p;")
        outside = "i >= params.numel"
    lines += [f"if ({outside}) {{ continue; }}",
              "if (first + k < o) { return; }   // an earlier element of the view writes this word",
              *operands,
              f"packed |= byte_in_word(u32({value}), k);",
              "kept &= ~byte_in_word(0xffu, k);"]
    return ["    let first = o & ~3u;",
            "    var packed = 0u;",
            "    var kept = 0xffffffffu;   // the bytes of the word outside the view keep their value",
            "    for (var k = 0u; k < 4u; k++) {",
            *(f"        {line}" for line in lines),
            "    }",
            "    out[first >> 2u] = (out[first >> 2u] & kept) | packed;"]


def _packed_layout(op, shape, strides):
    """(shape, [the strides of out and of each operand]) of a strided map into uint8 as its packed
    kernel takes them: the dims of size 1 dropped (their coordinate is 0) and the others ordered by
    the output's strides, largest first, so that an output byte's coordinates follow from its
    position by division. That holds where each stride exceeds the span of the dims after it (any
    slice or permutation of a contiguous tensor does); a view whose elements interleave is refused,
    and so are ops of the element's index (its coordinates are reordered here)."""
    if op.index:
        raise TypeError(f"webgpu: {op.name} cannot write uint8 through a strided view")
    dims = sorted((d for d, size in enumerate(shape) if size != 1), key=lambda d: -strides[0][d])
    span = 0
    for d in reversed(dims):
        if strides[0][d] <= span:
            raise TypeError(f"webgpu: {op.name} cannot write uint8 through a view of shape {tuple(shape)} and strides "
                            f"{tuple(strides[0])} (its elements interleave); write into a contiguous uint8 tensor")
        span += (shape[d] - 1) * strides[0][d]
    return tuple(shape[d] for d in dims), [tuple(s[d] for d in dims) for s in strides]


def stored(dtype, value):
    """WGSL: a value computed for a `dtype` result as its buffer stores it (float16: rounded to f16)."""
    return value if dtype.stored == dtype.wgsl else f"{dtype.stored}({value})"


def operand(op, k, value):
    """WGSL: op's operand k from its stored value: converted to the compute type T, but where the
    op takes it raw (arg_kinds: where's condition)."""
    return value if op.arg_kinds is not None and op.arg_kinds[k] is not None else f"T({value})"


def scalar_operand(index, compute):
    """WGSL: scalar operand `index` of the parameter block, as type T."""
    word = f"params_scalars({index}u)"
    return word if compute.wgsl == "u32" else f"bitcast<T>({word})"
