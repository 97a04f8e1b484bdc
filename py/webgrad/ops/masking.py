"""Boolean-mask indexing: x[mask] read (and masked_select) and x[mask] = value written.

The picked elements' positions are read back to the host (how many there are is the result's
size, as in PyTorch). Reading gathers them; writing a value that has no size for them is a select
(no positions needed); writing one value per picked element spreads the values to their places by
a gather at each place's rank among the picked (a running sum of the mask), so neither direction
nor its gradient needs a scatter over every place.
"""
from .. import dtypes
from ..autograd import Function
from .elementwise import WHERE, where
from .inplace import assign, modify
from .._tensor import Tensor, tensor_method


def true_positions(mask):
    """The row-major positions of mask's True elements, read back to the host."""
    return [i for i, v in enumerate(mask.reshape(-1)._host_bytes()) if v]


def _flat(mask):
    """The mask flattened (bool), and the int32 positions of its True elements."""
    from .creation import tensor
    picked = tensor(true_positions(mask), dtype=dtypes.int32, device=mask.device)
    return mask.reshape(-1).to(dtypes.bool_), picked


def read(y, d, mask):
    """y[..., mask, ...] for a mask over y's dims d, d+1, ...: those dims become one, of the picked."""
    flat, picked = _flat(mask)
    pre, post = y.shape[:d], y.shape[d + mask.ndim:]
    return _Compact.apply(y.reshape(pre + (flat.numel(),) + post), d, flat, picked, True)


def write(y, d, mask, value):
    """y[..., mask, ...] = value (a number, or a tensor of y's dtype and device)."""
    pre, post = y.shape[:d], y.shape[d + mask.ndim:]
    spread = mask.to(dtypes.bool_).reshape((1,) * d + tuple(mask.shape) + (1,) * len(post))
    if not isinstance(value, Tensor) or value.ndim <= len(post) or value.shape[-len(post) - 1] == 1:
        if isinstance(value, Tensor):   # the same value for every picked element: a select
            value = value.expand(pre + (1,) + post).reshape(pre + (1,) * mask.ndim + post)
        modify(y, WHERE, spread, value, y, assign=True)
        return
    flat, picked = _flat(mask)
    shape = pre + (picked.numel(),) + post
    try:
        value = value.expand(shape)
    except RuntimeError:
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(value.shape)} cannot be broadcast to "
                           f"indexing result of shape {list(shape)}") from None
    placed = _Compact.apply(value, d, flat, picked, False).reshape(y.shape)
    assign(y, where(spread, placed, y))


@tensor_method
def masked_select(x, mask):
    """x's elements where mask (broadcast with x) is True, as a 1-D tensor."""
    if not isinstance(mask, Tensor) or mask.dtype is not dtypes.bool_:
        kind = mask.dtype.name if isinstance(mask, Tensor) else type(mask).__name__
        raise RuntimeError(f"masked_select: expected BoolTensor for mask, got {kind}")
    from .movement import broadcast_shapes
    shape = broadcast_shapes(x.shape, mask.shape)
    return read(x.expand(shape), 0, mask.expand(shape))


class _Compact(Function):
    """Between a dim of M places and the n of them a flat bool mask picks (at `picked`): `pick` gathers
    those n, `place` spreads n values back to their places (zeros elsewhere). Each is the other's
    gradient."""

    def forward(self, x, dim, mask, picked, pick):
        self.plan = (dim, mask, picked, not pick)
        return _compact(x, dim, mask, picked, pick)

    def backward(self, grad):
        return _compact(grad, *self.plan), None, None


def _compact(x, dim, mask, picked, pick):
    if pick:
        return x.index_select(dim, picked)
    from .creation import zeros
    from .scan import cumsum
    if not x.shape[dim]:   # nothing picked
        return zeros(x.shape[:dim] + (mask.numel(),) + x.shape[dim + 1:], dtype=x.dtype, device=x.device)
    rank = (cumsum(mask, 0) - 1).clamp(min=0)   # each place's position among the picked
    spread = mask.reshape((1,) * dim + (-1,) + (1,) * (x.ndim - dim - 1))
    return where(spread, x.index_select(dim, rank), 0).to(x.dtype)
