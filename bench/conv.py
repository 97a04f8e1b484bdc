"""Conv2d forward and backward at the MNIST CNN's shapes, and depthwise / grouped ones (MobileNet's
kind): webgrad on webgpu next to cuDNN.

Prints, per layer shape, milliseconds per forward and per forward + backward (input, weight and
bias gradients) of each, and the ratio webgrad / PyTorch (above 1: webgrad is slower). Each
shape is first checked against PyTorch's results on fresh random inputs. Run on the lent GPU
(../shared/DEVICE.md): webgrad over Vulkan, PyTorch over CUDA with cuDNN, one process.
"""
import time

import numpy as np

import webgrad as wg
from webgrad.nn import functional as F

# (batch, in channels, height, width, out channels, groups): nn.mnist_cnn's two convolutions, batch 128,
# then depthwise and grouped ones
SHAPES = [(128, 1, 28, 28, 16, 1), (128, 16, 14, 14, 32, 1), (128, 32, 28, 28, 32, 32), (128, 64, 14, 14, 64, 64),
          (128, 32, 14, 14, 64, 4)]


def timed(fn, sync, min_seconds=0.3):
    """Seconds per call, GPU work included."""
    fn()
    sync()
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < min_seconds or calls < 4:
        fn()
        calls += 1
        if calls % 8 == 0:
            sync()
    sync()
    return (time.perf_counter() - start) / calls


def main():
    import torch
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    info = wg.get_backend("webgpu").info
    print(f"webgrad on {info['name']} ({info['backend']}); PyTorch {torch.__version__}, cuDNN "
          f"{torch.backends.cudnn.version()}, f32, TF32 off; 3x3 kernels, padding 1")
    print(f"{'N x C x H x W -> C_out / g':>30} {'fwd ms':>8} {'cuDNN':>8} {'ratio':>6}   {'fwd+bwd ms':>10} {'cuDNN':>8} {'ratio':>6}")
    rng = np.random.default_rng(0)
    for n, c, h, w, c_out, groups in SHAPES:
        x_np = rng.standard_normal((n, c, h, w), dtype=np.float32)
        w_np = rng.standard_normal((c_out, c // groups, 3, 3), dtype=np.float32) / 3
        b_np = rng.standard_normal(c_out, dtype=np.float32)
        x = wg.tensor(x_np, device="webgpu", requires_grad=True)
        weight = wg.tensor(w_np, device="webgpu", requires_grad=True)
        bias = wg.tensor(b_np, device="webgpu", requires_grad=True)
        tx, tw, tb = (torch.tensor(v, device="cuda", requires_grad=True) for v in (x_np, w_np, b_np))

        ours = F.conv2d(x, weight, bias, padding=1, groups=groups)
        theirs = torch.nn.functional.conv2d(tx, tw, tb, padding=1, groups=groups)
        ours.sum().backward()
        theirs.sum().backward()
        for name, a, b in [("output", ours.detach(), theirs), ("input grad", x.grad, tx.grad),
                           ("weight grad", weight.grad, tw.grad), ("bias grad", bias.grad, tb.grad)]:
            expected = b.detach().cpu().numpy()
            error = np.abs(a.numpy() - expected).max() / max(1.0, np.abs(expected).max())
            if error > 1e-4:
                raise SystemExit(f"{(n, c, h, w, c_out, groups)}: {name} is off by {error:.1e}")

        def ours_fwd():
            with wg.no_grad():
                F.conv2d(x, weight, bias, padding=1, groups=groups)

        def ours_both():
            F.conv2d(x, weight, bias, padding=1, groups=groups).sum().backward()

        def theirs_fwd():
            with torch.no_grad():
                torch.nn.functional.conv2d(tx, tw, tb, padding=1, groups=groups)

        def theirs_both():
            torch.nn.functional.conv2d(tx, tw, tb, padding=1, groups=groups).sum().backward()
        fwd = timed(ours_fwd, wg.synchronize) * 1e3, timed(theirs_fwd, torch.cuda.synchronize) * 1e3
        both = timed(ours_both, wg.synchronize) * 1e3, timed(theirs_both, torch.cuda.synchronize) * 1e3
        print(f"{f'{n}x{c}x{h}x{w} -> {c_out} / {groups}':>30} {fwd[0]:8.3f} {fwd[1]:8.3f} {fwd[0] / fwd[1]:6.2f}   "
              f"{both[0]:10.3f} {both[1]:8.3f} {both[0] / both[1]:6.2f}")


if __name__ == "__main__":
    main()
