"""Where a replayed MNIST training step's wall time goes on the host, natively:
python bench/profile_replay.py [--models mlp,cnn] [--steps 400] [--read-every 10].

Runs bench/mnist.py's replayed step (batch 128, Adam, the batch gathered on the device from a slice
of a permutation) and reads the loss every --read-every steps, as bench/mnist.py does. Prints per
step: the wall time; the host's time in the step's Python (the jit's call: input copies, queueing
the recording, the outputs), of which in the driver's submits (encoding the pass, submitting it);
and the time blocked in the reads (the GPU finishing what was queued, and the readback). Where the
step's Python is near the wall time, the host is what bounds the step; where the reads are, the GPU.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))

import webgrad as wg
from webgrad import nn


class TimedSubmits:
    """The driver, with its submits counted and their host time summed."""

    def __init__(self, driver):
        self._driver, self.seconds, self.count = driver, 0.0, 0

    def submit(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return self._driver.submit(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start
            self.count += 1

    def __getattr__(self, name):
        return getattr(self._driver, name)


def profile(name, batch_size, steps, read_every):
    wg.manual_seed(0)
    data = wg.data.mnist("train", device="webgpu", limit=batch_size * 64)
    model = nn.MODELS[name](device="webgpu")
    opt = wg.optim.Adam(model.parameters(), lr=1e-3)

    @wg.jit
    def train(idx):
        x, y = data[idx]
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    order = wg.randperm(len(data), device="webgpu")
    windows = [order[i * batch_size:(i + 1) * batch_size] for i in range(len(data) // batch_size)]
    for i in range(3):
        train(windows[i]).item()
    runtime = wg.get_backend("webgpu").runtime
    timed = runtime.driver = TimedSubmits(runtime.driver)
    python = submits = reads = 0.0
    start = time.perf_counter()
    try:
        for i in range(steps):
            t, submitted = time.perf_counter(), timed.seconds
            loss = train(windows[i % len(windows)])
            python += time.perf_counter() - t
            submits += timed.seconds - submitted
            if (i + 1) % read_every == 0:
                t = time.perf_counter()
                loss.item()
                reads += time.perf_counter() - t
        wall = time.perf_counter() - start
    finally:
        runtime.driver = timed._driver
    (program,) = train._programs.values()
    us = 1e6 / steps
    print(f"{name}: {len(program.recording.dispatches)} recorded dispatches; per step {wall * us:.0f} us wall, "
          f"{python * us:.0f} us in the step's Python (of which {submits * us:.0f} us in submits), "
          f"{reads * us:.0f} us blocked in reads (one every {read_every} steps)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="mlp,cnn")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--read-every", type=int, default=10)
    args = parser.parse_args(argv)
    print(f"adapter: {wg.get_backend('webgpu').runtime.driver.info['name']}")
    for name in args.models.split(","):
        profile(name, args.batch_size, args.steps, args.read_every)


if __name__ == "__main__":
    main()
