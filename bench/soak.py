"""Memory soak: train an MLP with Adam on shuffled batches for many steps on the webgpu device and
print the buffer figures as it goes. After warm-up, live_bytes must stay flat: a number that grows
with the steps is a leak (tests/test_memory.py asserts the same on a shorter run).

    python bench/soak.py [--steps 10000] [--every 1000] [--jit]
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "py"))

import webgrad as wg
from webgrad import nn, optim

WARMUP = 100   # steps before the reference figures: every batch shape and Adam's state exist by then


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--every", type=int, default=1000, help="print the figures every this many steps")
    parser.add_argument("--jit", action="store_true", help="replay the step with wg.jit")
    args = parser.parse_args()

    wg.manual_seed(0)
    n, features, classes = 2048, 16, 4
    x_all = wg.randn(n, features, device="webgpu")
    labels = (x_all[:, :classes] * 3).argmax(1)       # a learnable rule
    loader = wg.data.DataLoader(wg.data.TensorDataset(x_all, labels), batch_size=100, shuffle=True)
    model = nn.Sequential(nn.Linear(features, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(),
                          nn.Linear(128, classes)).to("webgpu")
    opt = optim.Adam(model.parameters(), lr=3e-3)

    def train_step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    step_fn = wg.jit(train_step) if args.jit else train_step
    driver = wg.get_backend("webgpu").runtime.driver
    print(f"webgpu on {wg.get_backend('webgpu').info['name']}; {args.steps} steps"
          f"{' (wg.jit)' if args.jit else ''}, batches of 100 (the last of an epoch 48)")
    header = f"{'step':>6} {'loss':>7} {'live_buffers':>12} {'live_bytes':>11} {'pool_bytes':>11} " \
             f"{'peak_bytes':>11} {'gpu_buffers':>11} {'bind_groups':>11} {'ms/step':>8}"
    print(header)
    step, start, warm = 0, time.perf_counter(), None
    while step < args.steps:
        for x, y in loader:
            loss = step_fn(x, y)
            step += 1
            if step == WARMUP or step % args.every == 0 or step == args.steps:
                value = loss.item()   # waits for the GPU, so the time per step is real
                wg.synchronize()
                s = wg.memory_stats("webgpu")
                ms = (time.perf_counter() - start) * 1000 / step
                print(f"{step:>6} {value:>7.4f} {s['live_buffers']:>12} {s['live_bytes']:>11} {s['pool_bytes']:>11} "
                      f"{s['peak_bytes']:>11} {len(driver._buffers):>11} {len(driver._bind_groups):>11} {ms:>8.2f}",
                      flush=True)
                if step == WARMUP:
                    warm = s
            if step == args.steps:
                break
    s = wg.memory_stats("webgpu")
    grew = s["live_bytes"] - warm["live_bytes"]
    print(f"live_bytes after warm-up {warm['live_bytes']}, at the end {s['live_bytes']} ({grew:+d}); "
          f"peak {s['peak_bytes']}; pool {s['pool_bytes']} of at most {s['pool_limit']}")
    return 1 if grew > 0 else 0


if __name__ == "__main__":
    sys.exit(main())
