"""Where a replayed MNIST training step's GPU time goes, natively: python bench/profile_step.py [--models cnn].

Records bench/mnist.py's step (batch 128, Adam) with wg.jit, then times the whole recording and
each of its dispatches on its own, replayed `--repeats` times back to back (so a kernel's figure
includes the drain between dependent dispatches, as in the step). Prints the dispatches in step
order with their kernel and grid, and the sum next to the whole step's time.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))

import webgrad as wg
from webgrad import nn
from webgrad.backends.webgpu.kernels.epilogue import StoreEpilogue
from webgrad.backends.webgpu.runtime import PARAMS_BYTES, Recording


def recorded_step(name, batch_size):
    wg.manual_seed(0)
    x = wg.rand(batch_size, 1, 28, 28, device="webgpu")
    y = (wg.rand(batch_size, device="webgpu") * 10).int()
    model = nn.MODELS[name](device="webgpu")
    opt = wg.optim.Adam(model.parameters(), lr=1e-3)

    @wg.jit
    def step(x, y):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    for _ in range(3):
        step(x, y).item()
    program = next(iter(step._programs.values()))
    return program.runtime, program.recording


def timed(runtime, recording, repeats):
    runtime.replay(recording)
    runtime.sync()
    start = time.perf_counter()
    for _ in range(repeats):
        runtime.replay(recording)
    runtime.sync()
    return (time.perf_counter() - start) / repeats


def alone(recording, i):
    """A recording of dispatch i only (its parameter block included)."""
    one = Recording()
    one.dispatches = [recording.dispatches[i]]
    one.params = recording.params[i * PARAMS_BYTES:(i + 1) * PARAMS_BYTES]
    return one


def _shown(part):
    """A pipeline key's part as printed: an epilogue by what it binds, not its WGSL."""
    if isinstance(part, StoreEpilogue):
        return f"epilogue({len(part.buffers)} buffers{', result stored' if part.stores_result else ''})"
    return part


def profile(name, batch_size, repeats):
    runtime, recording = recorded_step(name, batch_size)
    labels = {handle: key for key, handle in runtime._pipelines.items()}
    whole = timed(runtime, recording, repeats)
    print(f"{name}: {len(recording.dispatches)} dispatches, {whole * 1e6:.0f} us per replayed step")
    total = 0.0
    for i, (pipeline, _, grid) in enumerate(recording.dispatches):
        t = timed(runtime, alone(recording, i), repeats)
        total += t
        key = labels[pipeline]
        print(f"  {i:3d} {t * 1e6:8.1f} us  {str(grid):18s} {key[0]:14s} {tuple(map(_shown, key[1:]))}")
    print(f"  sum of the dispatches alone: {total * 1e6:.0f} us")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="mlp,cnn")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args(argv)
    print(f"adapter: {wg.get_backend('webgpu').runtime.driver.info['name']}")
    for name in args.models.split(","):
        profile(name, args.batch_size, args.repeats)


if __name__ == "__main__":
    main()
