"""MNIST training speed and accuracy, natively.

Prints, in one run, the training throughput (images per second: gathering a shuffled batch on
the device, forward, backward and an Adam step) of the MLP (784-128-10) and the CNN of
webgrad.nn.mnist_mlp / mnist_cnn on webgpu (eager, and replayed with wg.jit) and on cpu, each
next to PyTorch (eager) running the same
model on the matching device: CUDA for webgpu on a hardware adapter when torch has it, else
PyTorch on CPU; the ratio is webgrad / PyTorch (above 1: webgrad is faster).

--full also trains both models for 3 epochs on the full set (the CLI's recipe: Adam, batch 64,
lr 2e-3 decaying linearly to 0) and checks the targets: MLP >= 0.975, CNN >= 0.988 test accuracy.
On a machine without a GPU that takes a few minutes for the MLP and much longer for the CNN.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))

import webgrad as wg
from webgrad import cli, nn

TARGETS = {"mlp": 0.975, "cnn": 0.988}


def webgrad_throughput(model_name, device, batch_size, seconds, max_steps, warmup=2, jit=False):
    """Images per second over timed steps (at least 2, then until `seconds` or max_steps); with jit,
    the step is recorded once and replayed (wg.jit)."""
    wg.manual_seed(0)
    data = wg.data.mnist("train", device=device, limit=batch_size * (max_steps + warmup + 1))
    model = nn.MODELS[model_name](device=device)
    opt = wg.optim.Adam(model.parameters(), lr=1e-3)

    def train(idx):
        x, y = data[idx]   # the batch is gathered on the device inside the step, as PyTorch's below
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    run = wg.jit(train) if jit else train

    def windows():   # epoch after epoch: a permutation made on the device, a slice of it per step
        while True:
            order = wg.randperm(len(data), device=device)
            for start in range(0, len(data) - batch_size + 1, batch_size):
                yield order[start:start + batch_size]
    batches = windows()

    def step():
        return run(next(batches))

    for _ in range(warmup):   # compile the kernels, fill the buffer pool
        step().item()
    steps, start = 0, time.perf_counter()
    while steps < max_steps and (steps < 2 or time.perf_counter() - start < seconds):
        loss = step()
        steps += 1
        if steps % 10 == 0 or time.perf_counter() - start >= seconds:
            loss.item()   # wait for the device now and then, so the clock sees the work
    loss.item()
    return steps * batch_size / (time.perf_counter() - start), steps


def torch_throughput(model_name, device, batch_size, seconds, max_steps, warmup=2, graph=False):
    """PyTorch's images per second on the same step; graph: the step captured once as a CUDA graph
    and replayed (CUDA only), the peer of wg.jit."""
    import numpy as np
    import torch
    from torch_graph import cuda_graph_step
    torch.manual_seed(0)
    data = wg.data.mnist("train", device="cpu", limit=batch_size * (max_steps + warmup))
    x_all, y_all = data[:]
    x_all = torch.from_numpy(x_all.numpy()).to(device)
    y_all = torch.from_numpy(y_all.numpy().astype(np.int64)).to(device)
    model = nn.torch_equivalent(nn.MODELS[model_name]()).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, capturable=graph)
    batches = len(y_all) // batch_size   # epoch after epoch, like the webgrad loader
    windows = torch.randperm(len(y_all), device=device)[:batches * batch_size].view(batches, batch_size)

    def loss_of(idx):
        return torch.nn.functional.cross_entropy(model(x_all[idx]), y_all[idx])

    def eager_step(i):
        loss = loss_of(windows[i % batches])
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    step = cuda_graph_step(loss_of, opt, windows) if graph else eager_step

    for i in range(warmup):
        step(i).item()
    steps, start = 0, time.perf_counter()
    while steps < max_steps and (steps < 2 or time.perf_counter() - start < seconds):
        loss = step(warmup + steps)
        steps += 1
        if steps % 10 == 0:
            loss.item()
    loss.item()
    return steps * batch_size / (time.perf_counter() - start), steps


def torch_device_for(device):
    """PyTorch's device to set beside a webgrad device: CUDA beside webgpu on a hardware adapter."""
    try:
        import torch
    except ImportError:
        return None
    if device == "webgpu" and not wg.get_backend("webgpu").is_software and torch.cuda.is_available():
        return "cuda"
    return "cpu"


