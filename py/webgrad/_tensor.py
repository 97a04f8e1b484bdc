"""The Tensor: a strided view (shape, strides, offset) of a backend storage, plus autograd state.

Views (reshape, permute, expand, slicing) share storage and change only the layout; kernels on
both devices read any layout, so a view costs no copy. Ops live in webgrad.ops; the methods here
only forward to them, with PyTorch's names.
"""
import array
import math

from . import dtypes
from .autograd import backward as _backward
from .backends import get_backend, resolve_device
from .backends.base import View, contiguous_strides


class Tensor:
    __slots__ = ("_storage", "shape", "_strides", "_offset", "dtype", "device", "requires_grad",
                 "grad", "_ctx", "_backend_view", "__weakref__")

    def __init__(self, storage, shape, dtype, device, strides=None, offset=0):
        self._storage = storage
        self.shape = shape if type(shape) is Size else Size(shape)
        self._strides = contiguous_strides(self.shape) if strides is None else tuple(strides)
        self._offset = offset
        self.dtype = dtype
        self.device = device
        self.requires_grad = False
        self.grad = None
        self._ctx = None
        self._backend_view = None

    # ---- layout ----
    @property
    def ndim(self):
        return len(self.shape)

    def dim(self):
        return len(self.shape)

    def numel(self):
        return math.prod(self.shape)

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[_wrap_dim(dim, self.ndim)]

    def stride(self, dim=None):
        return self._strides if dim is None else self._strides[_wrap_dim(dim, self.ndim)]

    def is_contiguous(self):
        if self._strides == contiguous_strides(self.shape):
            return True
        return all(st == c for size, st, c in zip(self.shape, self._strides, contiguous_strides(self.shape))
                   if size != 1)

    def element_size(self):
        return self.dtype.itemsize

    @property
    def backend(self):
        return get_backend(self.device)

    @property
    def _view(self):
        """What a backend sees of this tensor (backends.base.View); made once: a Tensor's storage
        and layout never change (whoever changes them must reset _backend_view)."""
        if self._backend_view is None:
            self._backend_view = View(self._storage, self.shape, self._strides, self._offset, self.dtype)
        return self._backend_view

    def _set_data(self, value):
        """Point this tensor at value's storage, layout, dtype and device, staying the same object
        (`t.data = value`, Module.to): the one place a tensor's storage changes."""
        self._storage, self.shape, self._strides, self._offset = value._storage, value.shape, value._strides, value._offset
        self.dtype, self.device = value.dtype, value.device
        self._backend_view = None

    @property
    def is_leaf(self):
        return self._ctx is None

    @property
    def grad_fn(self):
        return self._ctx

    # ---- autograd ----
    def backward(self, gradient=None, retain_graph=False):
        _backward(self, gradient, retain_graph)

    def detach(self):
        return Tensor(self._storage, self.shape, self.dtype, self.device, self._strides, self._offset)

    def requires_grad_(self, requires_grad=True):
        if requires_grad and not self.dtype.is_floating_point:
            raise RuntimeError(f"only floating point tensors can require gradients, not {self.dtype.name}")
        if not requires_grad and self._ctx is not None:
            raise RuntimeError("requires_grad_(False) on a non-leaf tensor; use detach()")
        self.requires_grad = requires_grad
        return self

    # ---- host transfer ----
    def _host_bytes(self):
        return self.backend.download(self._view)

    def tolist(self):
        flat = array.array(self.dtype.array_code, self._host_bytes()).tolist()
        if self.dtype is dtypes.bool_:
            flat = [bool(v) for v in flat]
        return _nest(flat, self.shape)

    def item(self):
        if self.numel() != 1:
            raise RuntimeError(f"a Tensor with {self.numel()} elements cannot be converted to a scalar")
        return self.reshape(()).tolist()

    def numpy(self):
        import numpy as np
        if self.requires_grad:
            raise RuntimeError("can't call numpy() on a Tensor that requires grad; use tensor.detach().numpy()")
        np_dtype = np.bool_ if self.dtype is dtypes.bool_ else np.dtype(self.dtype.name)
        return np.frombuffer(bytearray(self._host_bytes()), dtype=np_dtype).reshape(self.shape)

    def __float__(self):
        return float(self._scalar())

    def __int__(self):
        return int(self._scalar())

    def _scalar(self):
        if self.numel() != 1:   # ValueError here, RuntimeError from item(): as in torch
            raise ValueError(f"only one element tensors can be converted to Python scalars (this one has "
                             f"{self.numel()})")
        return self.item()

    def __bool__(self):
        if self.numel() != 1:
            raise RuntimeError("the truth value of a Tensor with more than one element is ambiguous")
        return bool(self.item())

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __repr__(self):
        grad = ", requires_grad=True" if self.requires_grad else ""
        dtype = "" if self.dtype is dtypes.float32 else f", dtype={self.dtype!r}"
        return f"tensor({_format(self.tolist())}, device='{self.device}'{dtype}{grad})"

    # ---- devices and dtypes ----
    def to(self, *args, dtype=None, device=None):
        for a in args:
            if isinstance(a, Tensor):
                dtype, device = a.dtype, a.device
            elif isinstance(a, str):   # a dtype name ('float32') or else a device ('cpu', 'webgpu:0')
                try:
                    dtype = dtypes.as_dtype(a)
                except TypeError:
                    device = a
            else:
                dtype = a
        out = self
        if dtype is not None and dtypes.as_dtype(dtype) is not self.dtype:
            out = E.cast(out, dtypes.as_dtype(dtype))
        if device is not None and resolve_device(device) != out.device:
            out = M.to_device(out, resolve_device(device))
        return out

    def cpu(self):
        return self.to("cpu")

    def type(self, dtype):
        return self.to(dtype)

    def float(self):
        return self.to(dtypes.float32)

    def double(self):
        return self.to(dtypes.float64)

    def int(self):
        return self.to(dtypes.int32)

    def long(self):
        return self.to(dtypes.int32)

    def bool(self):
        return self.to(dtypes.bool_)

    def clone(self):
        return E.clone(self)

    def contiguous(self):
        return self if self.is_contiguous() else E.clone(self)

    # ---- elementwise ----
    def __add__(self, other): return E.add(self, other)
    def __radd__(self, other): return E.add(other, self)
    def __sub__(self, other): return E.sub(self, other)
    def __rsub__(self, other): return E.sub(other, self)
    def __mul__(self, other): return E.mul(self, other)
    def __rmul__(self, other): return E.mul(other, self)
    def __truediv__(self, other): return E.div(self, other)
    def __rtruediv__(self, other): return E.div(other, self)
    def __pow__(self, other): return E.pow(self, other)
    def __rpow__(self, other): return E.pow(other, self)
    def __neg__(self): return E.neg(self)
    def __abs__(self): return E.abs(self)
    def __matmul__(self, other): return MM.matmul(self, other)
    def __rmatmul__(self, other): return MM.matmul(other, self)
    def __eq__(self, other): return E.eq(self, other)
    def __ne__(self, other): return E.ne(self, other)
    def __lt__(self, other): return E.lt(self, other)
    def __le__(self, other): return E.le(self, other)
    def __gt__(self, other): return E.gt(self, other)
    def __ge__(self, other): return E.ge(self, other)
    def __invert__(self): return E.logical_not(self)
    def __and__(self, other): return E.logical_and(*_masks("&", self, other))
    def __rand__(self, other): return E.logical_and(*_masks("&", other, self))
    def __or__(self, other): return E.logical_or(*_masks("|", self, other))
    def __ror__(self, other): return E.logical_or(*_masks("|", other, self))
    __hash__ = object.__hash__
    __array_ufunc__ = None   # NumPy defers to our reflected ops: np.float32(2) * x is a Tensor

    def add(self, other): return E.add(self, other)
    def sub(self, other): return E.sub(self, other)
    def mul(self, other): return E.mul(self, other)
    def div(self, other): return E.div(self, other)
    def pow(self, other): return E.pow(self, other)
    def neg(self): return E.neg(self)
    def exp(self): return E.exp(self)
    def log(self): return E.log(self)
    def sqrt(self): return E.sqrt(self)
    def abs(self): return E.abs(self)
    def relu(self): return E.relu(self)
    def tanh(self): return E.tanh(self)
    def sigmoid(self): return E.sigmoid(self)
    def maximum(self, other): return E.maximum(self, other)
    def minimum(self, other): return E.minimum(self, other)
    def clamp(self, min=None, max=None): return E.clamp(self, min, max)
    clip = clamp
    def eq(self, other): return E.eq(self, other)
    def ne(self, other): return E.ne(self, other)
    def lt(self, other): return E.lt(self, other)
    def le(self, other): return E.le(self, other)
    def gt(self, other): return E.gt(self, other)
    def ge(self, other): return E.ge(self, other)

    # ---- reductions ----
    def sum(self, dim=None, keepdim=False): return R.sum(self, dim, keepdim)
    def mean(self, dim=None, keepdim=False): return R.mean(self, dim, keepdim)
    def var(self, dim=None, keepdim=False, correction=1, unbiased=None):
        return R.var(self, dim, keepdim, correction if unbiased is None else int(unbiased))
    def std(self, dim=None, keepdim=False, correction=1):
        return R.var(self, dim, keepdim, correction).sqrt()
    def max(self, dim=None, keepdim=False): return R.max(self, dim, keepdim)
    def min(self, dim=None, keepdim=False): return R.min(self, dim, keepdim)
    def amax(self, dim=None, keepdim=False): return R.amax(self, dim, keepdim)
    def amin(self, dim=None, keepdim=False): return R.amin(self, dim, keepdim)
    def argmax(self, dim=None, keepdim=False): return R.argmax(self, dim, keepdim)
    def argmin(self, dim=None, keepdim=False): return R.argmin(self, dim, keepdim)
    def softmax(self, dim): return L.softmax(self, dim)
    def log_softmax(self, dim): return L.log_softmax(self, dim)

    # ---- movement ----
    def reshape(self, *shape): return M.reshape(self, _shape_args(shape))
    def view(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], (dtypes.DType, str)):   # view(dtype): reinterpret the bytes
            return M.view_dtype(self, shape[0])
        return M.view(self, _shape_args(shape))
    def flatten(self, start_dim=0, end_dim=-1): return M.flatten(self, start_dim, end_dim)
    def permute(self, *dims): return M.permute(self, _shape_args(dims))
    def transpose(self, dim0, dim1): return M.transpose(self, dim0, dim1)
    def t(self):
        if self.ndim > 2:
            raise ValueError(f"t() expects a tensor with <= 2 dimensions, got {self.ndim}")
        return M.transpose(self, 0, 1) if self.ndim == 2 else self
    @property
    def T(self): return M.permute(self, tuple(reversed(range(self.ndim))))
    @property
    def mT(self): return M.transpose(self, -2, -1)
    def expand(self, *shape): return M.expand(self, _shape_args(shape))
    def expand_as(self, other): return M.expand(self, other.shape)
    def squeeze(self, dim=None): return M.squeeze(self, dim)
    def unsqueeze(self, dim): return M.unsqueeze(self, dim)
    def gather(self, dim, index): return M.gather(self, dim, index)
    def index_select(self, dim, index): return M.index_select(self, dim, index)
    def __getitem__(self, index): return M.getitem(self, index)
    def matmul(self, other): return MM.matmul(self, other)
    def mm(self, other): return MM.matmul(self, other)


