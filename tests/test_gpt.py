"""nn.GPT against the same model written in PyTorch (nanoGPT's layout): state_dict names and
shapes, logits, loss and gradients with the same weights, checkpoints both ways, and generate()."""
import dataclasses
import math

import numpy as np
import pytest
import torch

import webgrad as wg
from torch_gpt import TorchGPT
from conftest import assert_close, integers, randn, rng, seed, tag, to_numpy


# ---- helpers ----
def tiny_config(**overrides):
    """A small config with a random vocabulary and bias, and heads of 8 dims."""
    heads = int(rng().integers(1, 4))
    options = dict(block_size=8, vocab_size=int(rng().integers(5, 30)), n_layer=2, n_head=heads, n_embd=8 * heads,
                   dropout=0.0, bias=bool(rng().integers(0, 2)))
    return wg.nn.GPTConfig(**{**options, **overrides})


def pair(config, device):
    """A webgrad GPT (seeded from the test's seed) and the torch model holding its weights."""
    wg.manual_seed(seed())
    model = wg.nn.GPT(config, device=device)
    theirs = TorchGPT(config)
    theirs.load_state_dict({k: torch.from_numpy(to_numpy(v)) for k, v in model.state_dict().items()})
    return model, theirs


def ids(*shape, vocab):
    return integers(*shape, high=vocab)


# ---- tests ----
def test_state_dict_names_and_shapes_are_torchs():
    config = tiny_config(n_layer=3)
    ours = {k: tuple(v.shape) for k, v in wg.nn.GPT(config, device="cpu").state_dict().items()}
    theirs = {k: tuple(v.shape) for k, v in TorchGPT(config).state_dict().items()}
    assert list(ours.items()) == list(theirs.items())


def test_init_and_tying():
    """nanoGPT's initialisation (N(0, 0.02), residual projections scaled by 1/sqrt(2 n_layer), zero
    biases) and one Parameter behind the embedding and the head."""
    config = tiny_config(n_layer=4, n_embd=64, n_head=2, vocab_size=300, bias=True)
    model = wg.nn.GPT(config, device="cpu")
    assert model.lm_head.weight is model.transformer.wte.weight
    names = [n for n, _ in model.named_parameters()]
    assert "lm_head.weight" not in names and "transformer.wte.weight" in names
    assert model.get_num_params(False) - model.get_num_params() == config.block_size * config.n_embd
    assert model.get_num_params(False) == sum(p.numel() for p in TorchGPT(config).parameters())
    std = {n: float(to_numpy(p).std()) for n, p in model.named_parameters()}
    assert abs(std["transformer.wte.weight"] - 0.02) < 0.002, tag(str(std["transformer.wte.weight"]))
    assert abs(std["transformer.h.0.attn.c_attn.weight"] - 0.02) < 0.002
    assert abs(std["transformer.h.1.mlp.c_proj.weight"] - 0.02 / math.sqrt(8)) < 0.001
    assert not np.any(to_numpy(model.transformer.h[0].mlp.c_fc.bias))


def test_logits_loss_and_gradients_match_torch(device):
    config = tiny_config()
    model, theirs = pair(config, device)
    batch, time = 3, int(rng().integers(1, config.block_size + 1))
    idx, targets = ids(batch, time, vocab=config.vocab_size), ids(batch, time, vocab=config.vocab_size)
    targets[0, 0] = -1   # ignored, as in nanoGPT's loss
    logits, loss = model(wg.tensor(idx, device=device), wg.tensor(targets, device=device))
    t_logits, t_loss = theirs(torch.from_numpy(idx).long(), torch.from_numpy(targets).long())
    assert logits.device == device
    assert_close(logits, t_logits, what="logits")
    assert_close(loss, t_loss, what="loss")
    loss.backward()
    t_loss.backward()
    t_grads = dict(theirs.named_parameters())
    for name, p in model.named_parameters():
        assert_close(p.grad, t_grads[name].grad, atol=2e-4, rtol=1e-3, what=f"gradient of {name}")


def test_dropout_trains_and_eval_matches_torch(device):
    config = tiny_config(dropout=0.5)
    model, theirs = pair(config, device)
    idx = wg.tensor(ids(2, 8, vocab=config.vocab_size), device=device)
    first, second = model(idx)[0], model(idx)[0]
    assert not np.allclose(to_numpy(first), to_numpy(second)), tag("dropout: two training passes agree")
    model.eval()
    theirs.eval()
    assert_close(model(idx)[0], theirs(torch.from_numpy(to_numpy(idx)).long())[0], what="eval logits")


def test_checkpoint_loads_into_torch_and_back(tmp_path):
    """A nanoGPT-style checkpoint (weights and config) saved by webgrad loads with torch.load into the
    torch model, and a torch.save'd state_dict loads back into a webgrad GPT."""
    config = tiny_config()
    model = wg.nn.GPT(config, device="cpu")
    path = tmp_path / "gpt.pt"
    wg.save({"model": model.state_dict(), "model_args": dataclasses.asdict(config)}, path)
    saved = torch.load(path)
    theirs = TorchGPT(wg.nn.GPTConfig(**saved["model_args"]))
    theirs.load_state_dict(saved["model"])
    assert saved["model"]["lm_head.weight"].data_ptr() == saved["model"]["transformer.wte.weight"].data_ptr()
    idx = ids(2, 5, vocab=config.vocab_size)
    assert_close(theirs(torch.from_numpy(idx).long())[0], model(wg.tensor(idx))[0], what="torch after torch.load")

    with torch.no_grad():
        for p in theirs.parameters():
            p.add_(torch.from_numpy(randn(*p.shape)) * 0.1)
    torch.save(theirs.state_dict(), tmp_path / "back.pt")
    back = wg.nn.GPT(config, device="cpu")
    back.load_state_dict(wg.load(tmp_path / "back.pt"))
    assert back.lm_head.weight is back.transformer.wte.weight
    assert_close(back(wg.tensor(idx))[0], theirs(torch.from_numpy(idx).long())[0], what="webgrad after wg.load")


