"""GPT training speed (issue 12): webgrad's GPT next to the same model in PyTorch, in one process.

1. Training steps of webgrad.nn.GPT (nanoGPT's layout, AdamW with nanoGPT's groups, lr 1e-3) at
   two configs, vocab 65, random tokens: "large" (6 layers, 6 heads, 384 wide, block 256, batch 64)
   and "page" (2 layers, 4 heads, 128 wide, block 64, batch 32). A step gathers its batch of token
   windows on the device (from a fixed table of offsets, the same on both sides), runs forward,
   cross-entropy, backward and the optimizer. Four ways: webgrad eager; webgrad replayed by wg.jit;
   the same model in PyTorch (written as nanoGPT does, F.scaled_dot_product_attention, holding
   webgrad's initial weights: the first losses are printed side by side) eager with fused AdamW;
   and that step captured once as a CUDA graph and replayed (CUDA only, else "n/a"). With --amp,
   two more: webgrad's whole mixed-precision step replayed by wg.jit (the forward under wg.autocast
   float16, scaler.scale(loss).backward(), scaler.step(opt) and scaler.update(): the overflow check
   skips AdamW's step on the device, nothing is read), next to PyTorch eager under torch.autocast
   float16 with its GradScaler.
   Tokens/s, the best of --rounds rounds taken in turn; ratio = webgrad / PyTorch (above 1: faster).
2. Causal attention at those models' shapes (B, H, T, head): webgrad's fused
   F.scaled_dot_product_attention next to torch's, ms per forward and per forward + backward; the
   ratio here is of times, webgrad / torch (above 1: slower; the issue's goal: at most 1.5).

--learn (instead of 1 and 2): trains the large config on Shakespeare (webgrad.data.text; its
vocabulary, 84 characters) in both, on the same batches: AdamW lr 1e-3, warmup 100 then a cosine
to lr/10, gradients clipped to norm 1 (the CLI's `train gpt` recipe), webgrad replayed by wg.jit,
PyTorch eager. Prints both validation losses (the same --eval-batches batches) and their
difference, and 200 characters sampled from each.

f32, TF32 off. PyTorch runs on CUDA when it has it, else on the CPU. --small shrinks the models,
shapes and runs so that all of it finishes on a software adapter (lavapipe) in about a minute.
"""
import argparse
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn as tnn
import torch.nn.functional as TF

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))

import webgrad as wg
from webgrad import nn
from webgrad.cli_gpt import warmup_cosine
from webgrad.data.text import TextData
from webgrad.nn import functional as F

from conv import timed
from torch_graph import cuda_graph_step

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
from torch_gpt import TorchGPT

# name: (n_layer, n_head, n_embd, block_size, batch)
CONFIGS = {"large": (6, 6, 384, 256, 64), "page": (2, 4, 128, 64, 32)}
SMALL_CONFIGS = {"large": (2, 2, 32, 32, 4), "page": (1, 2, 16, 16, 4)}
VOCAB, LR, WEIGHT_DECAY, BETAS = 65, 1e-3, 0.1, (0.9, 0.95)
TORCH_DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


# ---- the two sides' models and steps ----
def webgrad_model(config):
    wg.manual_seed(0)
    model = nn.GPT(config, device="webgpu")
    return model, model.configure_optimizers(WEIGHT_DECAY, LR, betas=BETAS)


def torch_model(model, capturable=False):
    """The PyTorch GPT holding webgrad model's current weights, and its AdamW (same groups)."""
    theirs = TorchGPT(model.config)
    theirs.load_state_dict({k: torch.from_numpy(v.numpy()) for k, v in model.state_dict().items()})
    theirs = theirs.to(TORCH_DEVICE)
    params = list(theirs.parameters())
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": WEIGHT_DECAY},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    fused = TORCH_DEVICE == "cuda"   # nanoGPT's choice where it exists
    return theirs, torch.optim.AdamW(groups, lr=LR, betas=BETAS, fused=fused, capturable=capturable)


def webgrad_train(model, opt, data, clip=0.0):
    """train(off): one training step on the windows of data at the offsets off; returns the loss."""
    def train(off):
        loss = webgrad_loss(model, data, off)   # the batch is gathered on the device, in the replay too
        opt.zero_grad()
        loss.backward()
        if clip:
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        return loss
    return train


def webgrad_step(model, opt, data, offsets, jit, clip=0.0):
    """step(i): one training step on the windows of data at offsets[i]; returns the loss."""
    train = webgrad_train(model, opt, data, clip)
    run = wg.jit(train) if jit else train
    return lambda i: run(offsets[i % offsets.shape[0]])


