"""The Tensor: a strided view (shape, strides, offset) of a backend storage, plus autograd state.

Views (reshape, permute, expand, slicing) share storage and change only the layout; kernels on
both devices read any layout, so a view costs no copy. Ops live in webgrad.ops; the methods here
only forward to them, with PyTorch's names.
"""
import functools
import math
import weakref

from . import autograd as _autograd, dtypes
from ._tensor_str import tensor_repr
from .autograd_engine import backward as _backward, register_hook as _register_hook
from .backends import get_backend, resolve_device
from .backends.base import View, contiguous_strides


class Tensor:
    __slots__ = ("_storage", "shape", "_strides", "_offset", "dtype", "device", "requires_grad",
                 "grad", "_ctx", "_base", "_base_node", "_backend_view", "_hooks", "__weakref__")

    def __init__(self, storage=None, shape=None, dtype=None, device=None, strides=None, offset=None):
        if type(dtype) is not dtypes.DType:   # torch.Tensor(data) or torch.Tensor(*sizes), not a storage's view
            storage, shape, dtype, device, strides, offset = _construct(storage, shape, dtype, device, strides, offset)
        self._storage = storage
        self.shape = shape if type(shape) is Size else Size(shape)
        self._strides = (_contiguous(self.shape) if strides is None
                         else strides if type(strides) is tuple else tuple(strides))
        self._offset = offset or 0
        self.dtype = dtype
        self.device = device
        self.requires_grad = False
        self.grad = None
        self._ctx = None
        self._base = None   # the tensor this one is a view of (views of views name the first)
        self._base_node = None   # the base's grad_fn when this view's was made (see autograd's apply)
        self._backend_view = None

    # ---- layout ----
    @property
    def ndim(self):
        return len(self.shape)

    def dim(self):
        return len(self.shape)

    def numel(self):
        return math.prod(self.shape)

    nelement = numel
    ndimension = dim

    def storage_offset(self):
        return self._offset

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[_wrap_dim(dim, self.ndim)]

    def stride(self, dim=None):
        return self._strides if dim is None else self._strides[_wrap_dim(dim, self.ndim)]

    def is_contiguous(self):
        if self._strides == _contiguous(self.shape):
            return True
        return all(st == c for size, st, c in zip(self.shape, self._strides, _contiguous(self.shape))
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
        if _autograd._unpacking is not None:   # a backward rule reads this tensor: is it as saved?
            _autograd.check_saved(self)
        if self._backend_view is None:
            self._backend_view = View(self._storage, self.shape, self._strides, self._offset, self.dtype)
        return self._backend_view

    def _set_data(self, value):
        """Point this tensor at value's storage, layout, dtype and device, staying the same object
        (`t.data = value`, Module.to): the one place a tensor's storage changes."""
        self._storage, self.shape, self._strides = value._storage, value.shape, value._strides
        self._offset, self.dtype, self.device = value._offset, value.dtype, value.device
        self._backend_view = None

    @property
    def data(self):
        """The values without the autograd history (an alias, like detach())."""
        return self.detach()

    @data.setter
    def data(self, value):
        self._set_data(value)

    @property
    def _version(self):
        """How many in-place writes this tensor's storage has had (shared by its views)."""
        return _autograd.version(self._storage)

    @property
    def is_leaf(self):
        return self._ctx is None

    @property
    def grad_fn(self):
        if _autograd.is_stale_view(self):   # a stale view's: anew
            _autograd._refresh_view(self)
        return self._ctx

    # ---- autograd ----
    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        _backward(self, gradient, retain_graph, create_graph, inputs=inputs)

    register_hook = _register_hook   # (the hooks live on the graph node, unset "_hooks" until then)

    def detach(self):
        return Tensor(self._storage, self.shape, self.dtype, self.device, self._strides, self._offset)

    def detach_(self):
        if self._base is not None:
            raise RuntimeError("Can't detach views in-place. Use detach() instead.")
        self._ctx, self.requires_grad = None, False
        return self

    def requires_grad_(self, requires_grad=True):
        if requires_grad and not self.dtype.is_floating_point:
            raise RuntimeError(f"only floating point tensors can require gradients, not {self.dtype.name}")
        if not requires_grad and self._ctx is not None:
            raise RuntimeError("you can only change requires_grad flags of leaf variables. If you want to use a "
                               "computed variable in a subgraph that doesn't require differentiation use "
                               "var_no_grad = var.detach().")
        self.requires_grad = requires_grad
        return self

    def retain_grad(self):
        """Keep this non-leaf tensor's gradient in .grad at the next backward."""
        if not self.requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self._ctx is not None:
            self._ctx.retained = weakref.ref(self)

    @property
    def retains_grad(self):
        retained = getattr(self._ctx, "retained", None)
        return retained is not None and retained() is self

    # ---- host transfer ----
    def _host_bytes(self):
        return self.backend.download(self._view)

    def tolist(self):
        flat = dtypes.host_values(self._host_bytes(), self.dtype)
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

    def __index__(self):   # x[:t.max() + 1], range(t), a_list[t]
        if self.dtype.is_floating_point or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def _scalar(self):
        if self.numel() != 1:   # ValueError here, RuntimeError from item(): as in torch
            raise ValueError(f"only one element tensors can be converted to Python scalars (this one has "
                             f"{self.numel()})")
        return self.item()

    def __format__(self, spec):   # f"{loss:.4f}": a 0-d tensor formats as its number
        return format(self.item(), spec) if not self.shape else object.__format__(self, spec)

    def __array__(self, dtype=None, copy=None):   # np.array(t), np.asarray(t)
        values = self.numpy()
        return values if dtype is None else values.astype(dtype)

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

    def __repr__(self):   # (str and print too)
        return tensor_repr(self)

    # ---- devices and dtypes ----
    def to(self, *args, dtype=None, device=None, non_blocking=False, copy=False, memory_format=None):
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
            out = elementwise.cast(out, dtypes.as_dtype(dtype))
        if device is not None and resolve_device(device) != out.device:
            out = movement.to_device(out, resolve_device(device))
        return out.clone() if copy and out is self else out

    def cpu(self): return self.to("cpu")
    def type(self, dtype): return self.to(dtype)
    def type_as(self, other): return self.to(other.dtype)
    def float(self): return self.to(dtypes.float32)
    def double(self): return self.to(dtypes.float64)
    def half(self): return self.to(dtypes.float16)
    def int(self): return self.to(dtypes.int32)
    def long(self): return self.to(dtypes.int32)
    def bool(self): return self.to(dtypes.bool_)
    def is_floating_point(self): return self.dtype.is_floating_point
    is_cuda = property(lambda self: False)

    def clone(self):
        return elementwise.clone(self)

    def contiguous(self, memory_format=None):   # (ops/layout.py's memory_format: any layout serves)
        return self if self.is_contiguous() else elementwise.clone(self)

    # ---- elementwise ----
    def __add__(self, other): return elementwise.add(self, other)
    def __radd__(self, other): return elementwise.add(other, self)
    def __sub__(self, other): return elementwise.sub(self, other)
    def __rsub__(self, other): return elementwise.sub(other, self)
    def __mul__(self, other): return elementwise.mul(self, other)
    def __rmul__(self, other): return elementwise.mul(other, self)
    def __truediv__(self, other): return elementwise.div(self, other)
    def __rtruediv__(self, other): return elementwise.div(other, self)
    def __pow__(self, other): return elementwise.pow(self, other)
    def __rpow__(self, other): return elementwise.pow(other, self)
    def __neg__(self): return elementwise.neg(self)
    def __abs__(self): return elementwise.abs(self)
    def __matmul__(self, other): return matmul.matmul(self, other)
    def __rmatmul__(self, other): return matmul.matmul(other, self)
    def __eq__(self, other): return elementwise.eq(self, other)
    def __ne__(self, other): return elementwise.ne(self, other)
    def __lt__(self, other): return elementwise.lt(self, other)
    def __le__(self, other): return elementwise.le(self, other)
    def __gt__(self, other): return elementwise.gt(self, other)
    def __ge__(self, other): return elementwise.ge(self, other)
    def __invert__(self):
        if self.dtype.is_floating_point:
            raise TypeError("~ (operator.invert) is only implemented on integer and bool tensors")
        return elementwise.bitwise_not(self)
    def __and__(self, other): return elementwise.bitwise_and(self, other)
    def __rand__(self, other): return elementwise.bitwise_and(other, self)
    def __or__(self, other): return elementwise.bitwise_or(self, other)
    def __ror__(self, other): return elementwise.bitwise_or(other, self)
    def __xor__(self, other): return elementwise.bitwise_xor(self, other)
    def __rxor__(self, other): return elementwise.bitwise_xor(other, self)
    __hash__ = object.__hash__
    __array_ufunc__ = None   # NumPy defers to our reflected ops: np.float32(2) * x is a Tensor

    def mul(self, other): return elementwise.mul(self, other)
    def pow(self, other): return elementwise.pow(self, other)
    def neg(self): return elementwise.neg(self)
    def logical_and(self, other): return elementwise.logical_and(self, other)
    def logical_or(self, other): return elementwise.logical_or(self, other)
    def logical_xor(self, other): return elementwise.logical_xor(self, other)
    def logical_not(self): return elementwise.logical_not(self)
    def bitwise_and(self, other): return elementwise.bitwise_and(self, other)
    def bitwise_or(self, other): return elementwise.bitwise_or(self, other)
    def bitwise_xor(self, other): return elementwise.bitwise_xor(self, other)
    def bitwise_not(self): return elementwise.bitwise_not(self)
    def exp(self): return elementwise.exp(self)
    def log(self): return elementwise.log(self)
    def sqrt(self): return elementwise.sqrt(self)
    def abs(self): return elementwise.abs(self)
    def relu(self): return elementwise.relu(self)
    def tanh(self): return elementwise.tanh(self)
    def sigmoid(self): return elementwise.sigmoid(self)
    def maximum(self, other): return elementwise.maximum(self, other)
    def minimum(self, other): return elementwise.minimum(self, other)
    def clamp(self, min=None, max=None): return elementwise.clamp(self, min, max)
    clip = clamp
    def eq(self, other): return elementwise.eq(self, other)
    def ne(self, other): return elementwise.ne(self, other)
    def lt(self, other): return elementwise.lt(self, other)
    def le(self, other): return elementwise.le(self, other)
    def gt(self, other): return elementwise.gt(self, other)
    def ge(self, other): return elementwise.ge(self, other)

    # ---- reductions (sum, mean, max, ...: ops/reduce.py's, as methods too) ----
    def softmax(self, dim, dtype=None): return loss.softmax(self, dim, dtype)
    def log_softmax(self, dim, dtype=None): return loss.log_softmax(self, dim, dtype)

    # ---- movement (reshape, view, permute, ...: tensor_methods of ops/movement.py, ops/indexing.py) ----
    @property
    def T(self): return movement.permute(self, tuple(reversed(range(self.ndim))))
    @property
    def mT(self): return movement.transpose(self, -2, -1)
    def __getitem__(self, index): return indexing.getitem(self, index)
    def __setitem__(self, index, value): indexing.setitem(self, index, value)
    def matmul(self, other): return matmul.matmul(self, other)


def tensor_method(fn):
    """Also make the op `fn(x, ...)` the Tensor method `x.fn(...)` (for ops defined in webgrad.ops,
    beside their gradients, rather than listed here)."""
    setattr(Tensor, fn.__name__, fn)
    return fn


class Size(tuple):
    """torch.Size: a tuple that prints as one."""

    def numel(self):
        return math.prod(self)

    def __repr__(self):
        return f"webgrad.Size({list(self)})"


def _construct(*args):
    """(storage, shape, dtype, device, strides, offset) for torch.Tensor(data) (float32 values),
    torch.Tensor(*sizes) or torch.Tensor(size) (zeros; torch leaves them uninitialised), from Tensor's
    arguments as given (None where not)."""
    from .ops.creation import tensor, zeros
    device = args[3] if isinstance(args[3], str) or hasattr(args[3], "type") else None
    given = [a for a in args if a is not None and a is not device]
    if len(given) == 1 and not isinstance(given[0], (int, float)):   # data, or a Size
        if not isinstance(given[0], Size):
            t = tensor(given[0], dtype=dtypes.float32, device=device)
            return t._storage, t.shape, t.dtype, t.device, t._strides, t._offset
        given = list(given[0])
    if not all(isinstance(s, int) and not isinstance(s, bool) for s in given):
        raise TypeError(f"Tensor(): expected data (a sequence) or sizes (ints), got {tuple(given)}")
    t = zeros(given or [0], device=device)
    return t._storage, t.shape, t.dtype, t.device, t._strides, t._offset


# contiguous_strides, worked out once per shape (of the last 4096): every new tensor asks for it
_contiguous = functools.lru_cache(maxsize=4096)(contiguous_strides)


def _wrap_dim(dim, ndim):
    wrapped = dim + max(ndim, 1) if dim < 0 else dim   # a 0-d tensor takes dim 0 or -1, as in torch
    if not 0 <= wrapped < max(ndim, 1):
        raise IndexError(f"dimension out of range (expected to be in range of [{-max(ndim, 1)}, "
                         f"{max(ndim, 1) - 1}], but got {dim})")
    return wrapped


def _nest(flat, shape):
    if not shape:
        return flat[0]
    if len(shape) == 1:
        return flat
    step = math.prod(shape[1:])
    return [_nest(flat[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]


from .ops import elementwise, indexing, inplace, loss, matmul, movement, reduce  # noqa: E402,F401  (the ops build on Tensor)
from .ops import arith, layout, products, selection  # noqa: E402,F401  (add/sub/div, mm, ...: their methods)
from .ops.creation import ones_like  # noqa: E402,F401
