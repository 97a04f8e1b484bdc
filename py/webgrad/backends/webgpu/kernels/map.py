"""The map family (shaders/map.wgsl): out[i] = op(a, b, c) elementwise over broadcast views and
scalars, one thread per element, for every backends.base.Elementwise."""
import functools
import math
import struct
from typing import Any, NamedTuple

from .... import dtypes
from ...base import View, contiguous_strides
from ..runtime import PARAMS_BYTES, PARAMS_WORDS, TOO_MANY_WORDS
from .common import buffer_request, check_gpu_dtype, check_not_uint8, fill, groups, word
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
    return struct.pack(f"<{len(head)}I", *head), struct.Struct(f"<{tail_words}I{PARAMS_BYTES - 4 * words}x")


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
    pipeline (runtime.pipeline's arguments in compile until the first dispatch compiles it) and its MapSpec."""
    __slots__ = ("nbytes", "what", "numel", "head", "tail", "groups", "compile", "pipeline", "spec")


class MapKernels:
    def __init__(self):
        self._map_kernels = {}   # map's key -> _MapKernel

    def map(self, op, args, shape, compute, out_dtype, out=None):
        # All but the offsets and scalar operands follows from this key: a repeated op (the common
        # case) reuses its _MapKernel instead of working out its kernel and words again.
        if out is None:
            key, storages, offsets = [op, shape, compute, out_dtype, None], [None], [0]
        else:
            key, storages, offsets = [op, shape, compute, out_dtype, out.strides], [out.storage], [out.offset]
        scalars = []
        for a in args:
            if isinstance(a, View):
                storage, _, strides, offset, dtype = a
                key.append(dtype)
                key.append(strides)
                storages.append(storage)
                offsets.append(offset)
            else:
                key.append(None)
                scalars.append(word(a, compute))
        key = tuple(key)
        kernel = self._map_kernels.get(key) or self._map_kernel(key, op, args, shape, compute, out_dtype, out)
        if out is None:
            storages[0] = self.runtime.alloc(kernel.nbytes, kernel.what)
        if kernel.numel:
            if kernel.pipeline is None:   # compiled after the allocation, which raises first if too large
                kernel.pipeline = self.runtime.pipeline(*kernel.compile)
            self.runtime.dispatch(kernel.pipeline, storages, kernel.head + kernel.tail.pack(*offsets, *scalars),
                                  kernel.groups, elementwise=(kernel.spec, offsets, scalars))
        return storages[0]

    def _map_kernel(self, key, op, args, shape, compute, out_dtype, out):
        """map's checks, and the _MapKernel for its key."""
        check_gpu_dtype(compute, "computing in", float16=True)
        check_not_uint8(out_dtype, op.name)
        kernel = _MapKernel()
        kernel.nbytes, kernel.what = buffer_request(shape, out_dtype, self.runtime) if out is None else (0, None)
        kernel.numel = math.prod(shape)
        kinds = tuple(a.dtype if isinstance(a, View) else None for a in args)
        views = [a for a in args if isinstance(a, View)]
        letters = tuple(x for x, kind in zip(_OPERANDS, kinds) if kind is not None)
        nd = 0 if all(v.is_contiguous() for v in ([out] if out is not None else []) + views) else len(shape)
        params = map_params(nd, letters, len(kinds) - len(views))
        strides = {}
        if nd:
            strides = {"shape": shape, "out_strides": out.strides if out is not None else contiguous_strides(shape)}
            strides.update({f"{x}_strides": v.strides for x, v in zip(letters, views)})
        # the block's words but the offsets and scalars (the last ones) are packed once
        tail = 1 + len(kinds)
        words = params.pack(numel=kernel.numel, **strides, offsets=[0] * (1 + len(views)),
                            scalars=[0] * (len(kinds) - len(views)))
        kernel.head, kernel.tail = block_packer(words[:-tail], tail)
        kernel.groups = groups(kernel.numel)
        pipeline_key = ("map", op.name, op.wgsl, compute.name, out_dtype.name, nd,
                        tuple("scalar" if kind is None else kind.name for kind in kinds))
        kernel.compile = (pipeline_key, lambda: _map_source(op, kinds, compute, out_dtype, nd, params), "main",
                          ("read_write",) + ("read",) * len(views))
        kernel.pipeline = None
        kernel.spec = MapSpec(op, kinds, compute, out_dtype, shape,
                              tuple(None if v is None or v.is_contiguous() else v.strides for v in (out, *views)))
        if len(self._map_kernels) >= MAP_KERNELS_KEPT:
            self._map_kernels.clear()
        self._map_kernels[key] = kernel
        return kernel


def _map_source(op, kinds, compute, out_dtype, nd, params):
    """The kernel for op over operands of nd strided dims (0: all contiguous); kinds: each
    operand's dtype, None for a scalar. The element's coordinates are found once, unrolled over
    the nd dims, and shared by every operand."""
    bindings = [f"@group(0) @binding(1) var<storage, read_write> out: array<{out_dtype.stored}>;"]
    body = []
    if nd:
        body.append("    var rest = i;")
        for d in range(nd - 1, 0, -1):
            body.append(f"    let c{d} = rest % params_shape({d}u);")
            body.append(f"    rest /= params_shape({d}u);")
        body.append("    let c0 = rest;")

    def element(slot, x):
        return f"params_offsets({slot}u)" + ("".join(f" + c{d} * params_{x}_strides({d}u)" for d in range(nd))
                                             or " + i")

    body.append(f"    let o = {element(0, 'out')};")
    slot = scalar = 0
    for k, kind in enumerate(kinds):
        x = _OPERANDS[k]
        if kind is not None:
            slot += 1
            bindings.append(f"@group(0) @binding({slot + 1}) var<storage, read> in_{x}: array<{kind.stored}>;")
            body.append(f"    let at_{x} = {element(slot, x)};")
            body.append(f"    let {x} = {operand(op, k, load(kind, f'in_{x}', f'at_{x}'))};")
        else:
            body.append(f"    let {x} = {scalar_operand(scalar, compute)};")
            scalar += 1
    body.append(f"    out[o] = {stored(out_dtype, op.wgsl)};")
    return fill("map", params, compute=compute.wgsl, bindings="\n".join(bindings), body="\n".join(body))


def load(kind, buffer, at):
    """WGSL: the element of a `kind` buffer at position `at` (a name: uint8 reads it twice)."""
    return f"byte_at({buffer}[{at} >> 2u], {at})" if kind is dtypes.uint8 else f"{buffer}[{at}]"


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
