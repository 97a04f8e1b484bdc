"""float16 matrix products: webgrad's f16 kernel (f16 operands, f32 sums, f16 result) next to its f32
one, and PyTorch's f16 and f32 (cuBLAS, TF32 off) on the same GPU, in one run.

Prints TFLOP/s of each at n x n x n, each webgrad product's error (its largest, over the largest
exact value) against a float64 product of the same inputs (rounded to the product's dtype), and the
tiles and K pieces the matmul tuner chose for each. Half a second of products comes first: the
first run's first size (1024, at a third of f32's speed) was the process's first GPU work. Run on the lent GPU (../shared/DEVICE.md).
"""
import argparse

import numpy as np
from matmul import timed

import webgrad as wg


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1024,4096")
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
        rates, errors = {}, {}
        for dtype in (wg.float16, wg.float32):
            x, y = (wg.tensor(m, device="webgpu").to(dtype) for m in a)
            exact = x.numpy().astype(np.float64) @ y.numpy().astype(np.float64)
            errors[dtype] = float(np.abs((x @ y).numpy().astype(np.float64) - exact).max() / np.abs(exact).max())
            rates[f"wg {dtype.name}"] = flops / timed(lambda: x @ y, sync)[0] / 1e12
        for dtype in (torch.float16, torch.float32):
            x, y = (torch.tensor(m, device="cuda").half().to(dtype) for m in a)
            rates[f"torch {dtype}"] = flops / timed(lambda: x @ y, torch.cuda.synchronize)[0] / 1e12
        wg16, wg32, t16, t32 = rates.values()
        chosen = {memo[4][-1]: choice for memo, choice in backend.matmul_tuner.chosen.items() if memo[:3] == (n, n, n)}
        print(f"{n:>6} {wg16:>9.2f} {wg32:>9.2f} {t16:>10.2f} {t32:>10.2f}  {wg16 / wg32:>9.2f}  "
              f"{errors[wg.float16]:>10.1e}  (wg f32 err {errors[wg.float32]:.1e}; tiles, pieces: {chosen})")


if __name__ == "__main__":
    main()
