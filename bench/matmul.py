"""f32 matrix products: webgrad's WGSL kernel next to PyTorch (cuBLAS with TF32 off) on one GPU.

Prints, per shape, TFLOP/s of each, the ratio webgrad / PyTorch, the host time webgrad spends
queuing one product (when it is close to the time per product, the product is bound by Python, not
the GPU), and the GPU time of one product's dispatches alone (webgrad.profiler; with
timestamp-query, else "-"): back to back, independent products may overlap on the GPU. Shapes: squares, an MNIST step's products, and the GPT training step's (issue 12, 16,384
tokens, 384 wide) in the layouts its Linear layers use: x @ W.T forward, g @ W for the input's
gradient, g.T @ x for the weight's. Every shape is first checked against PyTorch's product on fresh
random inputs. Both sides run products back to back and wait for the GPU once per batch of about
BATCH_SECONDS of work (after WARM_SECONDS of them, so the GPU's clocks are up), as a training step
does (a wait per few products would time the wait); a product whose output is larger than the
runtime's pool over MAX_QUEUED is submitted as it is queued, because the runtime recycles a released
buffer only at a submit (else the outputs in flight overflow its pool, and each product makes a new
buffer).
`--sweep` also times every tile configuration in CONFIGS at each shape, then the best one's K split
in SPLITS: how matmul_kernels' table was chosen. On a GPU the tuner (kernels/matmul_tuning.py) times
its candidates at each shape class's first product: the bench prints its times
(WEBGRAD_MATMUL_TUNING=0 measures the prior table alone).
Run on the lent GPU (../shared/DEVICE.md): webgrad over Vulkan, PyTorch over CUDA, same process.
"""
import argparse
import time

import numpy as np

import webgrad as wg
from webgrad.backends.webgpu import runtime
from webgrad.backends.webgpu.kernels import matmul as matmul_kernels

GPT_TOKENS, GPT_WIDTH = 16384, 384
# (name, batch, m, k, n, layout): layout says which operand is read through a transposed view
SHAPES = [(f"{s}^3", 1, s, s, s, "a @ b") for s in (512, 1024, 2048, 4096)] + [
    ("mlp 784->512", 1, 128, 784, 512, "a @ b"), ("mlp 512->10", 1, 128, 512, 10, "a @ b"),
    ("cnn conv2 fwd", 128, 64, 288, 196, "a @ b"), ("cnn conv2 wgrad", 128, 64, 196, 288, "a @ b")] + [
    (f"gpt {what} {i}->{o}", 1, m, k, n, layout)
    for i, o in ((GPT_WIDTH, 3 * GPT_WIDTH), (GPT_WIDTH, 4 * GPT_WIDTH), (4 * GPT_WIDTH, GPT_WIDTH))
    for what, m, k, n, layout in (("fwd", GPT_TOKENS, i, o, "a @ b.T"), ("dx", GPT_TOKENS, o, i, "a @ b"),
                                  ("dW", o, GPT_TOKENS, i, "a.T @ b"))]
T = matmul_kernels.MatmulTiles
CONFIGS = [T(16, 16, 8, 8, 8), T(16, 16, 8, 8, 16), T(16, 16, 8, 4, 8), T(16, 16, 4, 8, 8), T(16, 16, 4, 4, 16),
           T(8, 8, 4, 4, 16), T(16, 8, 8, 8, 8), T(8, 16, 8, 8, 8), T(16, 16, 8, 16, 8), T(16, 16, 16, 8, 8),
           T(32, 8, 4, 8, 8), T(8, 32, 8, 4, 8), T(8, 16, 8, 16, 8), T(16, 8, 16, 8, 8)]
SPLITS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)
BATCH_SECONDS = 0.01
WARM_SECONDS = 0.1
PROFILED = 5   # products timed one dispatch at a time for the GPU us column


def timed(fn, sync, min_seconds=0.3):
    """Seconds per call of fn, GPU work included, and the host's seconds to issue one: calls in
    batches of about BATCH_SECONDS between waits, repeated until min_seconds pass."""
    fn()
    sync()
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < WARM_SECONDS:
        for _ in range(4):
            fn()
        calls += 4
        sync()
    batch = int(min(500, max(4, BATCH_SECONDS * calls / (time.perf_counter() - start))))
    calls, issuing, start = 0, 0.0, time.perf_counter()
    while True:
        began = time.perf_counter()
        for _ in range(batch):
            fn()
        issuing += time.perf_counter() - began
        calls += batch
        sync()
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return elapsed / calls, issuing / calls


def gpu_us(run):
    """The GPU time of run's dispatches, each alone (webgrad.profiler's timestamps), per call."""
    with wg.profiler.profile() as prof:
        for _ in range(PROFILED):
            run()
    return f"{prof.total_us() / PROFILED:8.1f}" if prof.measure == wg.profiler.TIMESTAMPS else f"{'-':>8}"


def operands(batch, m, k, n, layout, rng):
    """Fresh random operands in numpy, laid out in memory as `layout` reads them, and the function
    that multiplies them (with .T views where the layout has them)."""
    a = rng.standard_normal((batch, k, m) if layout.startswith("a.T") else (batch, m, k), dtype=np.float32)
    b = rng.standard_normal((batch, n, k) if layout.endswith("b.T") else (batch, k, n), dtype=np.float32)
    return a, b, lambda x, y: (x.mT if layout.startswith("a.T") else x) @ (y.mT if layout.endswith("b.T") else y)


