"""Creating tensors: from host data, constants, ranges and the seeded random generator.

Host data travels as bytes in the host layout of its dtype (array/memoryview, no NumPy needed).
Random numbers come from a counter-based generator (ops/generator.py: a hash of seed and element
index), run by the same formula on both devices, so a seed gives the same numbers on cpu and webgpu.
"""
import array
import math
import struct

from .. import dtypes
from ..backends import get_backend, resolve_device
from ..backends.base import FILL, PERMUTATION_ROUNDS, Elementwise
from .._tensor import Tensor, tensor_method
from .elementwise import where
from .generator import default_generator, initial_seed, manual_seed  # noqa: F401  (re-exported: webgrad.manual_seed)

ARANGE = Elementwise("arange", "a + T(i) * b", lambda np, i, a, b: a + i * b, index=True)


def _drawer(count, generator=None):
    """A function giving (seed, offset) for `count` fresh numbers of generator's stream (the default
    generator's when None), moving it past them."""
    return (generator or default_generator).drawer(count)


def _shape(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    shape = tuple(int(s) for s in size)
    if any(s < 0 for s in shape):
        raise RuntimeError(f"trying to create tensor with negative dimension: {shape}")
    return shape


def _new(storage, shape, dtype, device, requires_grad):
    t = Tensor(storage, shape, dtype, device)
    return t.requires_grad_() if requires_grad else t


def full(size, fill_value, *, dtype=None, device=None, requires_grad=False):
    shape = _shape((size,) if isinstance(size, int) else (tuple(size),))
    if dtype is None:
        dtype = (dtypes.bool_ if isinstance(fill_value, bool) else
                 dtypes.int32 if isinstance(fill_value, int) else dtypes.float32)
    dtype, device = dtypes.as_dtype(dtype), resolve_device(device)
    value = bool(fill_value) if dtype is dtypes.bool_ else (
        float(fill_value) if dtype.is_floating_point else int(fill_value))
    storage = get_backend(device).map(FILL, (value,), shape, dtype, dtype)
    return _new(storage, shape, dtype, device, requires_grad)


def zeros(*size, dtype=None, device=None, requires_grad=False):
    return full(_shape(size), 0.0, dtype=dtype or dtypes.float32, device=device, requires_grad=requires_grad)


def ones(*size, dtype=None, device=None, requires_grad=False):
    return full(_shape(size), 1.0, dtype=dtype or dtypes.float32, device=device, requires_grad=requires_grad)


def empty(*size, dtype=None, device=None, requires_grad=False):
    return zeros(*size, dtype=dtype, device=device, requires_grad=requires_grad)


def zeros_like(x, *, dtype=None, device=None, requires_grad=False):
    return zeros(x.shape, dtype=dtype or x.dtype, device=device or x.device, requires_grad=requires_grad)


def ones_like(x, *, dtype=None, device=None, requires_grad=False):
    return ones(x.shape, dtype=dtype or x.dtype, device=device or x.device, requires_grad=requires_grad)


def full_like(x, fill_value, *, dtype=None, device=None, requires_grad=False):
    return full(x.shape, fill_value, dtype=dtype or x.dtype, device=device or x.device,
                requires_grad=requires_grad)


# x.new_*: a new tensor of x's dtype on x's device, unless told otherwise
@tensor_method
def new_tensor(x, data, *, dtype=None, device=None, requires_grad=False):
    return tensor(data, dtype=dtype or x.dtype, device=device or x.device, requires_grad=requires_grad)


@tensor_method
def new_full(x, size, fill_value, *, dtype=None, device=None, requires_grad=False):
    return full(size, fill_value, dtype=dtype or x.dtype, device=device or x.device, requires_grad=requires_grad)


@tensor_method
def new_zeros(x, *size, dtype=None, device=None, requires_grad=False):
    return new_full(x, _shape(size), 0, dtype=dtype, device=device, requires_grad=requires_grad)


@tensor_method
def new_ones(x, *size, dtype=None, device=None, requires_grad=False):
    return new_full(x, _shape(size), 1, dtype=dtype, device=device, requires_grad=requires_grad)


new_empty = Tensor.new_empty = new_zeros   # (zeros: an empty tensor's values are unspecified)


def _number(v):
    """A bound given as a 0-d tensor is its value."""
    return v.item() if isinstance(v, Tensor) else v


def arange(start, end=None, step=1, *, dtype=None, device=None, requires_grad=False):
    if end is None:
        start, end = 0, start
    start, end, step = _number(start), _number(end), _number(step)
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if not all(math.isfinite(v) for v in (start, end)):
        raise RuntimeError(f"unsupported range: {start} -> {end}")
    if (end - start) * step < 0:
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    if dtype is None:
        dtype = dtypes.int32 if all(isinstance(v, int) for v in (start, end, step)) else dtypes.float32
    dtype, device = dtypes.as_dtype(dtype), resolve_device(device)
    count = max(0, math.ceil((end - start) / step))
    cast = float if dtype.is_floating_point else int
    storage = get_backend(device).map(ARANGE, (cast(start), cast(step)), (count,), dtype, dtype)
    return _new(storage, (count,), dtype, device, requires_grad)


def _f32(value):
    """value rounded to float32, as a kernel computing in float32 holds it."""
    return struct.unpack("<f", struct.pack("<f", value))[0]


def linspace(start, end, steps, *, dtype=None, device=None, requires_grad=False):
    """steps values from start to end; the first half counts up from start and the second down from
    end, in float32 (as PyTorch computes them, so the ends are exact)."""
    start, end = _number(start), _number(end)
    if not isinstance(steps, int) or isinstance(steps, bool):
        raise TypeError(f"linspace(): argument 'steps' must be int, not {type(steps).__name__}")
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    dtype = dtypes.as_dtype(dtype or dtypes.float32)
    compute = dtype if dtype.is_floating_point else dtypes.float32
    if steps <= 1:
        return full((steps,), start, dtype=dtype, device=device, requires_grad=requires_grad)
    low, high = (_f32(start), _f32(end)) if compute is dtypes.float32 else (float(start), float(end))
    step = (high - low) / (steps - 1)
    step = _f32(step) if compute is dtypes.float32 else step
    i = arange(steps, dtype=compute, device=device)
    out = where(i < steps // 2, i * step + low, high - (steps - 1 - i) * step).to(dtype)
    return out.requires_grad_() if requires_grad else out


def logspace(start, end, steps, base=10.0, *, dtype=None, device=None, requires_grad=False):
    out = (float(base) ** linspace(start, end, steps, device=device)).to(dtypes.as_dtype(dtype or dtypes.float32))
    return out.requires_grad_() if requires_grad else out


def _random(size, normal, dtype, device, requires_grad, generator):
    shape = _shape(size)
    dtype, device = dtypes.as_dtype(dtype or dtypes.float32), resolve_device(device)
    if not dtype.is_floating_point:
        raise TypeError(f"rand/randn produce floating point tensors, not {dtype.name}")
    numel = math.prod(shape)
    drawn = dtypes.float32 if dtype is dtypes.float16 else dtype   # float16: float32 draws, rounded
    storage = get_backend(device).random(shape, normal, _drawer(2 * numel if normal else numel, generator), drawn)
    out = _new(storage, shape, drawn, device, False)
    return (out.to(dtype) if drawn is not dtype else out).requires_grad_(requires_grad)


def randperm(n, *, generator=None, dtype=None, device=None, requires_grad=False, draw=None):
    """A random permutation of 0..n-1 (int32), made on the device. draw: a function giving the
    (seed, offset) to use, for streams other than a Generator's (as DataLoader(seed=...) has)."""
    if not isinstance(n, int) or n < 0 or n > 0x7FFFFFFF:
        raise ValueError(f"randperm: n must be an int in [0, 2**31), got {n!r}")
    dtype, device = dtypes.as_dtype(dtype or dtypes.int32), resolve_device(device)
    if dtype is not dtypes.int32:
        raise TypeError(f"randperm makes int32 indices, not {dtype.name}")
    half = (max(1, (n - 1).bit_length()) + 1) // 2   # permute [0, 4^half), the least such range holding n
    storage = get_backend(device).permutation(n, half, draw or _drawer(PERMUTATION_ROUNDS, generator))
    return _new(storage, (n,), dtype, device, False)


def rand(*size, generator=None, dtype=None, device=None, requires_grad=False):
    """Uniform on [0, 1)."""
    return _random(size, False, dtype, device, requires_grad, generator)


def randn(*size, generator=None, dtype=None, device=None, requires_grad=False):
    """Standard normal."""
    return _random(size, True, dtype, device, requires_grad, generator)


def rand_like(x, *, dtype=None, device=None):
    return rand(x.shape, dtype=dtype or x.dtype, device=device or x.device)


def randn_like(x, *, dtype=None, device=None):
    return randn(x.shape, dtype=dtype or x.dtype, device=device or x.device)


# ---- host data ----
def tensor(data, *, dtype=None, device=None, requires_grad=False):
    """A new tensor holding a copy of data: a number, nested lists, an array.array, a Tensor or a NumPy array."""
    device = resolve_device(device)
    if isinstance(data, Tensor):
        out = data.detach().to(device=device, dtype=dtype or data.dtype).clone()
        return out.requires_grad_() if requires_grad else out
    if hasattr(data, "__array_interface__"):
        raw, shape, inferred = _from_numpy(data, dtype)
        target = dtypes.as_dtype(dtype) if dtype is not None else inferred
        if target is not inferred:
            raw = _pack(dtypes.host_values(raw, inferred), target)
    else:
        flat, shape, inferred = _from_python(data)
        target = dtypes.as_dtype(dtype) if dtype is not None else inferred
        raw = _pack(flat, target)   # the Python numbers straight to target (float64 keeps every digit)
    if target is dtypes.float64 and device != "cpu":
        raise TypeError("float64 is not supported on webgpu (WGSL has no f64); use float32")
    storage = get_backend(device).upload(raw, target)
    return _new(storage, shape, target, device, requires_grad)


def as_tensor(data, dtype=None, device=None):
    if isinstance(data, Tensor) and (dtype is None or dtypes.as_dtype(dtype) is data.dtype) and (
            device is None or resolve_device(device) == data.device):
        return data
    return tensor(data, dtype=dtype, device=device)


def from_numpy(ndarray):
    """torch.from_numpy, as a copy on the default device (webgrad's tensors may live on a GPU, so it
    cannot share the array's memory); float64 arrays become float32 as in tensor()."""
    import numpy as np
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(ndarray).__name__})")
    return tensor(ndarray)


