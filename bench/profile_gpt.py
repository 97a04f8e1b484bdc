"""Where a replayed GPT training step's time goes, natively: python bench/profile_gpt.py [--config large] [--small].

Runs bench/gpt.py's step (its configs, AdamW, the batch gathered on the device) replayed by wg.jit and
prints:
- per kernel and shape (a product's M x N x K, K pieces and tiles; other kernels' output buffer's
  words; the grid): calls per step, GPU ms per step and share of the step, from webgrad.profiler over
  --steps replayed steps (timestamp queries where the adapter has them: each dispatch alone, so the
  sum has no overlap between dependent dispatches and no drain between them);
- the same summed by kernel family;
- the host side: dispatches and submits per step, the wall time of a step (--wall-steps replayed back
  to back, the loss read at the end), the host's time in the step's Python and in the driver's
  submits, and wall minus the summed GPU time (launches, drains, host stalls).
"""
import argparse
import os
import struct
import sys
import time
from collections import defaultdict

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gpt  # bench/gpt.py: the configs, the model, the step
from profile_replay import TimedSubmits  # bench/profile_replay.py
import webgrad as wg
from webgrad import nn
from webgrad.backends.webgpu.runtime import PARAMS_BYTES

# a product's first parameter words (kernels/matmul.py's matmul_params: m, n, k, split_k lead every block)
_MATMUL_HEAD = struct.Struct("<4I")


class ShapedProfile(wg.profiler.profile):
    """webgrad.profiler.profile that also notes each dispatch's shape, in the order of its events."""

    def __init__(self, sizes):
        super().__init__()
        self.sizes, self.shapes = sizes, []

    def submit(self, params, new_bind_groups, dispatches):
        handles_of = {group: key[1] for key, group in self.runtime.bind_groups.ids.items()}
        super().submit(params, new_bind_groups, dispatches)
        keys = {handle: key for key, handle in self.runtime._pipelines.items()}
        for pipeline, group, offset, grid in dispatches:
            self.shapes.append(describe(keys[pipeline], params[offset:offset + PARAMS_BYTES], grid,
                                        handles_of.get(group, ()), self.sizes))


def describe(key, block, grid, handles, sizes):
    """A dispatch's shape: a product's M x N x K, K pieces and tiles (its key's next part), else the
    words of its output buffer (the first bound; a pool size class, so rounded up); and its grid."""
    grid = "grid " + "x".join(map(str, grid))
    if key[0] == "matmul":
        m, n, k, per_piece = _MATMUL_HEAD.unpack_from(block)   # split_k: K per piece
        pieces = f" in {-(-k // per_piece)}" if per_piece and per_piece < k else ""
        return f"{m}x{n}x{k}{pieces} tiles {'x'.join(map(str, key[1]))} {grid}"
    out = sizes.get(handles[0]) if handles else None
    return grid + (f", out {out // 4:,}" if out else "")


def build(dims):
    n_layer, n_head, n_embd, block, batch = dims
    config = nn.GPTConfig(block_size=block, vocab_size=gpt.VOCAB, n_layer=n_layer, n_head=n_head, n_embd=n_embd)
    rng = np.random.default_rng(0)
    ids = rng.integers(0, gpt.VOCAB, size=1 << 20, dtype=np.int32)
    table = rng.integers(0, ids.size - block - 1, size=(64, batch), dtype=np.int32)
    data, offsets = wg.tensor(ids, device="webgpu"), wg.tensor(table, device="webgpu")
    model, opt = gpt.webgrad_model(config)
    train = wg.jit(gpt.webgrad_train(model, opt, data))
    for i in range(3):   # eager, recorded, replayed (the matmul tuner times its shapes in the first)
        train(offsets[i]).item()
    return train, offsets


def wall(train, offsets, steps):
    """Per replayed step: wall seconds, seconds in the step's Python, of which in submits; submits."""
    runtime = wg.get_backend("webgpu").runtime
    timed = runtime.driver = TimedSubmits(runtime.driver)
    python = 0.0
    try:
        start = time.perf_counter()
        for i in range(steps):
            t = time.perf_counter()
            loss = train(offsets[i % offsets.shape[0]])
            python += time.perf_counter() - t
        loss.item()
        seconds = time.perf_counter() - start
    finally:
        runtime.driver = timed._driver
    return seconds / steps, python / steps, timed.seconds / steps, timed.count / steps