class Size(tuple):
    """torch.Size: a tuple that prints as one."""

    def numel(self):
        return math.prod(self)

    def __repr__(self):
        return f"webgrad.Size({list(self)})"


def _wrap_dim(dim, ndim):
    wrapped = dim + max(ndim, 1) if dim < 0 else dim   # a 0-d tensor takes dim 0 or -1, as in torch
    if not 0 <= wrapped < max(ndim, 1):
        raise IndexError(f"dimension out of range (expected to be in range of [{-max(ndim, 1)}, "
                         f"{max(ndim, 1) - 1}], but got {dim})")
    return wrapped


def _masks(op, a, b):
    """& and | combine bool masks (logical and / or); bitwise integer ops are not supported."""
    for v in (a, b):
        if not (isinstance(v, bool) or (isinstance(v, Tensor) and v.dtype is dtypes.bool_)):
            kind = v.dtype.name if isinstance(v, Tensor) else type(v).__name__
            raise TypeError(f"'{op}' is supported on bool tensors only, not {kind}; "
                            f"use logical_and / logical_or")
    return a, b


def _shape_args(args):
    """reshape(2, 3) and reshape((2, 3)) both mean the shape (2, 3)."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = args[0]
    return tuple(int(a) for a in args)


def _format(value):
    if isinstance(value, list):
        return "[" + ", ".join(_format(v) for v in value) + "]"
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def _nest(flat, shape):
    if not shape:
        return flat[0]
    if len(shape) == 1:
        return flat
    step = math.prod(shape[1:])
    return [_nest(flat[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]


from .ops import elementwise as E, loss as L, matmul as MM, movement as M, reduce as R  # noqa: E402
from .ops.creation import ones_like  # noqa: E402,F401