def frombuffer(buffer, dtype=dtypes.uint8, *, device=None):
    """A 1-D tensor of the bytes in buffer, read as dtype (no NumPy needed)."""
    dtype = dtypes.as_dtype(dtype)
    raw = memoryview(buffer).cast("B")
    if len(raw) % dtype.itemsize:
        raise ValueError(f"buffer size {len(raw)} is not a multiple of the {dtype.name} element size {dtype.itemsize}")
    device = resolve_device(device)
    return _new(get_backend(device).upload(raw, dtype), (len(raw) // dtype.itemsize,), dtype, device, False)


def _from_python(data):
    shape, flat = [], []
    _flatten(data, 0, shape, flat)
    if all(isinstance(v, bool) for v in flat) and flat:
        dtype = dtypes.bool_
    elif flat and all(isinstance(v, int) for v in flat):   # empty data is float32, as in torch
        dtype = dtypes.int32
        if flat and not -2**31 <= min(flat) <= max(flat) < 2**31:
            raise OverflowError("integer value out of the int32 range")
    else:
        dtype = dtypes.float32
    if not flat and not shape:
        raise ValueError("could not infer a tensor from empty data")
    return flat, tuple(shape), dtype


def _flatten(data, depth, shape, flat):
    """Appends data's numbers to flat and its lengths to shape. The exception classes are torch's:
    ValueError for lists of different lengths, TypeError for a list and a number at one depth or
    a string, RuntimeError for another element type."""
    if isinstance(data, (list, tuple)):
        if flat and len(shape) == depth:   # numbers came before at this depth: [1, [2]]
            raise TypeError("ragged nested sequence: every element at one depth must be a list or a number")
        if len(shape) == depth:
            shape.append(len(data))
        elif shape[depth] != len(data):
            raise ValueError(f"expected sequence of length {shape[depth]} at dim {depth} (got {len(data)})")
        for item in data:
            _flatten(item, depth + 1, shape, flat)
    elif hasattr(data, "__array_interface__") and not isinstance(data, Tensor):   # NumPy arrays and scalars
        _flatten(data.tolist(), depth, shape, flat)
    elif isinstance(data, (bool, int, float)) or hasattr(data, "__float__"):
        if depth != len(shape):
            raise TypeError("ragged nested sequence: every element at one depth must be a list or a number")
        flat.append(data if isinstance(data, (bool, int, float)) else data._scalar() if isinstance(data, Tensor)
                    else float(data))
    elif isinstance(data, (str, bytes)):
        raise TypeError(f"can't make a tensor from an element of type {type(data).__name__}")
    else:
        raise RuntimeError(f"can't make a tensor from an element of type {type(data).__name__}")


def _from_numpy(data, dtype):
    import numpy as np
    arr = np.asarray(data)
    kind = arr.dtype.kind
    if kind == "b":
        inferred = dtypes.bool_
    elif arr.dtype == np.uint8:
        inferred = dtypes.uint8
    elif kind in "iu":
        if arr.size and not (-2**31 <= arr.min() and arr.max() < 2**31):
            raise OverflowError("integer value out of the int32 range")
        inferred, arr = dtypes.int32, arr.astype(np.int32)
    elif arr.dtype == np.float16:
        inferred = dtypes.float16
    elif kind == "f":
        wanted = dtypes.float64 if dtype is not None and dtypes.as_dtype(dtype) is dtypes.float64 else dtypes.float32
        inferred, arr = wanted, arr.astype(wanted.name)
    else:
        raise TypeError(f"can't make a tensor from a NumPy array of dtype {arr.dtype}")
    return np.ascontiguousarray(arr).tobytes(), tuple(arr.shape), inferred


def _pack(values, target):
    """Numbers as the host bytes of dtype target."""
    if target is dtypes.bool_:
        values = [bool(v) for v in values]
    elif target.is_floating_point:
        values = [float(v) for v in values]
    else:
        values = [int(v) for v in values]
    if target is dtypes.uint8 and any(not 0 <= v < 256 for v in values):
        raise OverflowError("value out of the uint8 range")
    if target is dtypes.float16:   # (array has no float16) struct rounds to nearest even, but raises
        values = [v if not abs(v) >= 65520.0 else math.copysign(math.inf, v) for v in values]   # past its range
        return struct.pack(f"<{len(values)}e", *values)
    return array.array(target.array_code, values).tobytes()
