"""Scaled dot-product attention (torch.nn.functional.scaled_dot_product_attention).

The fused op keeps no (L, S) matrix of scores: on the webgpu device one kernel forward and three
backward (shaders/attention.wgsl: rowsum(dO * O), then dK and dV over key blocks, then dQ over
query blocks), recomputing the scores from the rows' saved log-sum-exp. On a GPU, where the weights
fit a budget (kernels/attention.py's attention_keeps_weights), it keeps them instead (_KeptWeights):
batched products around an in-place softmax kernel and its gradient's, with the same semantics.
Dropout, a float mask that needs a gradient and heads larger than the device's kernel takes go
the composed way (attention_weights, then a product), as do attention weights that a caller
wants to see (nn.MultiheadAttention's need_weights).
"""
import functools
import math

from ..amp import autocast_op
from .. import dtypes
from ..autograd import Function
from .creation import arange
from .elementwise import where
from .loss import softmax
from .movement import broadcast_shapes
from .half import computes_in_float32
from .._tensor import Tensor

# Where the composed path masks a score: the lowest finite float32, so a row with every key masked
# has finite scores (its weights are then set to 0, as torch's) and no NaN reaches a gradient.
_MASKED_SCORE = -3.4028234663852886e38
# Whether attention keeps its weights (_KeptWeights) or runs the fused kernels (_Attention), on a backend
# that has both (webgpu): None lets it choose (attention_keeps_weights); True or False forces one way
# (the tests run both on one adapter, bench/attention.py compares them).
KEEP_WEIGHTS = None


def _strides_like(shape, like):
    """The strides of a fresh tensor of `shape` with its dims in the order of tensor `like`'s (largest
    stride outermost, broadcast dims outside, the last dim innermost), as torch's attention lays out
    its output: the GPT's (B, H, T, hd) views of (B, T, 3C) give a view of (B, T, H, hd)."""
    return _strides_in_order(tuple(shape), like._strides)


def _fresh_like(shape, like):
    """A fresh tensor of `shape` in tensor `like`'s layout (_strides_like)."""
    return Tensor(like.backend.empty(math.prod(shape), like.dtype), shape, like.dtype, like.device,
                  _strides_like(shape, like))


@functools.lru_cache(maxsize=256)   # (an eager call asks for four; a model's layouts repeat)
def _strides_in_order(shape, like_strides):
    def outer_first(d):
        return -math.inf if like_strides[d] == 0 else -like_strides[d]
    strides, step = [0] * len(shape), 1
    for d in reversed(sorted(range(len(shape) - 1), key=outer_first) + [len(shape) - 1]):
        strides[d] = step
        step *= shape[d]
    return tuple(strides)


class _Attention(Function):
    """out, dq, dk and dv each in its operand's layout where the backend takes layouts (else contiguous):
    then a transposed view's output and gradients are views, and the transposes back cost no copy."""

    def forward(self, q, k, v, mask, causal, scale):
        self.q, self.k, self.v, self.mask, self.causal, self.scale = q, k, v, mask, causal, scale
        out_shape = q.shape[:-1] + (v.shape[-1],)
        self.layouts = None
        if q.backend.attention_layouts:
            self.layouts = tuple(_strides_like(shape, like)
                                 for shape, like in ((out_shape, q), (q.shape, q), (k.shape, k), (v.shape, v)))
        self.saved = q.backend.attention(q._view, k._view, v._view, None if mask is None else mask._view, causal,
                                         scale, self.layouts)
        return Tensor(self.saved, out_shape, q.dtype, q.device, self._strides(0))

    def backward(self, grad):
        q, k, v, mask = self.q, self.k, self.v, self.mask
        dq, dkv = q.backend.attention_backward(grad._view, q._view, k._view, v._view, self.saved,
                                               None if mask is None else mask._view, self.causal, self.scale,
                                               self.layouts)
        return (Tensor(dq, q.shape, q.dtype, q.device, self._strides(1)),
                Tensor(dkv, k.shape, k.dtype, k.device, self._strides(2)),
                Tensor(dkv, v.shape, v.dtype, v.device, self._strides(3), k.numel()), None)

    def _strides(self, which):
        """out's (0), dq's, dk's or dv's (3) strides; None: contiguous."""
        return None if self.layouts is None else self.layouts[which]


