"""Notebook-style: a two-layer MLP written with raw tensors, gradients derived by hand next to
autograd's (indexing with ranges and label tensors, in-place updates of .data, retain_grad), then
plain gradient descent on .data."""
import torch
import torch.nn.functional as F

N_IN, N_HIDDEN, N_CLASSES, BATCH = 10, 24, 7, 32


def make_data(rng):
    return {"x": rng.standard_normal((BATCH, N_IN)).astype("float32"), "y": rng.integers(0, N_CLASSES, BATCH)}


def build():
    W1 = torch.randn((N_IN, N_HIDDEN)) * (5 / 3) / N_IN ** 0.5
    b1 = torch.randn(N_HIDDEN) * 0.1
    W2 = torch.randn((N_HIDDEN, N_CLASSES)) * 0.1
    b2 = torch.randn(N_CLASSES) * 0.1
    parameters = [W1, b1, W2, b2]
    for p in parameters:
        p.requires_grad = True
    return parameters


def run(parameters, data):
    W1, b1, W2, b2 = parameters
    Xb, Yb = torch.tensor(data["x"]), torch.tensor(data["y"])
    n = Xb.shape[0]
    hpre = Xb @ W1 + b1
    h = torch.tanh(hpre)
    logits = h @ W2 + b2
    logit_maxes = logits.max(1, keepdim=True).values
    norm_logits = logits - logit_maxes
    counts = norm_logits.exp()
    counts_sum = counts.sum(1, keepdims=True)
    probs = counts * counts_sum ** -1
    logprobs = probs.log()
    loss = -logprobs[range(n), Yb].mean()
    for t in (logits, h, hpre):
        t.retain_grad()
    loss.backward()

    # the same gradients by hand
    dlogits = F.softmax(logits, 1)
    dlogits[range(n), Yb] -= 1
    dlogits /= n
    dh = dlogits @ W2.T
    dW2 = h.T @ dlogits
    db2 = dlogits.sum(0)
    dhpre = (1.0 - h ** 2) * dh
    dW1 = Xb.T @ dhpre
    db1 = dhpre.sum(0)
    manual = {"dlogits": (dlogits - logits.grad).abs().max().item(),
              "dW1": (dW1 - W1.grad).abs().max().item(), "db1": (db1 - b1.grad).abs().max().item(),
              "dW2": (dW2 - W2.grad).abs().max().item(), "db2": (db2 - b2.grad).abs().max().item()}

    losses = []
    for step in range(5):
        logits = torch.tanh(Xb @ W1 + b1) @ W2 + b2
        loss = F.cross_entropy(logits, Yb)
        for p in parameters:
            p.grad = None
        loss.backward()
        lr = 0.5 if step < 3 else 0.05
        for p in parameters:
            p.data += -lr * p.grad
        losses.append(loss.item())
    with torch.no_grad():
        W2[:, 0] = 0.0          # zero one class's weights through a view
        b2.zero_()
    return {"manual_matches_autograd": max(manual.values()) < 1e-5, "losses": losses,
            "W1_row": W1[0].tolist(), "W2_col0_sum": W2[:, 0].sum().item(), "b2": b2.tolist()}
