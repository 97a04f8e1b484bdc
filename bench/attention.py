"""Causal scaled dot-product attention at small-GPT shapes: webgrad's F.scaled_dot_product_attention
(the fused kernels, one dispatch forward and three backward, or its weights kept, as the backend picks)
next to webgrad's composed path (scores, softmax, product) and PyTorch's on CUDA.

Prints, per (batch, heads, length, head size), milliseconds per forward and per forward + backward
of each (as in a training step: the inputs' .grad cleared before each backward, as zero_grad() does,
on every side, so none times adding into an earlier gradient), and the ratios fused / composed and
fused / PyTorch (above 1: the fused kernel is slower).
Each shape is first checked against PyTorch on fresh random inputs. Run on the lent GPU
(../shared/DEVICE.md): webgrad over Vulkan, PyTorch over CUDA, one process. --blocking and --other
try other tilings of the kernels (kernels/attention.py's BLOCKINGS and OTHER_ROWS), --workgroup-bytes
the tiles of a smaller workgroup memory than the adapter's (16384: the page's); --shapes picks
shapes, as BxHxLxE,...; --profile adds each kernel's GPU time (webgrad.profiler); --keep-weights forces
the op's way (its weights kept, or the fused kernels). --jit instead times forward + backward replayed by
wg.jit three ways (the fused kernels, the weights kept, composed autograd) and each one's kernels.
"""
import argparse

import numpy as np

import webgrad as wg
from webgrad.nn import functional as F
from webgrad.backends.webgpu.kernels import attention as tiling
from webgrad.ops import attention
from webgrad.ops.attention import attention_weights

from conv import timed

SHAPES = [(32, 4, 64, 32), (16, 4, 128, 32), (16, 4, 256, 64), (64, 6, 256, 64), (8, 8, 1024, 64), (4, 8, 2048, 128)]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--blocking", help="the forward's, dkv's and dq's blocks of scores a thread, threads a "
                        "workgroup and slices of the weighed tile, as OWNxOTHERxTHREADSxPARTS each: "
                        "4x4x128x2,4x4x64x1,4x4x64x1 (kernels/attention.py's Blocking)")
    parser.add_argument("--other", help="rows per tile to try, as 32,16")
    parser.add_argument("--shapes", help="BxHxLxE,...")
    parser.add_argument("--workgroup-bytes", type=int,
                        help="size the tiles for this much workgroup memory (16384: the page's), not the adapter's")
    parser.add_argument("--profile", action="store_true", help="then GPU time per kernel (webgrad.profiler)")
    parser.add_argument("--jit", action="store_true", help="instead, forward + backward replayed by wg.jit: the "
                        "fused kernels, the weights kept (ops/attention.py's _KeptWeights) and composed autograd, "
                        "against PyTorch's SDPA, and the GPU time of each replay's kernels")
    parser.add_argument("--keep-weights", choices=("auto", "yes", "no"), default="auto",
                        help="the fused op's way: the backend's choice, its weights kept, or the fused kernels")
    args = parser.parse_args()
    attention.KEEP_WEIGHTS = {"auto": None, "yes": True, "no": False}[args.keep_weights]
    if args.blocking:
        for entry, spec in zip(("forward", "dkv", "dq"), args.blocking.split(",")):
            tiling.BLOCKINGS[entry] = (tiling.Blocking(*(int(n) for n in spec.split("x"))),)
    if args.other:
        tiling.OTHER_ROWS = tuple(int(n) for n in args.other.split(","))
    shapes = [tuple(int(n) for n in s.split("x")) for s in args.shapes.split(",")] if args.shapes else SHAPES
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    backend = wg.get_backend("webgpu")
    limits = backend.runtime.limits
    if args.workgroup_bytes:
        limits["max_compute_workgroup_storage_size"] = min(args.workgroup_bytes, limits["max_compute_workgroup_storage_size"])
    info = backend.info
    print(f"webgrad on {info['name']} ({info['backend']}); PyTorch {torch.__version__}, f32, causal; "
          f"blockings {tiling.BLOCKINGS}, tiles of {tiling.OTHER_ROWS}, "
          f"{limits['max_compute_workgroup_storage_size']} bytes of workgroup memory")
    rng = np.random.default_rng(0)
    if args.jit:
        return compare_replayed(shapes, rng, torch)
    print(f"{'B x H x L x E':>18} {'fwd ms':>8} {'composed':>8} {'torch':>8} {'f/c':>5} {'f/t':>5}   "
          f"{'fwd+bwd':>8} {'composed':>8} {'torch':>8} {'f/c':>5} {'f/t':>5}")
    for b, h, length, e in shapes:
        arrays = [rng.standard_normal((b, h, length, e), dtype=np.float32) for _ in range(4)]
        q, k, v = (wg.tensor(a, device="webgpu", requires_grad=True) for a in arrays[:3])
        tq, tk, tv = (torch.tensor(a, device="cuda", requires_grad=True) for a in arrays[:3])
        grad, tgrad = wg.tensor(arrays[3], device="webgpu"), torch.tensor(arrays[3], device="cuda")

        def fused():
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

        def composed():
            return attention_weights(q, k, is_causal=True) @ v

        def theirs():
            return torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
        fused().backward(grad)
        theirs().backward(tgrad)
        for name, a, t in [("output", fused().detach(), theirs()), ("q grad", q.grad, tq.grad),
                           ("k grad", k.grad, tk.grad), ("v grad", v.grad, tv.grad)]:
            expected = t.detach().cpu().numpy()
            error = np.abs(a.numpy() - expected).max() / max(1.0, np.abs(expected).max())
            if error > 1e-3:
                raise SystemExit(f"{(b, h, length, e)}: {name} is off by {error:.1e}")

        def forward(fn, no_grad):
            def run():
                with no_grad():
                    fn()
            return run

        def both(fn, g):
            def run():
                for x in (q, k, v, tq, tk, tv):
                    x.grad = None
                fn().backward(g)
            return run
        fwd = [timed(forward(fused, wg.no_grad), wg.synchronize), timed(forward(composed, wg.no_grad), wg.synchronize),
               timed(forward(theirs, torch.no_grad), torch.cuda.synchronize)]
        bwd = [timed(both(fused, grad), wg.synchronize), timed(both(composed, grad), wg.synchronize),
               timed(both(theirs, tgrad), torch.cuda.synchronize)]
        print(f"{f'{b}x{h}x{length}x{e}':>18} " + " ".join(f"{t * 1e3:8.3f}" for t in fwd) +
              f" {fwd[0] / fwd[1]:5.2f} {fwd[0] / fwd[2]:5.2f}   " + " ".join(f"{t * 1e3:8.3f}" for t in bwd) +
              f" {bwd[0] / bwd[1]:5.2f} {bwd[0] / bwd[2]:5.2f}", flush=True)
        if args.profile:
            with wg.profiler.profile() as prof:
                for _ in range(10):
                    both(fused, grad)()
            print("    GPU ms per forward + backward: " + "  ".join(
                f"{row.key} {row.gpu_time_total / 1e4:.3f}" for row in prof.key_averages()), flush=True)