def torch_greedy(theirs, idx, steps, block):
    """Argmax decoding; also the smallest gap between the best and second-best logit met."""
    gap = math.inf
    with torch.no_grad():
        for _ in range(steps):
            logits = theirs(idx[:, -block:])[0][:, -1, :]
            top = logits.topk(2, dim=-1).values
            gap = min(gap, float((top[:, 0] - top[:, 1]).min()))
            idx = torch.cat((idx, logits.argmax(-1, keepdim=True)), dim=1)
    return idx, gap


def test_generate_top_k_1_is_greedy(device):
    config = tiny_config()
    model, theirs = pair(config, device)
    prompt = ids(2, 3, vocab=config.vocab_size)
    steps = config.block_size + 4   # past block_size: the context is cropped to the last block
    for _ in range(5):   # a wide head spreads the logits apart; redrawn in the rare case of a near tie
        head = randn(config.vocab_size, config.n_embd)
        with wg.no_grad():
            model.lm_head.weight.copy_(wg.tensor(head, device=device))
        with torch.no_grad():
            theirs.lm_head.weight.copy_(torch.from_numpy(head))
        expected, gap = torch_greedy(theirs, torch.from_numpy(prompt).long(), steps, config.block_size)
        if gap > 1e-3:
            break
    assert gap > 1e-3, tag(f"the test's logits are not well separated (gap {gap})")
    out = model.generate(wg.tensor(prompt, device=device), steps, temperature=0.7, top_k=1)
    assert out.device == device and tuple(out.shape) == (2, 3 + steps)
    assert out.tolist() == expected.tolist()


def test_generate_samples_within_top_k(device):
    """Each sampled token is among torch's top_k logits for its prefix; a generator reproduces the run."""
    config = tiny_config(vocab_size=20)
    model, theirs = pair(config, device)
    prompt = wg.tensor(ids(4, 2, vocab=20), device=device)
    out = model.generate(prompt, 6, top_k=3, generator=wg.Generator().manual_seed(seed()))
    again = model.generate(prompt, 6, top_k=3, generator=wg.Generator().manual_seed(seed()))
    assert out.tolist() == again.tolist()
    tokens = torch.tensor(out.tolist())
    with torch.no_grad():
        logits = theirs(tokens[:, :-1])[0]
    for t in range(2, tokens.shape[1]):
        best = logits[:, t - 1].topk(3, dim=-1).indices
        assert all(int(tokens[b, t]) in best[b].tolist() for b in range(4)), tag(f"step {t}: outside the top 3")


def test_generate_draws_from_the_softmax():
    """With temperature 2 and no top_k, the first sampled token's frequencies over many rows follow
    softmax(logits / 2) (chi-square)."""
    config = tiny_config(vocab_size=6, n_embd=16, n_head=2)
    model, theirs = pair(config, "cpu")
    rows = 3000
    prompt = np.full((rows, 1), int(rng().integers(0, 6)), dtype=np.int32)
    drawn = to_numpy(model.generate(wg.tensor(prompt), 1, temperature=2.0))[:, 1]
    with torch.no_grad():
        p = torch.softmax(theirs(torch.from_numpy(prompt[:1]).long())[0][0, -1] / 2.0, -1).numpy()
    expected = p * rows
    chi2 = float((((np.bincount(drawn, minlength=6) - expected) ** 2) / expected).sum())
    assert chi2 < 25.7, tag(f"chi-square {chi2:.1f} over 5 degrees of freedom (p = 1e-4 at 25.7); p {p}")


@pytest.mark.parametrize("change,message", [
    (dict(n_embd=30, n_head=4), "multiple of n_head"), (dict(n_layer=0), "n_layer must be a positive int"),
    (dict(dropout=1.0), "dropout must be in"),
])
def test_bad_config(change, message):
    with pytest.raises(ValueError, match=message):
        wg.nn.GPTConfig(**{**dict(vocab_size=10, block_size=4, n_layer=1, n_head=1, n_embd=8), **change})


def test_bad_inputs():
    model = wg.nn.GPT(wg.nn.GPTConfig(vocab_size=10, block_size=4, n_layer=1, n_head=1, n_embd=8), device="cpu")
    with pytest.raises(ValueError, match="block_size is only 4"):
        model(wg.zeros(1, 5, dtype=wg.int32))
    with pytest.raises(ValueError, match="temperature must be positive"):
        model.generate(wg.zeros(1, 1, dtype=wg.int32), 2, temperature=0)
    with pytest.raises(ValueError, match="top_k must be positive"):
        model.generate(wg.zeros(1, 1, dtype=wg.int32), 2, top_k=0)


def test_configure_optimizers_decays_matrices_only():
    model = wg.nn.GPT(tiny_config(bias=True), device="cpu")
    opt = model.configure_optimizers(0.1, 3e-4)
    decay, plain = opt.param_groups
    assert isinstance(opt, wg.optim.AdamW) and decay["weight_decay"] == 0.1 and plain["weight_decay"] == 0.0
    assert all(p.ndim == 2 for p in decay["params"]) and all(p.ndim == 1 for p in plain["params"])
    assert len(decay["params"]) + len(plain["params"]) == len(list(model.parameters()))
