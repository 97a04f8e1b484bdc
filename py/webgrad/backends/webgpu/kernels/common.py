"""What every kernel family shares: the WGSL sources (shaders/*.wgsl) and how they are filled
in, the workgroup size of one-thread-per-element kernels, and the checks and sizes of buffers.

A family's source is shaders/common.wgsl, its parameter block's WGSL (params.ParamBlock), the
shared snippets it includes (such as shaders/workgroup.wgsl), then shaders/<family>.wgsl with its
{{slots}} filled per op and dtype; a filled source is compiled once by the runtime and cached by
its key.
"""
import math
import os
import re

from .... import dtypes
from ..runtime import f32_bits

_SHADER_DIRS = (os.path.join(os.path.dirname(__file__), "..", "..", "..", "shaders"),      # inside the wheel
                os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "..", "shaders"))  # the repo
_sources = {}
_SLOT = re.compile(r"\{\{(\w+)\}\}")
_F16 = re.compile(r"\bf16\b")
_COMMENT = re.compile(r"//[^\n]*")
# The optional WebGPU feature float16 tensors need on the webgpu device (runtime.OPTIONAL_FEATURES).
FLOAT16_FEATURE = "shader-f16"

# Threads per workgroup of the kernels that give each thread one element (WGSL's WORKGROUP_SIZE).
WORKGROUP_SIZE = 256

LOWEST = {"f32": "f32_from_bits(0xff800000u)", "i32": "bitcast<i32>(0x80000000u)", "u32": "0u"}
HIGHEST = {"f32": "f32_from_bits(0x7f800000u)", "i32": "2147483647", "u32": "0xffffffffu"}


def shader(name):
    """The text of shaders/<name>.wgsl."""
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


def fill(template, params, includes=(), **slots):
    """shaders/<template>.wgsl after common.wgsl, the ParamBlock `params` and the snippets named in
    `includes` (shaders/<name>.wgsl, which have no slots: the template declares what they use), its
    {{slots}} filled; a slot left unfilled (or a value given for no slot) is an error here, not a
    compile error later."""
    source = shader(template)
    wanted = set(_SLOT.findall(source))
    if wanted != set(slots):
        raise ValueError(f"shaders/{template}.wgsl: slots {sorted(wanted - set(slots))} not filled, "
                         f"{sorted(set(slots) - wanted)} filled but not in the file")
    source = _SLOT.sub(lambda m: slots[m.group(1)], source)
    snippets = [shader(name) for name in includes]
    for name, snippet in zip(includes, snippets):
        if _SLOT.search(snippet):
            raise ValueError(f"shaders/{name}.wgsl is included, so it cannot have {{{{slots}}}}")
    common = shader("common").replace("{{workgroup_size}}", str(WORKGROUP_SIZE))
    # f16 (float16 buffers) needs the extension enabled before any declaration, and only there: an
    # adapter without shader-f16 refuses every kernel that enables it
    enable = ["enable f16;"] if _F16.search(_COMMENT.sub("", source)) else []
    return "\n".join([*enable, common, params.wgsl(), *snippets, source])




def groups(count, size=WORKGROUP_SIZE):
    """Workgroups of `size` threads covering count elements (at least one)."""
    return max(1, -(-count // size))


def pieces(count, wanted, unit):
    """count cut into about `wanted` pieces of whole units each (the last one shorter): (a piece's
    length, the pieces), at least one piece."""
    span = -(-count // wanted // unit) * unit
    return span, groups(count, max(span, 1))


def load(kind, buffer, at):
    """WGSL: the element of a `kind` buffer at position `at` (a name: uint8 reads it twice)."""
    return f"byte_at({buffer}[{at} >> 2u], {at})" if kind is dtypes.uint8 else f"{buffer}[{at}]"


def word(value, dtype):
    """A scalar operand as the u32 word its WGSL type is bitcast from."""
    if dtype.kind == "f":
        return f32_bits(float(value))
    return int(value) & 0xFFFFFFFF


def check_gpu_dtype(dtype, what, float16=False):
    """Refuse dtypes no webgpu kernel takes; float16 too, but where the family reads f16 buffers
    (float16=True: map, reduce, matmul). The ops of the others compute in float32 (ops/half.py), so
    a float16 view here is a bug, raised rather than read as 32-bit words."""
    if dtype is dtypes.float64:
        raise TypeError(f"webgpu: {what} float64 is not supported (WGSL has no f64); use float32")
    if dtype is dtypes.float16 and not float16:
        raise TypeError(f"webgpu: {what} float16 has no kernel (its op should run in float32: ops/half.py)")
    dtypes.check_supported(dtype, "webgpu")


def check_float16(dtype, runtime):
    """Refuse float16 where the device was not granted shader-f16 (SwiftShader has none): never a
    silent float32 instead."""
    if dtype is dtypes.float16 and FLOAT16_FEATURE not in runtime.features:
        raise TypeError(f"webgpu: float16 tensors need WGSL's f16, and the adapter "
                        f"'{runtime.driver.info.get('name', '?')}' lacks the WebGPU feature {FLOAT16_FEATURE}; "
                        "use float32")


def buffer_request(shape, dtype, runtime):
    """runtime.alloc's arguments for a tensor of this shape and dtype: its bytes, and its name for
    a too-large error, raised here already (before a kernel packs sizes past 32 bits into its words)."""
    check_gpu_dtype(dtype, "tensors of", float16=True)
    check_float16(dtype, runtime)
    nbytes = max(4, math.ceil(math.prod(shape) * dtype.gpu_itemsize / 4) * 4)

    def what():
        return f"{'an' if dtype.name[0] in 'aeio' else 'a'} {dtype.name} tensor of shape {tuple(shape)}"
    runtime.check_fits(nbytes, what)
    return nbytes, what
