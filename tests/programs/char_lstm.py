"""A character-level LSTM language model the usual way: a Dataset of (input, target) windows, a
DataLoader, embedding + LSTM + linear head, Adam, gradient clipping, and an evaluation loop."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

TEXT = "the quick brown fox jumps over the lazy dog. " * 6
SEQ = 12


class CharDataset(Dataset):
    def __init__(self, text, seq_len):
        chars = sorted(set(text))
        self.stoi = {c: i for i, c in enumerate(chars)}
        self.itos = {i: c for c, i in self.stoi.items()}
        self.data = [self.stoi[c] for c in text]
        self.seq_len = seq_len

    def __len__(self):
        return len(self.data) - self.seq_len

    def __getitem__(self, i):
        chunk = self.data[i:i + self.seq_len + 1]
        return torch.tensor(chunk[:-1], dtype=torch.long), torch.tensor(chunk[1:], dtype=torch.long)


class CharLSTM(nn.Module):
    def __init__(self, vocab, embed=16, hidden=32):
        super().__init__()
        self.embed = nn.Embedding(vocab, embed)
        self.lstm = nn.LSTM(embed, hidden, num_layers=2, batch_first=True)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, x, state=None):
        out, state = self.lstm(self.embed(x), state)
        return self.head(out), state


def make_data(rng):
    return {}


def build():
    return CharLSTM(len(set(TEXT)))


def run(model, data):
    dataset = CharDataset(TEXT, SEQ)
    train_set = torch.utils.data.Subset(dataset, range(0, 200))
    val_set = torch.utils.data.Subset(dataset, range(200, 250))
    loader = DataLoader(train_set, batch_size=32, shuffle=False, drop_last=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    criterion = nn.CrossEntropyLoss()
    losses = []
    for _epoch in range(2):
        model.train()
        for x, y in loader:
            logits, _ = model(x)
            loss = criterion(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), max_norm=5.0)
            optimizer.step()
            losses.append(loss.item())
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for x, y in DataLoader(val_set, batch_size=25):
            logits, _ = model(x)
            total += nn.functional.cross_entropy(logits.transpose(1, 2), y, reduction="sum").item()
            count += y.numel()
    return {"losses": losses, "val_loss": total / count, "batches": len(loader),
            "head_bias": model.head.bias.tolist()}