def adapter_name():
    try:
        backend = wg.get_backend("webgpu")
        info = backend.runtime.driver.info
        return f"{info['name']} ({info['backend']}, {'software' if backend.is_software else 'hardware'})"
    except Exception as e:
        return f"unavailable ({e})"


def throughput_table(models, devices, batch_size, seconds, max_steps, rounds):
    import torch
    print(f"webgpu adapter: {adapter_name()}; PyTorch {torch.__version__}, {torch.get_num_threads()} CPU threads, "
          f"CUDA {'yes: ' + torch.cuda.get_device_name() if torch.cuda.is_available() else 'no'}")
    print(f"training throughput, batch {batch_size}, Adam (images/s, the best of {rounds} rounds taken in turn "
          f"with PyTorch's, so both see the same machine; ratio = webgrad / PyTorch eager, and / PyTorch's "
          f"CUDA-graph replay of the step where CUDA is there)")
    print(f"{'model':6s} {'device':10s} {'webgrad':>10s} {'steps':>6s}   {'torch dev':9s} {'PyTorch':>10s} {'ratio':>7s}"
          f" {'CUDA graph':>11s} {'ratio':>7s}")
    rows = []
    cache = {}
    for name in models:
        for device in devices:
            jit = device.endswith("+jit")
            device = device.removesuffix("+jit")
            tdev = torch_device_for(device)
            peers = [False, True] if tdev == "cuda" else [False]
            ours = steps = 0
            for _ in range(rounds):
                speed, steps = webgrad_throughput(name, device, batch_size, seconds, max_steps, jit=jit)
                ours = max(ours, speed)
                for graph in peers:
                    if len(cache.setdefault((name, tdev, graph), [])) < rounds:
                        cache[name, tdev, graph].append(
                            torch_throughput(name, tdev, batch_size, seconds, max_steps, graph=graph)[0])
            theirs = max(cache[name, tdev, False])
            graph = max(cache[name, tdev, True]) if tdev == "cuda" else None
            rows.append((name, device + "+jit" * jit, ours, tdev, theirs, graph))
            print(f"{name:6s} {device + '+jit' * jit:10s} {ours:10.1f} {steps:6d}   {tdev:9s} {theirs:10.1f} "
                  f"{ours / theirs:7.3f} " + (f"{graph:11.1f} {ours / graph:7.3f}" if graph else f"{'n/a':>11s}"),
                  flush=True)
    return rows


def full_runs(models, device, epochs):
    ok = True
    for name in models:
        start = time.perf_counter()
        acc, _ = cli.train_mnist(name, device, epochs=epochs, progress=cli.mnist_progress_bar)
        passed = acc >= TARGETS[name]
        ok &= passed
        print(f"full {name} on {device}: test accuracy {acc:.4f} after {epochs} epochs in "
              f"{time.perf_counter() - start:.0f} s (target {TARGETS[name]}: {'met' if passed else 'MISSED'})",
              flush=True)
    return ok


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="mlp,cnn", help="comma-separated: mlp,cnn")
    parser.add_argument("--devices", default="webgpu,webgpu+jit,cpu",
                        help="comma-separated: webgpu, webgpu+jit (steps replayed by wg.jit), cpu")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--seconds", type=float, default=5.0, help="time each measurement for about this long")
    parser.add_argument("--max-steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3, help="measure each side this many times, in turn")
    parser.add_argument("--full", action="store_true", help="also train 3 epochs and check the accuracy targets")
    parser.add_argument("--full-device", default=None, help="device of the --full runs (default: the default device)")
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args(argv)
    models, devices = args.models.split(","), args.devices.split(",")
    throughput_table(models, devices, args.batch_size, args.seconds, args.max_steps, args.rounds)
    if args.full:
        return 0 if full_runs(models, args.full_device or wg.default_device(), args.epochs) else 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