def webgrad_amp_step(model, opt, data, offsets):
    """step(i) as webgrad_step's jitted one, in mixed precision: PyTorch's AMP program, all of it
    replayed."""
    scaler = wg.amp.GradScaler("webgpu")

    def train(off):
        opt.zero_grad()
        with wg.autocast("webgpu", dtype=wg.float16):
            loss = webgrad_loss(model, data, off)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss
    run = wg.jit(train)
    return lambda i: run(offsets[i % offsets.shape[0]])


def torch_amp_step(model, opt, data, offsets):
    scaler = torch.amp.GradScaler(TORCH_DEVICE)

    def step(i):
        opt.zero_grad(set_to_none=True)
        with torch.autocast(TORCH_DEVICE, dtype=torch.float16):
            loss = torch_loss(model, data, offsets[i % offsets.shape[0]])
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss
    return step


def webgrad_loss(model, data, off):
    windows = data[off.unsqueeze(1) + wg.arange(model.config.block_size + 1, device="webgpu")]
    return model(windows[:, :-1], windows[:, 1:])[1]


def torch_loss(model, data, off):
    windows = data[off.unsqueeze(1) + torch.arange(model.config.block_size + 1, device=data.device)]
    return model(windows[:, :-1], windows[:, 1:])[1]


def torch_step(model, opt, data, offsets, clip=0.0):
    def step(i):
        loss = torch_loss(model, data, offsets[i % offsets.shape[0]])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if clip:
            tnn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        return loss
    return step


# ---- 1: training throughput ----
def tokens_per_second(step, tokens, seconds):
    step(0).item()
    steps, start = 0, time.perf_counter()
    while steps < 2 or time.perf_counter() - start < seconds:
        loss = step(steps)
        steps += 1
        if steps % 10 == 0:
            loss.item()   # wait now and then, so that the clock sees the work and queues stay short
    loss.item()
    return steps * tokens / (time.perf_counter() - start)


def training_table(configs, rounds, seconds, amp=False):
    print(f"training steps: tokens/s, best of {rounds} rounds taken in turn; ratio = webgrad / PyTorch")
    rng = np.random.default_rng(0)
    for name, (n_layer, n_head, n_embd, block, batch) in configs.items():
        config = nn.GPTConfig(block_size=block, vocab_size=VOCAB, n_layer=n_layer, n_head=n_head, n_embd=n_embd)
        ids = rng.integers(0, VOCAB, size=1 << 20, dtype=np.int32)
        table = rng.integers(0, ids.size - block - 1, size=(64, batch), dtype=np.int32)
        data, offsets = wg.tensor(ids, device="webgpu"), wg.tensor(table, device="webgpu")
        tdata = torch.from_numpy(ids.astype(np.int64)).to(TORCH_DEVICE)
        toffsets = torch.from_numpy(table.astype(np.int64)).to(TORCH_DEVICE)
        model, opt = webgrad_model(config)
        jit_model, jit_opt = webgrad_model(config)   # the same initial weights
        theirs, topt = torch_model(model)
        steps = {"webgrad eager": webgrad_step(model, opt, data, offsets, jit=False),
                 "webgrad jit": webgrad_step(jit_model, jit_opt, data, offsets, jit=True),
                 "torch eager": torch_step(theirs, topt, tdata, toffsets)}
        if TORCH_DEVICE == "cuda":
            graph_model, graph_opt = torch_model(jit_model, capturable=True)
            steps["CUDA graph"] = cuda_graph_step(lambda off: torch_loss(graph_model, tdata, off), graph_opt, toffsets)
        if amp:
            amp_model, amp_opt = webgrad_model(config)
            steps["webgrad jit amp"] = webgrad_amp_step(amp_model, amp_opt, data, offsets)
            steps["torch eager amp"] = torch_amp_step(*torch_model(amp_model), tdata, toffsets)
        losses = steps["webgrad eager"](0).item(), steps["torch eager"](0).item()   # both from the start
        params = model.get_num_params()
        print(f"{name}: {n_layer} layers, {n_head} heads, {n_embd} wide, block {block}, batch {batch}: "
              f"{params / 1e6:.2f}M parameters; first loss webgrad {losses[0]:.5f}, PyTorch {losses[1]:.5f}"
              + ("" if abs(losses[0] - losses[1]) < 1e-3 else "  (DIFFERENT: not the same math?)"), flush=True)
        best = dict.fromkeys(steps, 0.0)
        for _ in range(rounds):
            for key, step in steps.items():
                best[key] = max(best[key], tokens_per_second(step, batch * block, seconds))
        graph = best.get("CUDA graph")
        print(f"  PyTorch {TORCH_DEVICE} eager {best['torch eager']:12,.0f} tok/s   CUDA graph "
              + (f"{graph:12,.0f} tok/s" if graph else "n/a"))
        for key in ("webgrad eager", "webgrad jit"):
            print(f"  {key:19s}{best[key]:12,.0f} tok/s   / PyTorch eager {best[key] / best['torch eager']:6.3f}"
                  f"   / CUDA graph " + (f"{best[key] / graph:6.3f}" if graph else "n/a"), flush=True)
        if amp:
            ours, theirs = best["webgrad jit amp"], best["torch eager amp"]
            print(f"  autocast float16 + GradScaler: PyTorch {TORCH_DEVICE} eager {theirs:12,.0f} tok/s, webgrad jit "
                  f"{ours:12,.0f} tok/s ({ours / theirs:6.3f}; {ours / best['webgrad jit']:5.2f}x its float32)",
                  flush=True)