def main():
    import torch
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", action="store_true", help="time every tile configuration and K split")
    parser.add_argument("--only", default="", help="only the shapes whose name contains one of these (comma-separated)")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    backend = wg.get_backend("webgpu")
    limit = backend.runtime.limits["max_compute_workgroup_storage_size"]
    print(f"webgrad on {backend.info['name']} ({backend.info['backend']}), PyTorch {torch.__version__} on "
          f"{torch.cuda.get_device_name()}, f32, TF32 off; webgrad's time per product waits once per "
          f"~{BATCH_SECONDS * 1000:.0f} ms of products")
    rng = np.random.default_rng(0)
    print(f"{'shape':>20} {'batch x m x k x n':>20} {'layout':>8} {'webgrad TFLOP/s':>16} {'cuBLAS TFLOP/s':>15} "
          f"{'ratio':>6} {'host us':>8} {'GPU us':>8}   tiles, splits")
    for name, batch, m, k, n, layout in SHAPES:
        if not any(part in name for part in args.only.split(",")):
            continue
        a_np, b_np, product = operands(batch, m, k, n, layout, rng)
        a, b = wg.tensor(a_np, device="webgpu"), wg.tensor(b_np, device="webgpu")
        ta, tb = torch.from_numpy(a_np).cuda(), torch.from_numpy(b_np).cuda()
        expected = product(ta.double(), tb.double()).cpu().numpy()

        def check(label):
            error = np.abs(product(a, b).numpy() - expected).max() / np.abs(expected).max()
            return "" if error <= 1e-5 else f"  WRONG ({label}): off by {error:.1e} (relative to its max)"

        def ours():
            out = product(a, b)._storage
            if submit_each:
                backend.runtime.flush()
            return out
        submit_each = 4 * batch * m * n > runtime.POOL_LIMIT // runtime.MAX_QUEUED
        flops = 2 * batch * m * n * k
        theirs = flops / timed(lambda: product(ta, tb), torch.cuda.synchronize)[0] / 1e12
        tuner, known = backend.matmul_tuner, set(backend.matmul_tuner.timings)
        wrong = check("chosen")   # (the tuner's first product of a class times its candidates)
        tuned = {key: times for key, times in tuner.timings.items() if key not in known}
        tiles = matmul_kernels.matmul_tiles(m, n, batch, False, limit)
        chosen = [choice for memo, choice in tuner.chosen.items() if memo[:4] == (m, n, k, batch)] or [
            (tiles, matmul_kernels.matmul_splits(m, n, k, batch, tiles, False))]
        seconds, host = timed(ours, wg.synchronize)
        print(f"{name:>20} {f'{batch}x{m}x{k}x{n}':>20} {layout:>8} {flops / seconds / 1e12:16.2f} {theirs:15.2f} "
              f"{flops / seconds / 1e12 / theirs:6.3f} {host * 1e6:8.1f} {gpu_us(ours)}   "
              f"{tuple(chosen[0][0])}, {chosen[0][1]}{'' if tuned or not tuner.enabled else ' (tuned before)'}"
              f"{wrong}", flush=True)
        for key, times in tuned.items():
            print(f"{'':>20} tuner's us, GPU alone + dispatches ({key}): " + ", ".join(
                f"{tuple(t)}/{s} {seconds * 1e6:.1f}" for (t, s), seconds in sorted(times.items(), key=lambda i: i[1])))
        if args.sweep:
            sweep(m, n, k, batch, limit, flops, theirs, ours, check)


def sweep(m, n, k, batch, limit, flops, theirs, run, check):
    """Time each configuration of CONFIGS that fits (with the split rule's K split), then the
    fastest one with each K split of SPLITS that leaves pieces of at least MATMUL_MIN_SPLIT_K."""
    choose, split_rule = matmul_kernels.matmul_tiles, matmul_kernels.matmul_splits
    tuner = wg.get_backend("webgpu").matmul_tuner
    tuning, tuner.enabled = tuner.enabled, False   # the configurations as given

    def one(tiles, splits):
        matmul_kernels.matmul_tiles = lambda *_: tiles
        matmul_kernels.matmul_splits = (lambda *_: splits) if splits else split_rule
        wrong = check(f"{tuple(tiles)}, {splits}")
        tflops = flops / timed(run, wg.synchronize, 0.1)[0] / 1e12
        print(f"{'':>50} {tflops:16.2f} {'':>15} {tflops / theirs:6.3f} {'':>8} {gpu_us(run)}   {tuple(tiles)}, "
              f"{splits or split_rule(m, n, k, batch, tiles, False)}{wrong}", flush=True)
        return tflops
    try:
        fitting = [t for t in CONFIGS if t.workgroup_bytes <= limit]
        best = max(fitting, key=lambda tiles: one(tiles, None))
        binding = wg.get_backend("webgpu").runtime.limits["max_storage_buffer_binding_size"]
        for splits in SPLITS:   # (the pieces must fit one binding)
            if splits == 1 or (k // splits >= matmul_kernels.MATMUL_MIN_SPLIT_K and 4 * splits * batch * m * n <= binding):
                one(best, splits)
    finally:
        matmul_kernels.matmul_tiles, matmul_kernels.matmul_splits = choose, split_rule
        tuner.enabled = tuning


if __name__ == "__main__":
    main()