def compare_replayed(shapes, rng, torch):
    """Each way's forward + backward replayed by wg.jit (ms per call, then GPU ms by kernel), PyTorch's
    SDPA eager; every way first checked against PyTorch."""
    def sdpa(kept):
        def run(q, k, v):
            attention.KEEP_WEIGHTS = kept
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return run
    ways = {"fused": sdpa(False), "kept weights": sdpa(True),
            "composed": lambda q, k, v: attention_weights(q, k, is_causal=True) @ v}
    for b, h, length, e in shapes:
        arrays = [rng.standard_normal((b, h, length, e), dtype=np.float32) for _ in range(4)]
        inputs = [wg.tensor(a, device="webgpu") for a in arrays]
        tq, tk, tv = (torch.tensor(a, device="cuda", requires_grad=True) for a in arrays[:3])
        tgrad = torch.tensor(arrays[3], device="cuda")

        def theirs():
            for x in (tq, tk, tv):
                x.grad = None
            out = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
            out.backward(tgrad)
            return out
        expected = [t.detach().cpu().numpy() for t in (theirs(), tq.grad, tk.grad, tv.grad)]
        torch_ms = timed(theirs, torch.cuda.synchronize) * 1e3
        print(f"{b}x{h}x{length}x{e}: PyTorch SDPA fwd + bwd {torch_ms:.3f} ms", flush=True)
        for name, way in ways.items():
            def step(q, k, v, grad, way=way):
                q, k, v = (x.detach().requires_grad_() for x in (q, k, v))
                out = way(q, k, v)
                out.backward(grad)
                return out, q.grad, k.grad, v.grad
            replay = wg.jit(step)
            for _ in range(3):
                got = replay(*inputs)
            errors = [np.abs(a.numpy() - x).max() / max(1.0, np.abs(x).max()) for a, x in zip(got, expected)]
            if max(errors) > 1e-3:
                raise SystemExit(f"{(b, h, length, e)} {name}: off by {max(errors):.1e}")
            ms = timed(lambda: replay(*inputs), wg.synchronize) * 1e3
            with wg.profiler.profile() as prof:
                for _ in range(10):
                    replay(*inputs)
                wg.synchronize()
            rows = sorted(prof.key_averages(), key=lambda row: -row.gpu_time_total)
            gpu = sum(row.gpu_time_total for row in rows) / 1e4
            print(f"    {name:>13}: {ms:.3f} ms ({ms / torch_ms:.2f}x PyTorch), GPU {gpu:.3f} ms: " + "  ".join(
                f"{row.key} x{row.count // 10} {row.gpu_time_total / 1e4:.3f}" for row in rows), flush=True)


if __name__ == "__main__":
    main()
