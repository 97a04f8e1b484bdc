"""nn.MultiheadAttention, with torch.nn's arguments, parameter names (in_proj_weight, in_proj_bias,
out_proj.weight, out_proj.bias; q/k/v_proj_weight where kdim or vdim differ; bias_k, bias_v),
masks and returns. Linear projections around F.scaled_dot_product_attention (the fused kernel);
when the attention weights are wanted (need_weights) they are computed the composed way."""
import math
import warnings

from ..ops.attention import attention_weights
from ..ops.creation import empty, zeros
from ..ops.elementwise import where
from ..ops.movement import cat
from . import functional as F
from . import init
from .layers import Linear
from .module import Module, Parameter


class NonDynamicallyQuantizableLinear(Linear):
    """torch's name for MultiheadAttention's out_proj (a Linear)."""


def _additive(mask, name, dtype):
    """A mask as torch's MultiheadAttention reads it, made additive: bool True (not attended) -> -inf."""
    if mask is None:
        return None
    if mask.dtype.kind == "b":
        return where(mask, -math.inf, 0.0).to(dtype)
    if not mask.dtype.is_floating_point:
        raise AssertionError(f"only bool and floating types of {name} are supported")
    return mask


def _one_more_key(*masks):
    """The (additive) masks for one more key, attended (bias_k and bias_v's, or add_zero_attn's)."""
    return [None if m is None else F.pad(m, (0, 1)) for m in masks]


class MultiheadAttention(Module):
    """Attention of num_heads heads of embed_dim // num_heads over (L, N, E) inputs ((N, L, E) with
    batch_first, (L, E) unbatched); keys of kdim and values of vdim features (default embed_dim)."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, device=None, dtype=None):
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} and "
                             f"num_heads={num_heads} instead")
        super().__init__()
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads, self.dropout, self.batch_first = num_heads, dropout, batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")

        def new(*shape):
            return Parameter(empty(shape, device=device, dtype=dtype))
        separate = not self._qkv_same_embed_dim
        self.register_parameter("in_proj_weight", None if separate else new(3 * embed_dim, embed_dim))
        for name, dim in (("q_proj_weight", embed_dim), ("k_proj_weight", self.kdim), ("v_proj_weight", self.vdim)):
            self.register_parameter(name, new(embed_dim, dim) if separate else None)
        self.register_parameter("in_proj_bias", new(3 * embed_dim) if bias else None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, device=device, dtype=dtype)
        self.register_parameter("bias_k", new(1, 1, embed_dim) if add_bias_kv else None)
        self.register_parameter("bias_v", new(1, 1, embed_dim) if add_bias_kv else None)
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self):
        for weight in (self.in_proj_weight, self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
            if weight is not None:
                init.xavier_uniform_(weight)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)
        for extra in (self.bias_k, self.bias_v):
            if extra is not None:
                init.xavier_normal_(extra)

    def _project(self, query, key, value, same):
        """q, k, v: the inputs (N, *, features) through the input projections; one product for all
        three where they are the same tensor (self-attention)."""
        e = self.embed_dim
        bias = [None] * 3 if self.in_proj_bias is None else [self.in_proj_bias[i * e:(i + 1) * e] for i in range(3)]
        if self._qkv_same_embed_dim and same:
            qkv = F.linear(query, self.in_proj_weight, self.in_proj_bias)
            return [qkv[..., i * e:(i + 1) * e] for i in range(3)]
        weights = ([self.in_proj_weight[i * e:(i + 1) * e] for i in range(3)] if self._qkv_same_embed_dim else
                   [self.q_proj_weight, self.k_proj_weight, self.v_proj_weight])
        return [F.linear(x, w, b) for x, w, b in zip((query, key, value), weights, bias)]

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        """(attention output like query, attention weights (N, L, S) averaged over heads, or
        (N, num_heads, L, S), or None without need_weights). key_padding_mask (N, S): True or -inf
        drops a key; attn_mask (L, S) or (N * num_heads, L, S): True or -inf drops a pair (a float
        is added); is_causal: attn_mask is the causal mask (a hint, as in torch)."""
        batched, same = query.ndim == 3, query is key and key is value
        if is_causal and attn_mask is None:
            raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer "
                               "module method `generate_square_subsequent_mask` to create this mask.")
        if key_padding_mask is not None and attn_mask is not None and \
                (key_padding_mask.dtype.kind == "b") != (attn_mask.dtype.kind == "b"):
            warnings.warn("Support for mismatched key_padding_mask and attn_mask is deprecated. Use same type for "
                          "both instead.", stacklevel=2)
        key_padding_mask = _additive(key_padding_mask, "key_padding_mask", query.dtype)
        attn_mask = _additive(attn_mask, "attn_mask", query.dtype)
        if is_causal and key_padding_mask is None and not need_weights:
            attn_mask = None   # the kernel's own causal masking replaces the mask
        else:
            is_causal = False
        if not batched:
            query, key, value = (x.unsqueeze(0) for x in (query, key, value))
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif not self.batch_first:
            query, key, value = (x.transpose(0, 1) for x in (query, key, value))
        batch, length, heads = query.shape[0], query.shape[1], self.num_heads
        q, k, v = self._project(query, key, value, same)
        if self.bias_k is not None:
            k, v = (cat([x, b.expand(batch, 1, self.embed_dim)], 1) for x, b in ((k, self.bias_k), (v, self.bias_v)))
            attn_mask, key_padding_mask = _one_more_key(attn_mask, key_padding_mask)
        q, k, v = (x.reshape(batch, x.shape[1], heads, self.head_dim).transpose(1, 2) for x in (q, k, v))
        if self.add_zero_attn:
            k, v = (cat([x, zeros((batch, heads, 1, self.head_dim), dtype=x.dtype, device=x.device)], 2)
                    for x in (k, v))
            attn_mask, key_padding_mask = _one_more_key(attn_mask, key_padding_mask)
        mask = None
        if attn_mask is not None:
            mask = attn_mask if attn_mask.ndim == 2 else attn_mask.reshape(batch, heads, length, k.shape[2])
        if key_padding_mask is not None:
            padding = key_padding_mask.reshape(batch, 1, 1, k.shape[2])
            mask = padding if mask is None else mask + padding
        dropout_p = self.dropout if self.training else 0.0
        weights = None
        if need_weights:
            # (torch returns the weights after dropout, the ones that multiplied v)
            weights = F.dropout(attention_weights(q, k, mask, False, 1 / math.sqrt(self.head_dim)), dropout_p)
            out = weights @ v
        else:
            out = F.scaled_dot_product_attention(q, k, v, mask, dropout_p, is_causal)
        out = self.out_proj(out.transpose(1, 2).reshape(batch, length, self.embed_dim))
        if weights is not None and average_attn_weights:
            weights = weights.mean(1)
        if not batched:
            return out.squeeze(0), None if weights is None else weights.squeeze(0)
        return (out if self.batch_first else out.transpose(0, 1)), weights
