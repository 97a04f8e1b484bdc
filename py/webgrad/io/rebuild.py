"""What the names a checkpoint's pickle may use mean when webgrad reads it: the table of allowed
globals (torch's tensor and parameter rebuilders, its storage classes, torch.Size, OrderedDict,
set, complex, and _codecs.encode for bytes), each checking its arguments.

The pickle is read twice. The first reading (Plan) makes TensorRef placeholders, so every tensor
can be checked and named before any data is read or device memory taken; the second (Build) hands
out the tensors made from them, in the same order.
"""
from collections import OrderedDict

from .._tensor import Size, Tensor
from .pickle_reader import Function
from .storage_types import STORAGE_TYPES


class StorageRef:
    """A storage the pickle names: its record, type, element count and saved location."""

    def __init__(self, key, kind, location, numel):
        self.key, self.kind, self.location, self.numel = key, kind, location, numel
        self.device = self.base = None


class TensorRef:
    """A tensor as the first reading of the pickle finds it, before any data is read."""
    __slots__ = ("storage", "offset", "size", "stride", "requires_grad")

    def __init__(self, storage, offset, size, stride, requires_grad):
        self.storage, self.offset, self.size, self.stride = storage, offset, size, stride
        self.requires_grad = requires_grad


class Plan:
    """The first reading: placeholders, collected to be checked and named."""

    def __init__(self):
        self.tensors = []

    def tensor(self, storage, offset, size, stride, requires_grad):
        t = TensorRef(storage, offset, size, stride, requires_grad)
        self.tensors.append(t)
        return t

    @staticmethod
    def parameter(t, requires_grad):
        t.requires_grad = requires_grad
        return t


class Build:
    """The second reading: the tensors made from the first, in the same order."""

    def __init__(self, tensors):
        self.next = iter(tensors).__next__

    def tensor(self, *args):
        return self.next()

    @staticmethod
    def parameter(t, requires_grad):
        return t   # its requires_grad was set when it was made


def allowed_globals(maker):
    """The names a checkpoint's pickle may use, and what each means to the reader; maker is the
    reading's Plan or Build."""
    def rebuild_tensor_v2(storage, offset, size, stride, requires_grad, backward_hooks, metadata=None):
        if type(requires_grad) is not bool:
            raise TypeError(f"requires_grad is a {type(requires_grad).__name__}")
        if not isinstance(backward_hooks, dict) or not (metadata is None or isinstance(metadata, dict)):
            raise TypeError("backward hooks and metadata must be dicts")
        return rebuild_tensor(storage, offset, size, stride, requires_grad)

    def rebuild_tensor(storage, offset, size, stride, requires_grad=False):
        if not isinstance(storage, StorageRef):
            raise TypeError(f"the storage is a {type(storage).__name__}")
        if not (_naturals(size) and _naturals(stride) and len(size) == len(stride)):
            raise ValueError(f"size {brief(size)} and stride {brief(stride)} are not tuples of as many "
                             f"non-negative ints")
        if type(offset) is not int or offset < 0:
            raise ValueError(f"storage offset {brief(offset)} is not a non-negative int")
        return maker.tensor(storage, offset, tuple(size), tuple(stride), requires_grad)

    def rebuild_parameter(data, requires_grad, backward_hooks):
        if not isinstance(data, (TensorRef, Tensor)) or type(requires_grad) is not bool:
            raise TypeError("a parameter is made of a tensor and a bool")
        return maker.parameter(data, requires_grad)

    def encode(text, encoding):   # how protocol 2 writes bytes
        if type(text) is not str or encoding not in ("latin1", "latin-1"):
            raise TypeError("_codecs.encode is read only as protocol 2 writes bytes (text, 'latin1')")
        return text.encode("latin1")

    def size(dims):
        if not _naturals(dims):
            raise TypeError(f"torch.Size of {brief(dims)}")
        return Size(dims)

    def set_(items):
        if type(items) is not list:
            raise TypeError(f"set() of a {type(items).__name__}, where protocol 2 writes a list")
        return set(items)

    def complex_(real, imag=0.0):
        if not all(type(v) in (int, float) for v in (real, imag)):
            raise TypeError("complex() of numbers only")
        return complex(real, imag)

    functions = [
        Function("torch._utils._rebuild_tensor_v2", rebuild_tensor_v2),
        Function("torch._utils._rebuild_tensor", rebuild_tensor),
        Function("torch._utils._rebuild_parameter", rebuild_parameter),
        Function("collections.OrderedDict", lambda: OrderedDict()),
        Function("torch.Size", size),
        Function("builtins.set", set_),
        Function("builtins.complex", complex_),
        Function("_codecs.encode", encode),
    ]
    allowed = {f.name: f for f in functions}
    allowed.update((f"torch.{name}", kind) for name, kind in STORAGE_TYPES.items())
    return allowed


def _naturals(values):
    return type(values) in (tuple, Size) and all(type(v) is int and v >= 0 for v in values)


def brief(value):
    """A value from a file, for an error message: short, and never a repr of a structure (which may
    nest deeper than repr can go, or be huge)."""
    if type(value) in (int, float, bool, type(None)) or (type(value) is str and len(value) <= 40):
        return repr(value)
    if type(value) in (tuple, Size) and len(value) <= 8 and all(type(v) in (int, bool) for v in value):
        return repr(tuple(value))
    return f"a {type(value).__name__}"
