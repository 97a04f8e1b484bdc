"""float16 matrix products: webgrad's f16 kernel (f16 operands, f32 sums, f16 result) next to its f32
one, and PyTorch's f16 and f32 (cuBLAS, TF32 off) on the same GPU, in one run.

Prints TFLOP/s of each at n x n x n, each webgrad product's error (its largest, over the largest
exact value) against a float64 product of the same inputs (rounded to the product's dtype), and the
tiles and K pieces the matmul tuner chose for each. Half a second of products comes first, and each
rate is the best of --rounds rounds taken in turn: measured once each, in a fixed order right after
the tuner's timings, f16 1024^3 ran at 0.32-0.71 of f32 in three calls while the same kernel timed
alone ran at f32's speed (bench/NOTES.md). --candidates times every tiling the tuner tries, in both
dtypes, with vec4 loads and without. Run on the lent GPU (../shared/DEVICE.md).
"""
import argparse

import numpy as np
from matmul import timed

import webgrad as wg
from webgrad.backends.webgpu.kernels.matmul import _layout, _strided_operand


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1024,4096")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--candidates", default="", help="sizes at which to time each of the tuner's candidate "
                        "tilings in both dtypes, with vec4 loads and without")
    args = parser.parse_args()
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    backend = wg.backends.get_backend("webgpu")
    sync = backend.sync
    warm = wg.randn(2048, 2048, device="webgpu")
    timed(lambda: warm @ warm, sync, 0.5)
    print(f"adapter: {wg.backends.get_backend('webgpu').info['name']}; torch {torch.__version__} on "
          f"{torch.cuda.get_device_name()}")
    print(f"{'n':>6} {'wg f16':>9} {'wg f32':>9} {'torch f16':>10} {'torch f32':>10}  {'f16 / f32':>9}  "
          f"{'wg f16 err':>10}")
    for n in map(int, args.sizes.split(",")):
        a = np.random.default_rng(n).standard_normal((2, n, n), dtype=np.float32)
        flops = 2 * n ** 3
        products, errors = {}, {}   # name -> (product, its wait)
        for dtype in (wg.float16, wg.float32):
            x, y = (wg.tensor(m, device="webgpu").to(dtype) for m in a)
            exact = x.numpy().astype(np.float64) @ y.numpy().astype(np.float64)
            errors[dtype] = float(np.abs((x @ y).numpy().astype(np.float64) - exact).max() / np.abs(exact).max())
            products[f"wg {dtype.name}"] = (lambda x=x, y=y: x @ y), sync
        for dtype in (torch.float16, torch.float32):
            x, y = (torch.tensor(m, device="cuda").half().to(dtype) for m in a)
            products[f"torch {dtype}"] = (lambda x=x, y=y: x @ y), torch.cuda.synchronize
        rates = dict.fromkeys(products, 0.0)
        for _ in range(args.rounds):
            for name, (product, wait) in products.items():
                rates[name] = max(rates[name], flops / timed(product, wait)[0] / 1e12)
        wg16, wg32, t16, t32 = rates.values()
        chosen = {memo[4][-1]: choice for memo, choice in backend.matmul_tuner.chosen.items() if memo[:3] == (n, n, n)}
        print(f"{n:>6} {wg16:>9.2f} {wg32:>9.2f} {t16:>10.2f} {t32:>10.2f}  {wg16 / wg32:>9.2f}  "
              f"{errors[wg.float16]:>10.1e}  (wg f32 err {errors[wg.float32]:.1e}; tiles, pieces: {chosen})")
    for n in map(int, filter(None, args.candidates.split(","))):
        candidate_table(backend, n)


def candidate_table(backend, n):
    """TFLOP/s of n^3 at each (tiles, pieces) the tuner tries, f16 and f32, with the operands read
    as vec4s (as chosen) and one element at a time."""
    from webgrad.backends.webgpu.kernels.matmul_tuning import matmul_splits, matmul_tiles
    prior = matmul_tiles(n, n, 1, False, backend.runtime.limits["max_compute_workgroup_storage_size"])
    prior = (prior, matmul_splits(n, n, n, 1, prior, False))
    a = np.random.default_rng(n).standard_normal((2, n, n), dtype=np.float32)
    print(f"n={n}: TFLOP/s per candidate (prior {prior}); columns f16 vec4, f16 scalar, f32 vec4, f32 scalar")
    for key, times in backend.matmul_tuner.timings.items():
        if key.startswith(f"{n}x{n}x{n}x1 "):
            best = sorted(times.items(), key=lambda kv: kv[1])[:3]
            print(f"  the tuner's best at {key}: " + ", ".join(f"{tuple(t)} x{s} {us * 1e6:.0f} us" for (t, s), us in best))
    for tiles, splits in backend.matmul_tuner.candidates(n, n, n, 1, prior):
        rates = []
        for dtype in (wg.float16, wg.float32):
            x, y = (wg.tensor(m, device="webgpu").to(dtype) for m in a)
            for wide in (True, False):
                ops = [_strided_operand(t._view, side)._replace(wide=wide) for t, side in ((x, "a"), (y, "b"))]
                layouts = tuple(_layout(o) for o in ops)

                def run():
                    backend._tiled_product(*ops, layouts, n, n, n, [], None, None, dtype, tiles, splits)
                rates.append(2 * n ** 3 / timed(run, backend.sync, 0.1)[0] / 1e12)
        print(f"  {tuple(tiles)} x{splits}: " + " ".join(f"{r:7.2f}" for r in rates), flush=True)


if __name__ == "__main__":
    main()