class _KeptWeights(Function):
    """Attention through its weights P, kept for the backward: the batched products q k^T, turned into P
    in place (the backend's attention_softmax: scale, mask and softmax in one pass), out = P v; backward
    dv = P^T dout, and dout v^T turned in place into scale dS = scale P (dout v^T - rowsum(P dout v^T)),
    dq = scale dS k, dk = scale dS^T q. Rows with every key masked have P = 0, so out and dS are 0.
    Causal, the products leave out what is zero or never read: P and dS are 0 above their diagonals,
    which the weights entries neither read nor keep."""

    def forward(self, q, k, v, mask, causal, scale):
        self.q, self.k, self.v, self.causal, self.scale = q, k, v, causal, scale
        scores = self._product(q, k.mT, "out_tril")
        q.backend.attention_softmax(scores._view, None if mask is None else mask._view, causal, scale)
        self.weights = scores
        # out in torch's layout, as _Attention's
        out = _fresh_like(q.shape[:-1] + (v.shape[-1],), q) if q.backend.attention_layouts else None
        return self._product(scores, v, "a_tril", out)

    def backward(self, grad):
        weights = self.weights
        scores_grad = self._product(grad, self.v.mT, "out_tril")
        weights.backend.attention_softmax_backward(scores_grad._view, weights._view, self.causal, self.scale)
        dq, dk, dv = self._gradients()
        return (self._product(scores_grad, self.k, "a_tril", dq), self._product(scores_grad.mT, self.q, "a_triu", dk),
                self._product(weights.mT, grad, "a_triu", dv), None)

    def _gradients(self):
        """Where dq, dk and dv go: None each (dense), or tensors in q's, k's and v's layouts where the
        backend takes layouts; where q, k and v are disjoint views of one storage (the GPT's, split off
        one product's result), views of one fresh storage at their places, so that the gradient of
        that result is theirs as it stands (autograd_engine's _dense: no concatenation)."""
        q, k, v = self.q, self.k, self.v
        if not q.backend.attention_layouts:
            return None, None, None
        if _disjoint_views((q, k, v)):
            extent = max(t._offset for t in (q, k, v)) + sum((size - 1) * stride for size, stride in
                                                             zip(q.shape, q._strides)) + 1
            storage = q.backend.empty(extent, q.dtype)
            return tuple(Tensor(storage, t.shape, t.dtype, t.device, t._strides, t._offset) for t in (q, k, v))
        return tuple(_fresh_like(t.shape, t) for t in (q, k, v))

    def _product(self, a, b, triangle, out=None):
        """a @ b, operands of one batch shape, into out where given; triangle: what of it causal
        attention leaves out (the backend's matmul), where it is causal."""
        storage = a.backend.matmul(a._view, b._view, triangle=triangle if self.causal else None,
                                   out=None if out is None else out._view)
        return out if out is not None else Tensor(storage, a.shape[:-1] + (b.shape[-1],), a.dtype, a.device)


def _disjoint_views(tensors):
    """Whether tensors of one storage, shape and strides share no element: each is runs of `run`
    contiguous elements (its innermost dense dims) repeated at multiples of a `period` (its smallest
    other stride; the rest multiples of it, nesting without overlap), and their runs' places within a
    period (their offsets modulo it) do not meet. The GPT's q, k and v: runs of C in periods of 3C."""
    first = tensors[0]
    if any(t._storage is not first._storage or t.shape != first.shape or t._strides != first._strides
           for t in tensors) or first.numel() == 0:
        return False
    dims = sorted((stride, size) for size, stride in zip(first.shape, first._strides) if size > 1)
    if dims and dims[0][0] == 0:   # a broadcast dim: its elements repeat
        return False
    run = 1
    while dims and dims[0][0] == run:
        run *= dims.pop(0)[1]
    period = dims[0][0] if dims else math.inf
    reach = period
    for stride, size in dims:
        if stride % period or stride < reach:
            return False
        reach = stride * size
    places = sorted(t._offset % period for t in tensors)
    return places[-1] + run <= period and all(b - a >= run for a, b in zip(places, places[1:]))


def attention_weights(query, key, attn_mask=None, is_causal=False, scale=None):
    """softmax(query key^T * scale + mask) composed of tensor ops: the (..., L, S) weights themselves.
    attn_mask: bool (True attends) or float (added), broadcast to (..., L, S). A query with every
    key masked gets weights 0."""
    scale = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = (query @ key.mT) * scale
    allowed = None
    if attn_mask is not None:
        if attn_mask.dtype is dtypes.bool_:
            allowed = attn_mask
        else:
            scores = scores + attn_mask
            allowed = attn_mask > -math.inf
    if is_causal:
        rows, cols = scores.shape[-2:]
        causal = arange(rows, device=query.device).unsqueeze(1) >= arange(cols, device=query.device)
        allowed = causal if allowed is None else allowed & causal
    if allowed is None:
        return softmax(scores, -1)
    weights = softmax(where(allowed, scores, _MASKED_SCORE), -1)
    if attn_mask is None:   # causal alone: every query attends key 0
        return weights
    return where(allowed.any(-1, keepdim=True), weights, 0.0)


