"""A GPT: a decoder-only transformer with learned positions and pre-norm blocks.

The layout and the parameter names are nanoGPT's (transformer.wte / wpe / h.N.ln_1 / attn.c_attn /
attn.c_proj / ln_2 / mlp.c_fc / mlp.c_proj / ln_f, lm_head), so a state_dict moves between this
model and a PyTorch model of that layout. The token embedding and the output head share one
weight (both names stay in the state_dict, as in PyTorch).
"""
import math
from dataclasses import dataclass

from ..autograd import no_grad
from ..ops.creation import arange
from ..ops.movement import cat
from ..optim.adam import AdamW
from . import functional as F
from . import init
from .containers import ModuleDict, ModuleList
from .conv import Dropout
from .layers import GELU, Linear
from .module import Module
from .normalization import LayerNorm
from .sparse import Embedding


@dataclass
class GPTConfig:
    """nanoGPT's config, with its defaults (GPT-2 small's shape)."""
    block_size: int = 1024   # the longest context
    vocab_size: int = 50304
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    dropout: float = 0.0
    bias: bool = True        # biases in the Linears and LayerNorms

    def __post_init__(self):
        for name in ("block_size", "vocab_size", "n_layer", "n_head", "n_embd"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"GPTConfig: {name} must be a positive int, got {value!r}")
        if self.n_embd % self.n_head:
            raise ValueError(f"GPTConfig: n_embd ({self.n_embd}) must be a multiple of n_head ({self.n_head})")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"GPTConfig: dropout must be in [0, 1), got {self.dropout!r}")


class CausalSelfAttention(Module):
    """Multi-head self-attention where position t sees positions <= t: one Linear makes q, k and v,
    the fused scaled_dot_product_attention kernel mixes them, one Linear projects back."""

    def __init__(self, config, device=None):
        super().__init__()
        self.n_head, self.n_embd, self.dropout = config.n_head, config.n_embd, config.dropout
        self.c_attn = Linear(config.n_embd, 3 * config.n_embd, bias=config.bias, device=device)
        self.c_proj = Linear(config.n_embd, config.n_embd, bias=config.bias, device=device)
        self.resid_dropout = Dropout(config.dropout)

    def forward(self, x):
        batch, time, channels = x.shape
        heads = [t.view(batch, time, self.n_head, channels // self.n_head).transpose(1, 2)
                 for t in self.c_attn(x).split(self.n_embd, dim=2)]
        y = F.scaled_dot_product_attention(*heads, dropout_p=self.dropout if self.training else 0.0, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(batch, time, channels)
        return self.resid_dropout(self.c_proj(y))


class MLP(Module):
    def __init__(self, config, device=None):
        super().__init__()
        self.c_fc = Linear(config.n_embd, 4 * config.n_embd, bias=config.bias, device=device)
        self.gelu = GELU()
        self.c_proj = Linear(4 * config.n_embd, config.n_embd, bias=config.bias, device=device)
        self.dropout = Dropout(config.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(Module):
    """Pre-norm: x + attn(ln_1(x)), then x + mlp(ln_2(x))."""

    def __init__(self, config, device=None):
        super().__init__()
        self.ln_1 = LayerNorm(config.n_embd, bias=config.bias, device=device)
        self.attn = CausalSelfAttention(config, device)
        self.ln_2 = LayerNorm(config.n_embd, bias=config.bias, device=device)
        self.mlp = MLP(config, device)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(Module):
    """model(idx (B, T) int32 token ids, targets=None) -> (logits (B, T, vocab_size), loss or None);
    the loss is the mean cross entropy of logits against targets (ids, -1 ignored)."""

    def __init__(self, config, device=None):
        super().__init__()
        self.config = config
        self.transformer = ModuleDict(dict(
            wte=Embedding(config.vocab_size, config.n_embd, device=device),
            wpe=Embedding(config.block_size, config.n_embd, device=device),
            drop=Dropout(config.dropout),
            h=ModuleList([Block(config, device) for _ in range(config.n_layer)]),
            ln_f=LayerNorm(config.n_embd, bias=config.bias, device=device)))
        self.lm_head = Linear(config.n_embd, config.vocab_size, bias=False, device=device)
        self.transformer.wte.weight = self.lm_head.weight   # tied: one Parameter under both names
        self.apply(self._init_weights)
        # GPT-2's scaling of the residual projections: the residual stream adds 2 per layer
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    @staticmethod
    def _init_weights(module):
        if isinstance(module, (Linear, Embedding)):
            init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, Linear) and module.bias is not None:
            init.zeros_(module.bias)

    def get_num_params(self, non_embedding=True):
        """Parameters counted once each; without the position table unless non_embedding=False
        (the token table is the output head's weight too, so it stays counted)."""
        total = sum(p.numel() for p in self.parameters())
        return total - self.transformer.wpe.weight.numel() if non_embedding else total

    def hidden(self, idx):
        """The final LayerNorm's output (B, T, n_embd) for token ids idx (B, T)."""
        time = idx.shape[1]
        if time > self.config.block_size:
            raise ValueError(f"GPT: cannot take a sequence of length {time}, block_size is only "
                             f"{self.config.block_size}")
        pos = arange(time, device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        return self.transformer.ln_f(x)

    def forward(self, idx, targets=None):
        logits = self.lm_head(self.hidden(idx))
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-1)
        return logits, loss

    def configure_optimizers(self, weight_decay, learning_rate, betas=(0.9, 0.95)):
        """AdamW with weight decay on the matrices (Linear weights, embeddings) only, not on the
        biases and LayerNorm weights."""
        params = list(self.parameters())
        groups = [{"params": [p for p in params if p.ndim >= 2], "weight_decay": weight_decay},
                  {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0}]
        return AdamW([g for g in groups if g["params"]], lr=learning_rate, betas=betas)

    @no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None, generator=None):
        """idx (B, T) followed by max_new_tokens sampled tokens, (B, T + max_new_tokens). Every step
        runs on idx's device (the model sees the last block_size tokens; the next token is drawn by
        multinomial from softmax(logits / temperature), restricted to the top_k logits when given);
        nothing is read back. Put the model in eval() first to sample without dropout."""
        if temperature <= 0:
            raise ValueError(f"generate: temperature must be positive, got {temperature!r}")
        if top_k is not None and top_k <= 0:
            raise ValueError(f"generate: top_k must be positive or None, got {top_k!r}")
        for _ in range(max_new_tokens):
            context = idx if idx.shape[1] <= self.config.block_size else idx[:, -self.config.block_size:]
            # the head runs on the last position only: the others' logits are not needed
            logits = self.lm_head(self.hidden(context)[:, -1, :]) / temperature
            if top_k is not None:
                kth = logits.topk(min(top_k, logits.shape[-1]), dim=-1)[0][:, -1:]
                logits = logits.masked_fill(logits < kth, -math.inf)
            nxt = F.softmax(logits, dim=-1).multinomial(1, generator=generator)
            idx = cat((idx, nxt.to(idx.dtype)), dim=1)
        return idx
