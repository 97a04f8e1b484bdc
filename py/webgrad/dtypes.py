"""Tensor element types.

Kernels compute in 32-bit scalars: uint8 data lives packed four to a u32 word on the GPU, bool
as one u32 per element, and float16 as WGSL's f16 (2 bytes an element; only where the device was
granted the "shader-f16" feature), read into f32 and rounded back to f16 when stored. float64 exists
on the cpu device alone (finite-difference checks).
"""
import struct


class DType:
    def __init__(self, name, itemsize, kind, wgsl, gpu_itemsize, array_code, stored=None):
        self.name = name
        self.itemsize = itemsize          # bytes per element on the host
        self.kind = kind                  # 'f' float, 'i' signed int, 'u' unsigned int, 'b' bool
        self.wgsl = wgsl                  # WGSL type of one element as a kernel computes with it
        self.stored = stored or wgsl      # WGSL type of a GPU buffer's elements (array<stored>)
        self.gpu_itemsize = gpu_itemsize  # bytes per element in a GPU buffer (uint8: 1, packed 4 to a u32)
        self.array_code = array_code      # the struct / memoryview format of one host element

    @property
    def is_floating_point(self):
        return self.kind == "f"

    def __repr__(self):
        return f"webgrad.{self.name}"


float32 = DType("float32", 4, "f", "f32", 4, "f")
float64 = DType("float64", 8, "f", None, None, "d")
int32 = DType("int32", 4, "i", "i32", 4, "i")
uint8 = DType("uint8", 1, "u", "u32", 1, "B")
bool_ = DType("bool", 1, "b", "u32", 4, "B")
float16 = DType("float16", 2, "f", "f32", 2, "e", stored="f16")
# Named so programs that mention it run until they make such a tensor, which raises (check_supported).
bfloat16 = DType("bfloat16", 2, "f", None, None, None)

ALL = (float32, float64, int32, uint8, bool_, float16, bfloat16)
_BY_NAME = {d.name: d for d in ALL}


def host_values(raw, dtype):
    """The Python numbers in raw, host bytes of dtype's elements (struct: array has no float16)."""
    return list(struct.unpack(f"<{len(raw) // dtype.itemsize}{dtype.array_code}", raw))


def as_dtype(value):
    """A DType from a DType, a name ('float32'), or a NumPy / Python type."""
    if isinstance(value, DType):
        return value
    name = getattr(value, "name", None) or getattr(value, "__name__", None) or str(value)
    name = {"float": "float32", "int": "int32", "int64": "int32", "long": "int32",
            "bool_": "bool", "double": "float64", "half": "float16"}.get(name, name)
    if name in _BY_NAME:
        return _BY_NAME[name]
    raise TypeError(f"unsupported dtype {value!r}; webgrad has {', '.join(_BY_NAME)}")

# dtypes as PyTorch's messages name them
TYPE_NAMES = {"float32": "Float", "float64": "Double", "int32": "Int", "uint8": "Byte", "bool": "Bool",
              "float16": "Half", "bfloat16": "BFloat16"}


def check_supported(dtype, device):
    """Raise for a dtype no tensor on device can hold (bfloat16 nowhere yet, float64 on the cpu
    device only; float16 on webgpu needs shader-f16, which the webgpu backend checks)."""
    if dtype is bfloat16:
        raise TypeError(f"webgrad does not support {dtype.name} tensors yet; use float32")
    if dtype is float64 and device != "cpu":
        raise TypeError(f"{device}: float64 is not supported (WGSL has no 64-bit floats); use float32 "
                        "or the cpu device")


def promote(a, b):
    """Result dtype of a binary op on two tensor dtypes (PyTorch's category rule)."""
    if a is b:
        return a
    order = {"b": 0, "u": 1, "i": 2, "f": 3}
    if a.kind == b.kind == "f":   # the wider float (float16 with float32: float32)
        return a if a.itemsize > b.itemsize else b
    return a if order[a.kind] >= order[b.kind] else b