def gpu(train, offsets, steps):
    """The profile of `steps` replayed steps: (rows by (kernel, shape), rows by family), us a step each."""
    (program,) = train._programs.values()
    sizes = {s.handle: s.nbytes for s in program.recording.storages}
    with ShapedProfile(sizes) as prof:
        for i in range(steps):
            train(offsets[i % offsets.shape[0]])
    by_shape, by_family = defaultdict(lambda: [0, 0.0]), defaultdict(lambda: [0, 0.0])
    for event, shape in zip(prof.events, prof.shapes):
        for row in (by_shape[event.name, shape], by_family[event.family]):
            row[0] += 1
            row[1] += event.ns / 1000
    per_step = {key: (count / steps, us / steps) for key, (count, us) in by_shape.items()}
    families = {key: (count / steps, us / steps) for key, (count, us) in by_family.items()}
    return per_step, families, prof.measure


def torch_profile(dims, steps):
    """PyTorch's kernels over `steps` eager steps of the same model (torch.profiler), for comparison."""
    import torch
    n_layer, n_head, n_embd, block, batch = dims
    config = nn.GPTConfig(block_size=block, vocab_size=gpt.VOCAB, n_layer=n_layer, n_head=n_head, n_embd=n_embd)
    rng = np.random.default_rng(0)
    ids = torch.from_numpy(rng.integers(0, gpt.VOCAB, size=1 << 20)).to(gpt.TORCH_DEVICE)
    table = torch.from_numpy(rng.integers(0, ids.numel() - block - 1, size=(64, batch))).to(gpt.TORCH_DEVICE)
    step = gpt.torch_step(*gpt.torch_model(gpt.webgrad_model(config)[0]), ids, table)
    for i in range(3):
        step(i).item()
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        for i in range(steps):
            step(i)
        step(steps).item()
    print(f"PyTorch, {steps + 1} eager steps (torch.profiler; divide by {steps + 1} for a step):")
    by = "self_cuda_time_total" if gpt.TORCH_DEVICE == "cuda" else "self_cpu_time_total"
    print(prof.key_averages().table(sort_by=by, row_limit=30, max_name_column_width=60))


def table(title, rows, total, limit):
    print(f"{title:<58} {'calls':>6} {'GPU ms':>8} {'share':>6}")
    ordered = sorted(rows.items(), key=lambda kv: -kv[1][1])
    for key, (calls, us) in ordered[:limit]:
        label = key if isinstance(key, str) else f"{key[0]} {key[1]}"
        print(f"{label[:58]:<58} {calls:6.1f} {us / 1000:8.3f} {100 * us / total:5.1f}%")
    rest = ordered[limit:]
    if rest:
        us = sum(r[1][1] for r in rest)
        print(f"{f'({len(rest)} more)':<58} {sum(r[1][0] for r in rest):6.1f} {us / 1000:8.3f} {100 * us / total:5.1f}%")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="large", choices=sorted(gpt.CONFIGS))
    parser.add_argument("--small", action="store_true", help="bench/gpt.py's tiny configs (software adapters)")
    parser.add_argument("--steps", type=int, default=3, help="replayed steps profiled")
    parser.add_argument("--wall-steps", type=int, default=None, help="replayed steps timed (default 30; --small 3)")
    parser.add_argument("--torch", action="store_true", help="also profile PyTorch's step (torch.profiler)")
    parser.add_argument("--rows", type=int, default=40, help="rows of the per-shape table")
    args = parser.parse_args(argv)
    runtime = wg.get_backend("webgpu").runtime
    dims = (gpt.SMALL_CONFIGS if args.small else gpt.CONFIGS)[args.config]
    print(f"webgrad on {runtime.driver.info['name']}; {args.config}{' (small)' if args.small else ''}: "
          "{} layers, {} heads, {} wide, block {}, batch {}".format(*dims), flush=True)
    train, offsets = build(dims)
    (program,) = train._programs.values()
    step, python, submits, count = wall(train, offsets, args.wall_steps or (3 if args.small else 30))
    shapes, families, measure = gpu(train, offsets, args.steps)
    total = sum(us for _, us in families.values())
    table("kernel, shape", shapes, total, args.rows)
    print()
    table("family", families, total, len(families))
    print(f"\nGPU time per step (summed, {measure}): {total / 1000:.3f} ms over "
          f"{sum(c for c, _ in families.values()):.0f} dispatches ({len(program.recording.dispatches)} recorded)")
    print(f"wall per replayed step: {step * 1e3:.3f} ms ({dims[3] * dims[4] / step:,.0f} tok/s); "
          f"wall - GPU sum {step * 1e3 - total / 1000:.3f} ms; host: {python * 1e3:.3f} ms in the step's Python, "
          f"{submits * 1e3:.3f} ms of it in {count:.1f} submits")
    tuner = wg.get_backend("webgpu").matmul_tuner
    for shape_class, times in tuner.timings.items():
        best = sorted(times.items(), key=lambda kv: kv[1])[:3]
        print(f"tuned {shape_class}: " + ", ".join(f"{'x'.join(map(str, t))} in {s} {sec * 1e6:.0f} us"
                                                   for (t, s), sec in best))
    if args.torch:
        torch_profile(dims, args.steps)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
