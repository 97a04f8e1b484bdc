"""In-place ops (add_, mul_, copy_, x[i] = v, ...): one mechanism, `modify`, writes an elementwise
kernel's result into a tensor's own storage, so the tensor stays the same object and every tensor
sharing the storage (its views, its base) sees the new values, on either device.

Autograd follows PyTorch's rules. A leaf that requires grad may be modified only under no_grad
(optimizers, init). Each write counts up the storage's version, and a node whose saved values were
overwritten raises at backward (autograd.check_saved). A modified tensor's grad_fn becomes the
write's node; when the tensor is a view, its base's history is rebased the way PyTorch's CopySlices
does it: the base's new values are its old ones with the view's region replaced by the write's.
"""
import math

from .. import dtypes
from ..dtypes import TYPE_NAMES
from ..autograd import Function, bump_version, is_grad_enabled, version
from ..backends.base import FILL
from .creation import full, rand, randn
from .elementwise import (ABS, ADD, BITWISE_AND, BITWISE_NOT, BITWISE_OR, BITWISE_XOR, CLAMP, EXP, IDENTITY, LOG,
                          LOGICAL_AND, LOGICAL_NOT, LOGICAL_OR, LOGICAL_XOR, MUL, NEG, POW, RELU, SIGMOID, SQRT, SUB,
                          TANH, Map, MapOp, _on_bools, _Plan, cast_op)
from .movement import _as_view, write_into
from .plans import Plans, plan_key
from .._tensor import Tensor, tensor_method

# a + b * c: add_/sub_ with alpha, addcmul_, addcdiv_, lerp_, and the affine step of uniform_/normal_
ADD_SCALED = MapOp("add_scaled", "a + b * c", lambda np, a, b, c: a + b * c,
                   (lambda g, a, b, c, o: g, lambda g, a, b, c, o: g * c, None))


def modify(x, op, *operands, assign=False):
    """x's elements become op(*operands): a MapOp over tensors (broadcast to x's shape) and numbers,
    its result written into x's storage by one kernel. Its dtype must cast to x's as PyTorch's
    in-place ops require (no float into int, nothing into bool), or with assign=True any way
    (copy_, x[i] = v). Returns x."""
    recording = _recording(x, operands)
    if recording:
        _check_leaf(x)
    # An operand in x's storage is read from a copy (which keeps the old values for the backward that
    # needs them: mul_, pow_, ...), but x's own elements outside a graph, where the backend's kernel
    # reads each before it writes it (Backend.map_reads_out). Without one the old values only lose
    # their gradient.
    overwrites, own = True, []
    for k, a in enumerate(operands):
        if isinstance(a, Tensor) and a._storage is x._storage:
            overwrites = False
            if not recording and (a._offset, a.shape, a._strides) == (x._offset, x.shape, x._strides) and \
                    x.backend.map_reads_out():
                own.append(k)
            else:
                operands = operands[:k] + (_unaliased(x, a),) + operands[k + 1:]
    key = plan_key([op, assign, tuple(own), x.shape, x.dtype, x.device, x._strides], operands)
    plan = _write_plans.get(key) or _write_plans.keep(key, _WritePlan(x, op, operands, assign))
    operands = plan.plan.converted(plan.plan.op, operands) if plan.plan.convert else operands
    if not recording:
        plan.write(x, operands)
        return x
    node = _Modify.apply(x, plan, overwrites, *operands)
    _rebase(x, node._ctx)
    return x


