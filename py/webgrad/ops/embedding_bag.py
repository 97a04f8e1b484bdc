"""torch.nn.functional.embedding_bag: the sum, mean or max of the weight's rows picked by each bag
of indices, composed of ops that run on the indices' device with gradients: the lookup
(ops.embedding), a (bags, positions) membership mask built from the offsets on the device (no read
back to the host), then a product with it (sum, mean) or a masked max over the positions."""
import math

from .. import dtypes
from .._tensor import Tensor
from .creation import arange, full
from .elementwise import where
from .embedding import embedding
from .movement import cat

MODES = ("sum", "mean", "max")


def _bag_bounds(input, offsets, include_last_offset):
    """The flat indices, and where each bag starts and ends among them (int32 tensors)."""
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated is a mini-batch of "
                             f"fixed length sequences. However, found offsets of type {type(offsets)}")
        bags, length = input.shape
        starts = arange(0, bags * length, length, dtype=dtypes.int32, device=input.device)
        return input.reshape(-1), starts, starts + length
    if input.ndim != 1:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input.ndim}")
    if offsets is None or not isinstance(offsets, Tensor) or offsets.ndim != 1:
        raise ValueError("offsets has to be a 1D Tensor" + (" but got None" if offsets is None else ""))
    if offsets.dtype is not dtypes.int32:
        raise RuntimeError(f"embedding_bag: expected int32 offsets (Long/Int in torch), got {offsets.dtype.name}")
    if offsets.device != input.device:
        raise RuntimeError(f"embedding_bag: expected the offsets on the indices' device {input.device}, "
                           f"got {offsets.device}")
    if include_last_offset:   # the last offset ends the last bag; it starts none
        return input, offsets[:-1], offsets[1:]
    end = full((1,), input.shape[0], dtype=dtypes.int32, device=input.device)
    return input, offsets, cat([offsets[1:], end])


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False, mode="mean",
                  sparse=False, per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """Bags are the rows of a 2-D input, or the runs of a 1-D input that start at each offset. An
    empty bag gives zeros; indices equal to padding_idx are left out of their bag (and of its mean's
    count). per_sample_weights (the input's shape, mode 'sum' only) scales each picked row."""
    if mode not in MODES:
        raise ValueError("mode has to be one of sum, mean or max")
    if max_norm is not None:
        raise NotImplementedError("embedding_bag: max_norm (renormalising the picked rows in place) is not supported")
    if scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding_bag: scale_grad_by_freq and sparse gradients are not supported")
    if not isinstance(input, Tensor) or not isinstance(weight, Tensor):
        raise TypeError("embedding_bag: input and weight must be Tensors")
    if weight.ndim != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension {weight.ndim}")
    if input.dtype is not dtypes.int32:
        raise RuntimeError(f"embedding_bag: expected int32 indices (Long/Int in torch), got {input.dtype.name}")
    if per_sample_weights is not None:
        if mode != "sum":
            raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                                      f"supported for mode='sum' (got mode='{mode}'). Please open a feature request "
                                      "on GitHub.")
        if tuple(per_sample_weights.shape) != tuple(input.shape):
            raise ValueError(f"embedding_bag: If per_sample_weights ({per_sample_weights.shape}) is not None, "
                             f"then it must have the same shape as the input ({input.shape})")
    rows = weight.shape[0]
    if padding_idx is not None:
        if not -rows <= padding_idx < rows:
            raise RuntimeError(f"padding_idx must be within the number of embeddings, -{rows} through {rows - 1}, "
                               f"but got {padding_idx}")
        padding_idx %= rows
    indices, starts, ends = _bag_bounds(input, offsets, include_last_offset)
    positions = arange(indices.shape[0], dtype=dtypes.int32, device=input.device)
    member = (positions >= starts.unsqueeze(1)) & (positions < ends.unsqueeze(1))   # (bags, positions)
    if padding_idx is not None:
        member = member & (indices != padding_idx)
    picked = embedding(indices, weight)
    if mode == "max" and indices.shape[0]:   # (bags of no positions at all sum to zeros below)
        best = where(member.unsqueeze(2), picked, -math.inf).amax(1)
        return where(member.any(1, keepdim=True), best, 0.0)
    share = member.to(weight.dtype)
    if per_sample_weights is not None:
        share = share * per_sample_weights.reshape(-1)
    sums = share @ picked
    return sums if mode == "sum" else sums / share.sum(1, keepdim=True).clamp(min=1)
