"""f32 matrix products: webgrad's WGSL kernel next to PyTorch (cuBLAS with TF32 off) on one GPU.

Prints, per shape, TFLOP/s of each and the ratio webgrad / PyTorch. Every shape is first checked
against PyTorch's product on fresh random inputs. `--sweep` also times every tile configuration
(shaders/matmul.wgsl) at each shape, which is how matmul_kernels.matmul_tiles was chosen.
Run on the lent GPU (../shared/DEVICE.md): webgrad over Vulkan, PyTorch over CUDA, same process.
"""
import argparse
import time

import numpy as np

import webgrad as wg
from webgrad.backends.webgpu.kernels import matmul as matmul_kernels

# (batch, m, k, n): squares, an MLP step's products, and the CNN's second convolution as im2col
# products (forward, input gradient, weight gradient) at batch 128
SHAPES = [(1, s, s, s) for s in (512, 1024, 2048, 4096)] + [
    (1, 128, 784, 512), (1, 128, 512, 10), (1, 784, 128, 512), (1, 128, 784, 128),
    (128, 64, 288, 196), (128, 288, 64, 196), (128, 64, 196, 288)]
CONFIGS = [matmul_kernels.MatmulTiles(16, 16, 8, 8, 8), matmul_kernels.MatmulTiles(16, 16, 8, 8, 16),
           matmul_kernels.MatmulTiles(16, 16, 4, 4, 16), matmul_kernels.MatmulTiles(8, 8, 4, 4, 16),
           matmul_kernels.MatmulTiles(8, 32, 4, 4, 8), matmul_kernels.MatmulTiles(16, 8, 8, 8, 8),
           matmul_kernels.MatmulTiles(16, 16, 8, 16, 8), matmul_kernels.MatmulTiles(16, 16, 16, 8, 8),
           matmul_kernels.MatmulTiles(32, 8, 4, 8, 8)]


def timed(fn, sync, min_seconds=0.3):
    """Seconds per call: repeat fn until min_seconds pass, GPU work included (sync at both ends)."""
    fn()
    sync()
    calls, start = 0, time.perf_counter()
    while True:
        for _ in range(4):
            fn()
        calls += 4
        sync()
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return elapsed / calls


def webgrad_seconds(a, b):
    return timed(lambda: (a @ b)._storage, wg.synchronize)


def main():
    import torch
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", action="store_true", help="time every tile configuration")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    info = wg.get_backend("webgpu").info
    print(f"webgrad on {info['name']} ({info['backend']}), PyTorch {torch.__version__} on "
          f"{torch.cuda.get_device_name()}, f32, TF32 off")
    rng = np.random.default_rng(0)
    print(f"{'batch x m x k x n':>22} {'webgrad TFLOP/s':>16} {'cuBLAS TFLOP/s':>15} {'ratio':>6}   tiles")
    for batch, m, k, n in SHAPES:
        a_np = rng.standard_normal((batch, m, k), dtype=np.float32)
        b_np = rng.standard_normal((batch, k, n), dtype=np.float32)
        a, b = wg.tensor(a_np, device="webgpu"), wg.tensor(b_np, device="webgpu")
        ta, tb = torch.from_numpy(a_np).cuda(), torch.from_numpy(b_np).cuda()
        expected = (ta.double() @ tb.double()).cpu().numpy()
        error = np.abs((a @ b).numpy() - expected).max() / np.abs(expected).max()
        if error > 1e-5:
            raise SystemExit(f"{batch}x{m}x{k}x{n}: webgrad's product is off by {error:.2e} (relative to its max)")
        flops = 2 * batch * m * n * k
        theirs = flops / timed(lambda: ta @ tb, torch.cuda.synchronize) / 1e12
        chosen = matmul_kernels.matmul_tiles(m, n, batch, False,
                                      wg.get_backend("webgpu").runtime.limits["max_compute_workgroup_storage_size"])
        ours = flops / webgrad_seconds(a, b) / 1e12
        print(f"{f'{batch}x{m}x{k}x{n}':>22} {ours:16.2f} {theirs:15.2f} {ours / theirs:6.3f}   {tuple(chosen)}")
        if args.sweep:
            choose = matmul_kernels.matmul_tiles
            for tiles in CONFIGS:
                matmul_kernels.matmul_tiles = lambda m_, n_, batch_, software, limit, tiles=tiles: tiles
                error = np.abs((a @ b).numpy() - expected).max() / np.abs(expected).max()
                tflops = flops / webgrad_seconds(a, b) / 1e12
                print(f"{'':>22} {tflops:16.2f} {'':>15} {tflops / theirs:6.3f}   {tuple(tiles)}"
                      f"{'' if error <= 1e-5 else f'  WRONG: off by {error:.1e}'}")
            matmul_kernels.matmul_tiles = choose


if __name__ == "__main__":
    main()