class _WritePlan:
    """modify's checks and kernels for one signature (x's and the operands' as plan_key gives them, the
    op, assign), worked out at its first call and kept for later ones: what follows from values (grad
    mode, requires_grad, storages shared with x, offsets, scalars) is looked at in each call."""
    __slots__ = ("plan", "cast")

    def __init__(self, x, op, operands, assign):
        _check_written(x)
        # (bool.add_(bool) is an or, as bool + bool)
        self.plan = plan = _Plan(_on_bools(op, operands), operands, x.shape)
        if plan.shape != x.shape:
            raise RuntimeError(f"output with shape {list(x.shape)} doesn't match the broadcast shape "
                               f"{list(plan.shape)}")
        if not assign and not _can_cast(plan.out_dtype, x.dtype):
            raise RuntimeError(f"result type {TYPE_NAMES[plan.out_dtype.name]} can't be cast to the desired output "
                               f"type {TYPE_NAMES[x.dtype.name]}")
        self.cast = None   # where the result's dtype is not x's, the _Plan of its cast into x (the first write's)

    def write(self, x, operands):
        """The op's result (operands as plan.converted gives them) into x's storage, and its version counted."""
        plan = self.plan
        if plan.out_dtype is x.dtype:
            plan.run(plan.op, operands, into=x)
        else:
            scratch = plan.run(plan.op, operands)
            self.cast = self.cast or _Plan(cast_op(x.dtype), (scratch,))
            self.cast.run(self.cast.op, (scratch,), into=x)
        bump_version(x._storage)


_write_plans = Plans()   # modify's plan_key -> _WritePlan


def assign(x, value):
    """x's elements become value's (a tensor broadcast to x's shape, any dtype, or a number)."""
    if isinstance(value, Tensor):
        return modify(x, IDENTITY, value, assign=True)
    if _recording(x, ()):   # (its node writes a tensor of the value)
        return modify(x, IDENTITY, full((), value, dtype=x.dtype, device=x.device), assign=True)
    # else one fill by the value, converted to x's dtype as wg.full converts it
    _check_written(x)
    value = bool(value) if x.dtype is dtypes.bool_ else float(value) if x.dtype.is_floating_point else int(value)
    x.backend.map(FILL, (value,), x.shape, x.dtype, x.dtype, out=x._view)
    bump_version(x._storage)
    return x


def _recording(x, operands):
    """Whether writing operands into x records a node."""
    return is_grad_enabled() and x.dtype.is_floating_point and (
        x.requires_grad or any(isinstance(a, Tensor) and a.requires_grad for a in operands))


def _check_leaf(x):
    if x._ctx is None and x.requires_grad:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    base = x._base
    if base is not None and base._ctx is None and base.requires_grad:
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")


def _check_written(x):
    if any(stride == 0 and size > 1 for size, stride in zip(x.shape, x._strides)):
        raise RuntimeError("unsupported operation: more than one element of the written-to tensor refers to a "
                           "single memory location. Please clone() the tensor before performing the operation.")


def _unaliased(x, a):
    """a, or a copy of it where it lies in x's storage. Like PyTorch, an operand partly overlapping x
    (both dense, neither one the other) is refused: which values it should give is ambiguous."""
    same = (a._offset, a.shape, a._strides) == (x._offset, x.shape, x._strides)
    if not same and a.is_contiguous() and x.is_contiguous() and a.numel() and x.numel() and \
            a._offset < x._offset + x.numel() and x._offset < a._offset + a.numel():
        raise RuntimeError("unsupported operation: some elements of the input tensor and the written-to tensor "
                           "refer to a single memory location. Please clone() the tensor before performing the "
                           "operation.")
    return a.clone()


def _can_cast(source, target):
    if source.is_floating_point:
        return target.is_floating_point
    return source is dtypes.bool_ or target is not dtypes.bool_


class _Modify(Map):
    """The recorded write: its gradients are op's (elementwise.Map's), and for x's old values zeros
    where none of them is read (else their copy among the operands passes theirs on)."""

    def forward(self, x, plan, overwrites, *operands):
        plan.write(x, operands)
        self.op, self.plan, self.args, self.overwrites = plan.plan.op, plan.plan, operands, overwrites
        self.out = Tensor(x._storage, x.shape, x.dtype, x.device, x._strides, x._offset)
        return self.out

    def backward(self, grad):
        if version(self.out._storage) != self.versions[id(self.out._storage)]:
            # x was written again since: the result, for the rules that use it (exp_, div_), anew
            args = [a._view if isinstance(a, Tensor) else a for a in self.args]
            shape, dtype = self.out.shape, self.plan.out_dtype
            self.out = Tensor(grad.backend.map(self.op, args, shape, self.plan.compute, dtype), shape, dtype,
                              grad.device)
        zeros = full(grad.shape, 0, dtype=grad.dtype, device=grad.device) if self.overwrites else None
        return (zeros,) + super().backward(grad)


