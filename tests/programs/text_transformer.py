"""A Transformer encoder text classifier as a tutorial writes one: nn.Embedding with a padding
index, sinusoidal positional encoding built from torch.arange and sin/cos into a registered
buffer, nn.TransformerEncoder (batch_first) with a padding mask and a causal mask, mean pooling
over the real tokens, AdamW under a warm-up LambdaLR, and predictions with torch.no_grad."""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, PAD, MAX_LEN = 20, 0, 12


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.0, max_len=64):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(1, max_len, d_model)
        pe[0, :, 0::2] = torch.sin(position * div_term)
        pe[0, :, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):
        return self.dropout(x + self.pe[:, :x.size(1)])


class TextClassifier(nn.Module):
    def __init__(self, d_model=16, nhead=2, num_layers=2, num_classes=3):
        super().__init__()
        self.d_model = d_model
        self.embedding = nn.Embedding(VOCAB, d_model, padding_idx=PAD)
        self.pos_encoder = PositionalEncoding(d_model)
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=32, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=num_layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, num_classes)

    def forward(self, tokens, causal=False):
        padding_mask = tokens == PAD
        x = self.pos_encoder(self.embedding(tokens) * math.sqrt(self.d_model))
        mask = None
        if causal:
            n = tokens.size(1)
            mask = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
        x = self.encoder(x, mask=mask, src_key_padding_mask=padding_mask, is_causal=causal)
        keep = (~padding_mask).unsqueeze(-1).float()
        pooled = (x * keep).sum(dim=1) / keep.sum(dim=1).clamp(min=1.0)
        return self.head(self.norm(pooled))


def make_data(rng):
    lengths = rng.integers(3, MAX_LEN + 1, 24)
    tokens = rng.integers(1, VOCAB, (24, MAX_LEN))
    tokens[np.arange(MAX_LEN)[None, :] >= lengths[:, None]] = PAD
    return {"tokens": tokens, "labels": rng.integers(0, 3, 24)}


def build():
    return TextClassifier()


def run(model, data):
    tokens, labels = torch.from_numpy(data["tokens"]).long(), torch.from_numpy(data["labels"]).long()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    warmup = 3
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / warmup))
    losses, lrs = [], []
    model.train()
    for step in range(6):
        batch = slice((step % 3) * 8, (step % 3) * 8 + 8)
        logits = model(tokens[batch], causal=step % 2 == 1)
        loss = F.cross_entropy(logits, labels[batch])
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
        lrs.append(optimizer.param_groups[0]["lr"])
    model.eval()
    with torch.no_grad():
        logits = model(tokens)
        predictions = logits.argmax(dim=-1)
        probs = logits.softmax(dim=-1)
    return {"losses": losses, "lrs": lrs, "probs": probs.tolist(),
            "agree": int((predictions == probs.max(dim=-1).indices).all()),
            "embedding_pad_row": model.embedding.weight[PAD].tolist(), "pe": model.pos_encoder.pe[0, :3].tolist()}
