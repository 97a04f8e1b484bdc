"""In-place ops' CPU cost on webgpu, next to the out-of-place op `x + y` measured in the same run.

Prints, per op, the microseconds of Python an op (the GPU idle, the flush outside the timing; each
the best of --batches batches short enough not to flush on their own, as in bench/dispatch.py's split)
and its ratio to `x + y`'s:
  - without a graph: under no_grad, on a leaf that requires grad (an optimizer's `p.add_`);
  - with a graph: on a non-leaf `w * 1.0`, each write recorded.
Goal: an in-place op as cheap as the out-of-place one (ratio 1).
"""
import argparse
import time

import webgrad as wg
from webgrad.backends.webgpu.runtime import MAX_QUEUED

OPS = {
    "x.add_(y)": lambda x, y: x.add_(y),
    "x.mul_(2)": lambda x, y: x.mul_(2),
    "p.add_(g, alpha=-0.1)": lambda x, y: x.add_(y, alpha=-0.1),
    "x.zero_()": lambda x, y: x.zero_(),
}
PEER = "x + y"


def python_us(op, graph, batches):
    """us of Python per op: the best of `batches` batches of ops, few enough that their dispatches (up
    to two an op: a write reads x's old values from a copy) never fill the queue (a flush is not timed)."""
    runtime = wg.get_backend("webgpu").runtime
    batch = MAX_QUEUED // 2 - 1
    w = wg.randn(256, device="webgpu", requires_grad=True)
    y = wg.randn(256, device="webgpu")
    best = float("inf")
    for _ in range(batches):
        wg.synchronize()
        x = w * 1.0 if graph else w
        with wg.set_grad_enabled(graph):
            start = time.perf_counter()
            for _ in range(batch):
                op(x, y)
            best = min(best, time.perf_counter() - start)
        del x
        runtime.flush()
    wg.synchronize()
    return best / batch * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=200, help="batches each figure is the best of")
    args = parser.parse_args()
    for graph in (False, True):
        peer = python_us(lambda x, y: x + y, graph, args.batches)
        print(f"{'with' if graph else 'without'} a graph: {PEER} {peer:.2f} us")
        for name, op in OPS.items():
            us = python_us(op, graph, args.batches)
            print(f"  {name:24s} {us:6.2f} us  {us / peer:5.2f}x {PEER}")


if __name__ == "__main__":
    main()