def _rebase(x, node):
    """x's history after a write recorded as node: node itself, or, where x is a view, its base's
    history with the view's region from node (_CopySlices), x a view of that."""
    retained = getattr(x._ctx, "retained", None)
    if x._base is None:
        x._ctx, x.requires_grad = node, True
    else:
        base = x._base
        old = Tensor(base._storage, base.shape, base.dtype, base.device, base._strides, base._offset)
        old._ctx, old.requires_grad = base._ctx, base.requires_grad
        region = (x.shape, x._strides, x._offset)
        base._ctx, base.requires_grad = _CopySlices.apply(old, _Node(x, node), region)._ctx, True
        view_of_base(x)
    if retained is not None and retained() is x:
        x._ctx.retained = retained


def view_of_base(x):
    """x's history: a view of its base's current history."""
    base = x._base
    x._base_node = base._ctx
    if base.requires_grad:
        x._ctx, x.requires_grad = _ViewOf.apply(base, (x.shape, x._strides, x._offset))._ctx, True


def _Node(x, node):
    """A tensor standing for node's output (x's new values)."""
    t = Tensor(x._storage, x.shape, x.dtype, x.device, x._strides, x._offset)
    t._ctx, t.requires_grad = node, True
    return t


class _CopySlices(Function):
    """A base's new values: its old ones (input 0) with one region (shape, strides, offset in the
    storage) replaced by the values of input 1."""

    def forward(self, base, values, region):
        self.layout, self.region = (base.shape, base._strides, base._offset), region
        return Tensor(base._storage, base.shape, base.dtype, base.device, base._strides, base._offset)

    def backward(self, grad):
        whole = _laid_out(grad, self.layout, grad)
        part = _part(whole, self.layout, self.region)
        values = part.clone()
        whole.backend.map(FILL, (0,), part.shape, grad.dtype, grad.dtype, out=part._view)
        return whole, values


class _ViewOf(Function):
    """A view (region: shape, strides, offset in the storage) of a base, by its layout alone."""

    def forward(self, base, region):
        self.layout, self.region = (base.shape, base._strides, base._offset), region
        return _as_view(base, *region)

    def backward(self, grad):
        whole = _laid_out(grad, self.layout, None)
        write_into(_part(whole, self.layout, self.region), grad)
        return whole


def _laid_out(like, layout, values):
    """A new tensor of the base's shape and strides (in a storage of its own, from position 0)
    holding values (a tensor of that shape), or zeros."""
    shape, strides, _ = layout
    extent = 1 + sum((s - 1) * st for s, st in zip(shape, strides)) if all(shape) else 0
    if values is None:
        return Tensor(full((extent,), 0, dtype=like.dtype, device=like.device)._storage, shape, like.dtype,
                      like.device, strides, 0)
    out = Tensor(like.backend.empty(extent, like.dtype), shape, like.dtype, like.device, strides, 0)
    write_into(out, values)   # every element (gaps between them, if any, are never read)
    return out


def _part(whole, layout, region):
    """The region (given in the base's storage) of a tensor laid out like the base by _laid_out."""
    shape, strides, offset = region
    return Tensor(whole._storage, shape, whole.dtype, whole.device, strides, offset - layout[2])


# ---- the ops ----
@tensor_method
def add_(x, other, *, alpha=1):
    return modify(x, ADD, x, other) if alpha == 1 else modify(x, ADD_SCALED, x, other, alpha)


@tensor_method
def sub_(x, other, *, alpha=1):
    return modify(x, SUB, x, other) if alpha == 1 else modify(x, ADD_SCALED, x, other, -alpha)


