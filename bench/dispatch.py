"""Dispatch overhead and small-model training speed.

Prints, in one run:
  - CPU microseconds per eager elementwise op on webgpu (encode and bookkeeping; the GPU is
    not waited for, except once at the end of each timed batch to keep the queue bounded),
    next to PyTorch's eager op on CPU;
  - the same op's CPU time split into Python bookkeeping and encoding at the flush, timed with
    the GPU idle, without and with autograd (on a software adapter such as lavapipe the kernels
    run on the same CPU cores, so there the first figure is mostly their time, not ours);
  - milliseconds per XOR training step (2-8-8-2 MLP, Adam, batch 64) on webgpu, on cpu, and
    in PyTorch on CPU, with the ratios.
Goal (issue 2, to beat later on a real GPU): at most 10 microseconds of CPU time per eager op;
issue 13: at most 5 microseconds.
"""
import argparse
import statistics
import time

import webgrad as wg
from webgrad.backends.webgpu.runtime import MAX_QUEUED


def best_of(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times)


def eager_op_us(ops):
    x = wg.randn(256, device="webgpu")
    y = wg.randn(256, device="webgpu")
    (x + y).tolist()  # compile the kernel and warm the pool

    def run():
        z = x
        for _ in range(ops):
            z = z + y
        wg.get_backend("webgpu").runtime.flush()
    best, _ = best_of(run, 5)
    wg.synchronize()
    return best / ops * 1e6


# the eager ops whose CPU time is split: a tensor op, a unary op, an op with a Python scalar
SPLIT_OPS = {"a + b": lambda a, b: a + b, "a.relu()": lambda a, b: a.relu(), "a * 2": lambda a, b: a * 2}


def eager_op_split_us(batches, requires_grad, op=SPLIT_OPS["a + b"]):
    """(us per op in Python, us per op encoding at the flush), each the best of `batches` batches
    short enough not to flush on their own, the GPU waited for between them, outside the timing
    (on a host shared with other work, more batches find a quiet one more surely)."""
    runtime = wg.get_backend("webgpu").runtime
    batch = MAX_QUEUED - 1
    x = wg.randn(256, device="webgpu", requires_grad=requires_grad)
    y = wg.randn(256, device="webgpu")
    op(x, y).detach().tolist()
    python = flush = float("inf")
    for _ in range(batches):
        wg.synchronize()
        start = time.perf_counter()
        z = x
        for _ in range(batch):
            z = op(z, y)
        del z   # (with autograd: its graph goes, as after a training step)
        queued = time.perf_counter()
        runtime.flush()
        end = time.perf_counter()
        python, flush = min(python, queued - start), min(flush, end - queued)
    wg.synchronize()
    return python / batch * 1e6, flush / batch * 1e6


def torch_eager_op_us(ops, device="cpu"):
    import torch
    x, y = torch.randn(256, device=device), torch.randn(256, device=device)

    def run():
        z = x
        for _ in range(ops):
            z = z + y
    run()
    best, _ = best_of(run, 5)
    if device == "cuda":
        torch.cuda.synchronize()
    return best / ops * 1e6


def xor_batches(steps, batch):
    wg.manual_seed(0)
    split = wg.data.xor(n=512, noise=0.0, seed=0, device="cpu")
    x, y = split[0].numpy(), split[1].numpy()
    return [(x[(i * batch) % 512:(i * batch) % 512 + batch], y[(i * batch) % 512:(i * batch) % 512 + batch])
            for i in range(steps)]


def webgrad_step_ms(device, batches):
    wg.manual_seed(0)
    model = wg.nn.Sequential(wg.nn.Linear(2, 8), wg.nn.Tanh(), wg.nn.Linear(8, 8), wg.nn.Tanh(),
                             wg.nn.Linear(8, 2)).to(device)
    opt = wg.optim.Adam(model.parameters(), lr=0.03)
    data = [(wg.tensor(x, device=device), wg.tensor(y, device=device)) for x, y in batches]

    def run():
        for x, y in data:
            opt.zero_grad()
            loss = wg.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
        loss.item()  # one readback at the end, as a training loop that logs rarely does
    run()
    best, _ = best_of(run, 3)
    return best / len(data) * 1e3


def torch_step_ms(batches, device="cpu"):
    import torch
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(2, 8), torch.nn.Tanh(), torch.nn.Linear(8, 8), torch.nn.Tanh(),
                                torch.nn.Linear(8, 2)).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=0.03)
    data = [(torch.tensor(x, device=device), torch.tensor(y, device=device).long()) for x, y in batches]

    def run():
        for x, y in data:
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
        loss.item()
    run()
    best, _ = best_of(run, 3)
    return best / len(data) * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--split-batches", type=int, default=100,
                        help="batches of 31 ops the split's figures are the best of")
    args = parser.parse_args()
    backend = wg.get_backend("webgpu")
    print(f"adapter: {backend.info['name']} ({backend.info['backend']}, {backend.info['adapter_type']})")

    ours, theirs = eager_op_us(args.ops), torch_eager_op_us(args.ops)
    print(f"eager elementwise op, CPU time: webgpu {ours:.1f} us, PyTorch cpu {theirs:.1f} us "
          f"(ratio {ours / theirs:.1f}x; goal <= 10 us: {'met' if ours <= 10 else 'not met'})")
    for name, op in SPLIT_OPS.items():
        split = [(grad, *eager_op_split_us(args.split_batches, grad, op)) for grad in (False, True)]
        print(f"  {name}: its CPU time with the GPU idle: " + "; ".join(
            f"{'with' if grad else 'no'} autograd {python + flush:.1f} us ({python:.1f} Python, {flush:.1f} flush)"
            for grad, python, flush in split))

    batches = xor_batches(args.steps, 64)
    gpu, cpu, torch_cpu = webgrad_step_ms("webgpu", batches), webgrad_step_ms("cpu", batches), torch_step_ms(batches)
    print(f"XOR training step (2-8-8-2, Adam, batch 64): webgpu {gpu:.2f} ms, cpu {cpu:.2f} ms, "
          f"PyTorch cpu {torch_cpu:.2f} ms")
    print(f"ratios vs PyTorch cpu: webgpu {gpu / torch_cpu:.2f}x, cpu {cpu / torch_cpu:.2f}x (lower is faster)")

    import torch
    if torch.cuda.is_available():   # on a machine with a GPU: the eager peer on the same GPU
        cuda_op, cuda_step = torch_eager_op_us(args.ops, "cuda"), torch_step_ms(batches, "cuda")
        print(f"PyTorch cuda ({torch.cuda.get_device_name()}): eager op {cuda_op:.1f} us, XOR step "
              f"{cuda_step:.2f} ms; ratios webgpu/cuda: op {ours / cuda_op:.2f}x, step {gpu / cuda_step:.2f}x")


if __name__ == "__main__":
    main()