def _check(query, key, value, attn_mask):
    tensors = (query, key, value) + (() if attn_mask is None else (attn_mask,))
    if not all(isinstance(t, Tensor) for t in tensors):
        raise TypeError("scaled_dot_product_attention: query, key, value and attn_mask must be Tensors")
    if query.ndim < 2 or key.ndim < 2 or value.ndim < 2:
        raise RuntimeError("scaled_dot_product_attention: query, key and value need at least 2 dims (L, E)")
    if not query.dtype.is_floating_point or key.dtype is not query.dtype or value.dtype is not query.dtype:
        raise RuntimeError(f"Expected query, key, and value to have the same dtype, but got query.dtype: "
                           f"{query.dtype.name} key.dtype: {key.dtype.name} and value.dtype: {value.dtype.name} "
                           f"instead.")
    if any(t.device != query.device for t in tensors):
        raise RuntimeError(f"scaled_dot_product_attention: expected every tensor on {query.device}")
    if key.shape[-1] != query.shape[-1] or key.shape[-2] != value.shape[-2]:
        raise RuntimeError(f"scaled_dot_product_attention: query {tuple(query.shape)}, key {tuple(key.shape)} and "
                           f"value {tuple(value.shape)} need one head size E (query, key) and one length S (key, "
                           f"value)")
    if attn_mask is not None and attn_mask.dtype is not dtypes.bool_ and attn_mask.dtype is not query.dtype:
        raise RuntimeError(f"Expected attn_mask dtype to be bool or float or to match query dtype, but got "
                           f"attn_mask.dtype: {attn_mask.dtype.name} and  query.dtype: {query.dtype.name} instead.")


def _grouped(query, key, value, attn_mask):
    """enable_gqa: key and value heads (dim -3) shared by groups of query heads, as views: the query's
    heads split into (key heads, group), key and value expanded along the group."""
    heads, kv_heads = query.shape[-3], key.shape[-3]
    if value.shape[-3] != kv_heads or heads % kv_heads:
        raise RuntimeError("Number of heads in key and value must divide the number of heads in query")
    group = heads // kv_heads
    split = query.shape[:-3] + (kv_heads, group)
    query = query.reshape(split + query.shape[-2:])
    key, value = (t.unsqueeze(-3).expand(t.shape[:-2] + (group,) + t.shape[-2:]) for t in (key, value))
    if attn_mask is not None and attn_mask.ndim >= 3:
        attn_mask = attn_mask.expand(broadcast_shapes(attn_mask.shape, (heads, 1, 1)))
        attn_mask = attn_mask.reshape(attn_mask.shape[:-3] + (kv_heads, group) + attn_mask.shape[-2:])
    return query, key, value, attn_mask


@autocast_op
@computes_in_float32
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                 scale=None, enable_gqa=False):
    """softmax(query key^T * scale + attn_mask) value over (..., L, E) query, (..., S, E) key and
    (..., S, Ev) value, leading dims broadcast; scale defaults to 1 / sqrt(E). attn_mask: bool (True
    attends) or float (added), broadcast to (..., L, S); or is_causal: query l attends keys s <= l.
    dropout_p > 0 drops attention weights (whatever the mode, as torch)."""
    _check(query, key, value, attn_mask)
    if is_causal and attn_mask is not None:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True")
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {dropout_p}")
    scale = 1 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    out_shape = None
    if enable_gqa and query.ndim >= 3 and key.ndim >= 3 and query.shape[-3] != key.shape[-3]:
        out_shape = query.shape[:-1] + (value.shape[-1],)
        query, key, value, attn_mask = _grouped(query, key, value, attn_mask)
    batch = broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    if attn_mask is not None:
        batch = broadcast_shapes(batch, attn_mask.shape[:-2])
    query, key, value = (t if t.shape[:-2] == batch else t.expand(batch + t.shape[-2:]) for t in (query, key, value))
    largest = query.backend.attention_max_head
    fused = (dropout_p == 0.0 and not (attn_mask is not None and attn_mask.requires_grad) and
             (largest is None or max(query.shape[-1], value.shape[-1]) <= largest))
    if fused:
        mask = None if attn_mask is None else attn_mask.expand(batch + (query.shape[-2], key.shape[-2]))
        kept = (query.backend.attention_keeps_weights(math.prod(batch), query.shape[-2], key.shape[-2])
                if KEEP_WEIGHTS is None else KEEP_WEIGHTS and query.device == "webgpu")
        out = (_KeptWeights if kept else _Attention).apply(query, key, value, mask, bool(is_causal), scale)
    else:
        from ..nn.functional import dropout   # nn.functional imports this module
        weights = attention_weights(query, key, attn_mask, is_causal, scale)
        out = dropout(weights, dropout_p) @ value
    return out if out_shape is None else out.reshape(out_shape)