@tensor_method
def mul_(x, other): return modify(x, MUL, x, other)
@tensor_method
def pow_(x, exponent): return modify(x, POW, x, exponent)
@tensor_method
def neg_(x): return modify(x, NEG, x)
@tensor_method
def exp_(x): return modify(x, EXP, x)
@tensor_method
def log_(x): return modify(x, LOG, x)
@tensor_method
def sqrt_(x): return modify(x, SQRT, x)
@tensor_method
def abs_(x): return modify(x, ABS, x)
@tensor_method
def relu_(x): return modify(x, RELU, x)
@tensor_method
def sigmoid_(x): return modify(x, SIGMOID, x)
@tensor_method
def tanh_(x): return modify(x, TANH, x)
@tensor_method
def logical_and_(x, other): return modify(x, LOGICAL_AND, x, other)
@tensor_method
def logical_or_(x, other): return modify(x, LOGICAL_OR, x, other)
@tensor_method
def logical_xor_(x, other): return modify(x, LOGICAL_XOR, x, other)
@tensor_method
def logical_not_(x): return modify(x, LOGICAL_NOT, x)
@tensor_method
def bitwise_and_(x, other): return modify(x, BITWISE_AND, x, other)
@tensor_method
def bitwise_or_(x, other): return modify(x, BITWISE_OR, x, other)
@tensor_method
def bitwise_xor_(x, other): return modify(x, BITWISE_XOR, x, other)
@tensor_method
def bitwise_not_(x): return modify(x, BITWISE_NOT, x)
@tensor_method
def addcmul_(x, tensor1, tensor2, *, value=1): return modify(x, ADD_SCALED, x, tensor1 * tensor2, value)
@tensor_method
def addcdiv_(x, tensor1, tensor2, *, value=1): return modify(x, ADD_SCALED, x, tensor1 / tensor2, value)


@tensor_method
def lerp_(x, end, weight):
    if isinstance(weight, Tensor):
        return modify(x, ADD, x, weight * (end - x))
    return modify(x, ADD_SCALED, x, end - x, weight)


@tensor_method
def clamp_(x, min=None, max=None):
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    lo, hi = (-math.inf, math.inf) if x.dtype.is_floating_point else (-2**31, 2**31 - 1)
    return modify(x, CLAMP, x, lo if min is None else min, hi if max is None else max)


clip_ = Tensor.clip_ = clamp_


@tensor_method
def copy_(x, src, non_blocking=False):
    return assign(x, src.to(x.device) if isinstance(src, Tensor) else src)


@tensor_method
def fill_(x, value):
    if isinstance(value, Tensor) and value.ndim:
        raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with {value.ndim} dimensions.")
    return assign(x, value)


@tensor_method
def zero_(x):
    return assign(x, 0)


@tensor_method
def masked_fill_(x, mask, value):
    from .rearrange import masked_fill
    return assign(x, masked_fill(x, mask, value))


@tensor_method
def uniform_(x, a=0.0, b=1.0, *, generator=None):
    """Values drawn uniformly from [a, b), as rand draws them (from generator, else the default one)."""
    if a > b:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found from={a} > to={b}")
    drawn = rand(x.shape, generator=generator, dtype=x.dtype, device=x.device)
    return modify(x, ADD_SCALED, a, drawn, b - a, assign=True)


@tensor_method
def normal_(x, mean=0.0, std=1.0, *, generator=None):
    """Values drawn from N(mean, std^2), as randn draws them (from generator, else the default one)."""
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    drawn = randn(x.shape, generator=generator, dtype=x.dtype, device=x.device)
    return modify(x, ADD_SCALED, mean, drawn, std, assign=True)


@tensor_method
def __iadd__(x, other): return add_(x, other)
@tensor_method
def __isub__(x, other): return sub_(x, other)
@tensor_method
def __imul__(x, other): return mul_(x, other)
@tensor_method
def __iand__(x, other): return bitwise_and_(x, other)
@tensor_method
def __ior__(x, other): return bitwise_or_(x, other)
@tensor_method
def __ixor__(x, other): return bitwise_xor_(x, other)