# ---- 2: attention ----
def attention_table(shapes, rounds):
    sync = torch.cuda.synchronize if TORCH_DEVICE == "cuda" else (lambda: None)
    print(f"causal attention: ms, best of {rounds}; ratio = webgrad's time / torch's (goal: at most 1.5)")
    print(f"{'B x H x T x head':>18} {'fwd':>8} {'torch':>8} {'ratio':>6}   {'fwd+bwd':>8} {'torch':>8} {'ratio':>6}")
    rng = np.random.default_rng(0)
    for shape in shapes:
        arrays = [rng.standard_normal(shape, dtype=np.float32) for _ in range(4)]
        q, k, v = (wg.tensor(a, device="webgpu", requires_grad=True) for a in arrays[:3])
        tq, tk, tv = (torch.tensor(a, device=TORCH_DEVICE, requires_grad=True) for a in arrays[:3])
        grad, tgrad = wg.tensor(arrays[3], device="webgpu"), torch.tensor(arrays[3], device=TORCH_DEVICE)

        def ours():
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

        def theirs():
            return TF.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
        ours().backward(grad)
        theirs().backward(tgrad)
        for what, a, t in (("output", ours().detach(), theirs()), ("q grad", q.grad, tq.grad),
                           ("k grad", k.grad, tk.grad), ("v grad", v.grad, tv.grad)):
            expected = t.detach().cpu().numpy()
            error = np.abs(a.numpy() - expected).max() / max(1.0, np.abs(expected).max())
            if error > 1e-3:
                raise SystemExit(f"attention {shape}: {what} differs from torch's by {error:.1e}")

        def forward(fn, no_grad):
            def run():
                with no_grad():
                    fn()
            return run
        times = [math.inf] * 4
        for _ in range(rounds):
            for i, t in enumerate((timed(forward(ours, wg.no_grad), wg.synchronize),
                                   timed(forward(theirs, torch.no_grad), sync),
                                   timed(lambda: ours().backward(grad), wg.synchronize),
                                   timed(lambda: theirs().backward(tgrad), sync))):
                times[i] = min(times[i], t)
        print(f"{'x'.join(map(str, shape)):>18} {times[0] * 1e3:8.3f} {times[1] * 1e3:8.3f} {times[0] / times[1]:6.2f}"
              f"   {times[2] * 1e3:8.3f} {times[3] * 1e3:8.3f} {times[2] / times[3]:6.2f}", flush=True)


# ---- --learn: the same training in both ----
def torch_generate(model, idx, tokens):
    with torch.no_grad():
        for _ in range(tokens):
            logits, _ = model(idx[:, -model.config.block_size:])
            idx = torch.cat((idx, torch.multinomial(TF.softmax(logits[:, -1], dim=-1), 1)), dim=1)
    return idx


