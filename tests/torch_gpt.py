"""nanoGPT's model in PyTorch, as its users write it: the oracle tests/test_gpt.py checks webgrad's
GPT against, and the peer bench/gpt.py times it against (one copy for both)."""
import torch
import torch.nn as tnn
import torch.nn.functional as TF


class TorchAttention(tnn.Module):
    def __init__(self, c):
        super().__init__()
        self.n_head, self.n_embd, self.dropout = c.n_head, c.n_embd, c.dropout
        self.c_attn = tnn.Linear(c.n_embd, 3 * c.n_embd, bias=c.bias)
        self.c_proj = tnn.Linear(c.n_embd, c.n_embd, bias=c.bias)
        self.resid_dropout = tnn.Dropout(c.dropout)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
                   for t in self.c_attn(x).split(self.n_embd, dim=2))
        y = TF.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0, is_causal=True)
        return self.resid_dropout(self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C)))


class TorchMLP(tnn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_fc = tnn.Linear(c.n_embd, 4 * c.n_embd, bias=c.bias)
        self.gelu = tnn.GELU()
        self.c_proj = tnn.Linear(4 * c.n_embd, c.n_embd, bias=c.bias)
        self.dropout = tnn.Dropout(c.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class TorchBlock(tnn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln_1 = tnn.LayerNorm(c.n_embd, bias=c.bias)
        self.attn = TorchAttention(c)
        self.ln_2 = tnn.LayerNorm(c.n_embd, bias=c.bias)
        self.mlp = TorchMLP(c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class TorchGPT(tnn.Module):
    def __init__(self, c):
        super().__init__()
        self.config = c
        self.transformer = tnn.ModuleDict(dict(
            wte=tnn.Embedding(c.vocab_size, c.n_embd), wpe=tnn.Embedding(c.block_size, c.n_embd),
            drop=tnn.Dropout(c.dropout), h=tnn.ModuleList([TorchBlock(c) for _ in range(c.n_layer)]),
            ln_f=tnn.LayerNorm(c.n_embd, bias=c.bias)))
        self.lm_head = tnn.Linear(c.n_embd, c.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight

    def forward(self, idx, targets=None):
        pos = torch.arange(idx.size(1), device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        loss = None if targets is None else TF.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1),
                                                             ignore_index=-1)
        return logits, loss