def learn(dims, steps, eval_batches, sample_chars):
    n_layer, n_head, n_embd, block, batch = dims
    text = TextData.load("shakespeare", device="webgpu")
    config = nn.GPTConfig(block_size=block, vocab_size=text.tokenizer.vocab_size, n_layer=n_layer, n_head=n_head,
                          n_embd=n_embd)
    warmup = min(100, steps // 10)
    print(f"learning: Shakespeare ({text.train.shape[0]:,} training, {text.val.shape[0]:,} validation characters, "
          f"vocabulary {config.vocab_size}); {n_layer} layers, {n_head} heads, {n_embd} wide, block {block}, "
          f"batch {batch}; {steps} steps, AdamW lr {LR}, warmup {warmup} + cosine, clip 1", flush=True)
    rng = np.random.default_rng(0)   # the same training and validation batches on both sides
    tables = [rng.integers(0, part.shape[0] - block - 1, size=(rows, batch), dtype=np.int32)
              for part, rows in ((text.train, steps), (text.val, eval_batches))]
    model, opt = webgrad_model(config)
    theirs, topt = torch_model(model)

    def on_torch(array):
        return torch.from_numpy(array.astype(np.int64)).to(TORCH_DEVICE)
    ours = [wg.tensor(t, device="webgpu") for t in tables]
    tensors = [on_torch(part.numpy()) for part in (text.train, text.val)], [on_torch(t) for t in tables]
    sides = {"webgrad": (model, wg.optim.lr_scheduler.LambdaLR(opt, warmup_cosine(steps, warmup)),
                         webgrad_step(model, opt, text.train, ours[0], jit=True, clip=1.0)),
             "PyTorch": (theirs, torch.optim.lr_scheduler.LambdaLR(topt, warmup_cosine(steps, warmup)),
                         torch_step(theirs, topt, tensors[0][0], tensors[1][0], clip=1.0))}
    results = {}
    for name, (net, scheduler, step) in sides.items():
        start = time.perf_counter()
        for i in range(steps):
            loss = step(i)
            scheduler.step()
            if (i + 1) % max(1, steps // 10) == 0 or i + 1 == steps:
                print(f"  {name} step {i + 1}: loss {loss.item():.4f}, "
                      f"{(i + 1) * batch * block / (time.perf_counter() - start):,.0f} tok/s", flush=True)
        seconds = time.perf_counter() - start
        net.eval()
        if name == "webgrad":
            with wg.no_grad():
                losses = [webgrad_loss(net, text.val, ours[1][i]) for i in range(eval_batches)]
            wg.manual_seed(0)
            sample = net.generate(text.tokenizer.encode_tensor("\n", "webgpu").unsqueeze(0), sample_chars)[0]
        else:
            with torch.no_grad():
                losses = [torch_loss(net, tensors[0][1], tensors[1][1][i]) for i in range(eval_batches)]
            torch.manual_seed(0)
            sample = torch_generate(net, torch.tensor([text.tokenizer.encode("\n")], device=TORCH_DEVICE),
                                    sample_chars)[0].tolist()
        results[name] = sum(loss.item() for loss in losses) / eval_batches
        print(f"{name}: validation loss {results[name]:.4f} (mean of {eval_batches} batches) after {seconds:.0f} s "
              f"of training; {sample_chars} characters sampled:\n{text.tokenizer.decode(sample[1:])}\n", flush=True)
    print(f"validation loss webgrad - PyTorch: {results['webgrad'] - results['PyTorch']:+.4f}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--small", action="store_true", help="tiny models, shapes and runs (software adapters)")
    parser.add_argument("--configs", default="large,page", help="comma-separated: large,page")
    parser.add_argument("--rounds", type=int, default=None, help="measure each way this many times, in turn "
                        "(default 3; --small 1)")
    parser.add_argument("--seconds", type=float, default=None, help="time each measurement for about this long "
                        "(default 3; --small 0.5)")
    parser.add_argument("--no-attention", action="store_true", help="skip the attention table")
    parser.add_argument("--amp", action="store_true", help="also train under autocast float16 + GradScaler")
    parser.add_argument("--learn", action="store_true", help="train on Shakespeare in both instead (see above)")
    parser.add_argument("--steps", type=int, default=None, help="--learn's steps (default 2000; --small 30)")
    parser.add_argument("--eval-batches", type=int, default=None, help="--learn's validation batches (default 20)")
    args = parser.parse_args(argv)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    info = wg.get_backend("webgpu").info
    print(f"webgrad on {info['name']} ({info['backend']}); PyTorch {torch.__version__} on "
          f"{torch.cuda.get_device_name() if TORCH_DEVICE == 'cuda' else f'CPU, {torch.get_num_threads()} threads'}"
          "; f32, TF32 off", flush=True)
    configs = SMALL_CONFIGS if args.small else CONFIGS
    if args.learn:
        steps = args.steps or (30 if args.small else 2000)
        learn(configs["large"], steps, args.eval_batches or (2 if args.small else 20), 200)
        return 0
    chosen = {name: configs[name] for name in args.configs.split(",")}
    rounds = args.rounds or (1 if args.small else 3)
    training_table(chosen, rounds, args.seconds or (0.5 if args.small else 3.0), args.amp)
    if not args.no_attention:
        attention_table([(batch, n_head, block, n_embd // n_head) for n_layer, n_head, n_embd, block, batch
                         in chosen.values()], rounds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
