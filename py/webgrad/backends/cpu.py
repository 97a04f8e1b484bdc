"""The cpu device: NumPy. It is the reference the webgpu kernels are tested against, so each op
runs its Elementwise/Reduction's NumPy twin, and random numbers use the same counter hash as WGSL."""
import math

import numpy as np

from .. import dtypes
from .base import PERMUTATION_ROUNDS, Backend, View


def _np_dtype(dtype):
    dtypes.check_supported(dtype, "cpu")
    return np.bool_ if dtype.kind == "b" else np.dtype(dtype.name)


class CPUBackend(Backend):
    name = "cpu"
    is_software = False

    def view(self, t):
        """The NumPy array of a View."""
        item = t.storage.itemsize
        return np.lib.stride_tricks.as_strided(t.storage[t.offset:], t.shape, [s * item for s in t.strides])

    def empty(self, numel, dtype):
        return np.zeros(numel, _np_dtype(dtype))

    def upload(self, raw, dtype):
        return np.frombuffer(bytes(raw), dtype=_np_dtype(dtype)).copy()

    def bitcast(self, storage, dtype):
        """The same memory as an array of dtype (whole elements of it)."""
        raw = storage.view(np.uint8)
        return raw[:len(raw) - len(raw) % dtype.itemsize].view(_np_dtype(dtype))

    def download(self, t):
        return np.ascontiguousarray(self.view(t)).tobytes()

    def map(self, op, args, shape, compute, out_dtype, out=None):
        arrays = [self.view(a).astype(_np_dtype(compute), copy=False)
                  if isinstance(a, View) and not (op.arg_kinds and op.arg_kinds[i]) else
                  (self.view(a) if isinstance(a, View) else a) for i, a in enumerate(args)]
        if op.index:
            arrays.insert(0, np.arange(math.prod(shape)).astype(_np_dtype(compute)).reshape(shape))
        with np.errstate(all="ignore"):
            result = op.numpy(np, *arrays)
        result = np.broadcast_to(np.asarray(result).astype(_np_dtype(out_dtype), copy=False), shape)
        if out is not None:
            np.copyto(self.view(out), result, casting="unsafe")
            return out.storage
        return np.ascontiguousarray(result).reshape(-1).copy()

    def reduce(self, op, x, dims, out_dtype):
        a = self.view(x)
        if not x.dtype.is_floating_point:
            a = a.astype(np.int32)
        return np.asarray(op.numpy(np, a, dims)).astype(_np_dtype(out_dtype)).reshape(-1)

    def matmul(self, a, b, bias=None, bias_dim=-1):
        out = np.matmul(self.view(a), self.view(b))
        if bias is not None:
            out = out + (self.view(bias) if bias_dim == -1 else self.view(bias)[:, None])
        return out.reshape(-1)

    def gather(self, x, dim, index):
        idx = self.view(index)
        size = x.shape[dim]
        if idx.size and (idx.min() < -size or idx.max() >= size):
            raise IndexError(f"gather: index out of range for dimension {dim} with size {size}")
        src = self.view(x)[tuple(slice(0, s) for s in index.shape[:dim]) + (slice(None),) +
                           tuple(slice(0, s) for s in index.shape[dim + 1:])]
        return np.take_along_axis(src, idx % size, axis=dim).reshape(-1).copy()

    def scatter_add(self, grad, dim, index, shape):
        out = np.zeros(shape, self.view(grad).dtype)
        # the index's extent outside dim, all of dim; a view: scatter writes through it
        region = out[tuple(slice(None) if d == dim else slice(0, s) for d, s in enumerate(index.shape))]
        idx = self.view(index) % shape[dim]
        grid = list(np.indices(index.shape, sparse=True))
        grid[dim] = idx
        np.add.at(region, tuple(grid), self.view(grad))
        return out.reshape(-1)

    def cross_entropy(self, logits, labels, scale=None):
        """Per-row loss (or their sum times scale) and log-sum-exp: shaders/cross_entropy.wgsl's forward."""
        x, y = self.view(logits), self.view(labels)
        outside = (y < 0) | (y >= x.shape[1])
        if outside.any():
            raise IndexError(f"cross_entropy: target {y[outside][0]} is out of bounds for {x.shape[1]} classes")
        top = x.max(1, keepdims=True)
        lse = (top + np.log(np.exp(x - top).sum(1, keepdims=True)))[:, 0]
        loss = lse - x[np.arange(len(y)), y]
        return (loss if scale is None else (loss.sum() * scale).astype(loss.dtype).reshape(1)), lse

    def cross_entropy_backward(self, logits, labels, lse, grad, scale):
        y = self.view(labels)
        out = np.exp(self.view(logits) - self.view(lse)[:, None])
        out[np.arange(len(y)), y] -= 1
        return (out * (scale if grad is None else self.view(grad)[:, None] * scale)).reshape(-1)

    def fold(self, g, shape, kernel, stride, dilation, padding=(0, 0)):
        return _fold(self.view(g), shape, kernel, stride, dilation, padding)

    def conv2d(self, x, weight, bias, stride, padding, dilation):
        out = np.einsum("ockl,ncklyx->noyx", self.view(weight),
                        _windows(self.view(x), weight.shape[2:], stride, padding, dilation))
        if bias is not None:
            out = out + self.view(bias)[:, None, None]
        return np.ascontiguousarray(out).reshape(-1)

    def conv2d_input_grad(self, grad, weight, in_shape, padding, dilation):
        cols = np.einsum("ockl,noyx->ncklyx", self.view(weight), self.view(grad))
        return _fold(cols, in_shape, weight.shape[2:], (1, 1), dilation, padding)

    def conv2d_weight_grad(self, grad, x, kernel, stride, padding, dilation):
        return np.ascontiguousarray(np.einsum("noyx,ncklyx->ockl", self.view(grad),
                                              _windows(self.view(x), kernel, stride, padding, dilation))).reshape(-1)

    def max_pool2d(self, x, shape, kernel, stride, padding, dilation):
        """shaders/pool.wgsl's max_forward, one window tap at a time over all outputs: the first
        maximum wins, any NaN beats a number and a later NaN an earlier one; padding is skipped (a
        window of padding only gives the lowest value and index -1)."""
        a = self.view(x)
        h, w = x.shape[2:]
        ho, wo = shape[2:]
        lowest = -np.inf if a.dtype.kind == "f" else np.iinfo(a.dtype).min if a.dtype.kind in "iu" else False
        best, picked = np.full(shape, lowest, a.dtype), np.full(shape, -1, np.int32)
        for ky in range(kernel[0]):
            ys = np.arange(ho, dtype=np.int32) * stride[0] + ky * dilation[0] - padding[0]
            for kx in range(kernel[1]):
                xs = np.arange(wo, dtype=np.int32) * stride[1] + kx * dilation[1] - padding[1]
                real = ((ys >= 0) & (ys < h))[:, None] & ((xs >= 0) & (xs < w))
                v = a[:, :, ys.clip(0, h - 1)[:, None], xs.clip(0, w - 1)]
                take = real & ((picked < 0) | (v != v) | ((best == best) & (v > best)))
                best = np.where(take, v, best)
                picked = np.where(take, ys[:, None] * w + xs, picked)
        return best.reshape(-1), picked.reshape(-1)

    def max_pool2d_backward(self, grad, indices, shape, kernel, stride, padding, dilation):
        """Each window's gradient added to the element it picked, in window order (as PyTorch sums)."""
        planes, windows = shape[0] * shape[1], grad.shape[2] * grad.shape[3]
        g, idx = self.view(grad).reshape(planes, windows), self.view(indices).reshape(planes, windows)
        rows = np.broadcast_to(np.arange(planes)[:, None], idx.shape)
        real = idx >= 0   # (-1: a window of padding only picked nothing)
        out = np.zeros((planes, shape[2] * shape[3]), g.dtype)
        np.add.at(out, (rows[real], idx[real]), g[real])
        return out.reshape(-1)

    def random(self, numel, normal, draw, dtype):
        seed, offset = draw()
        if normal:
            u = uniform_bits(seed, offset, 2 * numel)
            u1, u2 = u[0::2], u[1::2]
            values = np.sqrt(-2 * np.log(1 - u1)) * np.cos(np.float32(2 * math.pi) * u2)
        else:
            values = uniform_bits(seed, offset, numel)
        return values.astype(_np_dtype(dtype))

    def permutation(self, n, half, draw):
        return permutation_of(n, half, *draw())

    def optimizer_step(self, kind, param, grad, states, hyper):
        """The NumPy twin of shaders/optim.wgsl: the same formulas in the same order, updating param
        and states in place through their views; float hyperparameters are rounded to f32 as there."""
        w, g = self.view(param), self.view(grad)
        state = [self.view(s) for s in states]
        h = [np.float32(v) if isinstance(v, float) else v for v in hyper()]
        if kind == "sgd":
            lr, weight_decay = h
            w -= lr * (g + weight_decay * w)
        elif kind == "sgd_momentum":
            lr, weight_decay, momentum, dampening, nesterov, first_step = h
            g = g + weight_decay * w
            buf = g if first_step else momentum * state[0] + (1 - dampening) * g
            state[0][...] = buf
            w -= lr * (g + momentum * buf if nesterov else buf)
        elif kind == "adam":
            lr, beta1, beta2, eps, weight_decay, correction1, correction2, decoupled = h
            if decoupled:
                w *= 1 - lr * weight_decay
            else:
                g = g + weight_decay * w
            m = beta1 * state[0] + (1 - beta1) * g
            v = beta2 * state[1] + (1 - beta2) * g * g
            state[0][...], state[1][...] = m, v
            w -= (lr / correction1) * m / (np.sqrt(v) / np.sqrt(correction2) + eps)
        else:
            raise ValueError(f"unknown optimizer kind {kind!r}")

    def sync(self):
        pass


def _windows(x, kernel, stride, padding, dilation):
    """The (N, C, kh, kw, Ho, Wo) sliding windows of x (N, C, H, W) padded with zeros, as a view."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    x = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    n, c, h, w = x.shape
    ho, wo = (h - dh * (kh - 1) - 1) // sh + 1, (w - dw * (kw - 1) - 1) // sw + 1
    s = x.strides
    return np.lib.stride_tricks.as_strided(x, (n, c, kh, kw, ho, wo),
                                           (s[0], s[1], s[2] * dh, s[3] * dw, s[2] * sh, s[3] * sw))


def _fold(windows, shape, kernel, stride, dilation, padding):
    """The sum of the (N, C, kh, kw, Ho, Wo) windows back into the padded image, unpadded, as a
    flat storage (a copy: storages are contiguous)."""
    (ph, pw), (n, c, h, w) = padding, shape
    out = np.zeros((n, c, h + 2 * ph, w + 2 * pw), windows.dtype)
    ho, wo = windows.shape[4:]
    for ky in range(kernel[0]):
        for kx in range(kernel[1]):
            y, x = ky * dilation[0], kx * dilation[1]
            out[:, :, y:y + stride[0] * (ho - 1) + 1:stride[0], x:x + stride[1] * (wo - 1) + 1:stride[1]] += \
                windows[:, :, ky, kx]
    return np.ascontiguousarray(out[:, :, ph:ph + h, pw:pw + w]).reshape(-1)


def _pcg(v):
    # the PCG hash, identical to pcg_hash in shaders/random.wgsl (uint32 arithmetic wraps)
    state = v * np.uint32(747796405) + np.uint32(2891336453)
    word = ((state >> ((state >> np.uint32(28)) + np.uint32(4))) ^ state) * np.uint32(277803737)
    return (word >> np.uint32(22)) ^ word


def permutation_of(n, half, seed, offset):
    """shaders/random.wgsl's permutation: a Feistel network over [0, 4^half), cycle-walked into [0, n)."""
    mask = np.uint32((1 << half) - 1)
    keys = [_pcg(_pcg(np.full(1, (offset + r) & 0xFFFFFFFF, np.uint32)) ^ _pcg(np.full(1, seed, np.uint32)))
            for r in range(PERMUTATION_ROUNDS)]

    def feistel(v):
        left, right = v >> np.uint32(half), v & mask
        for key in keys:
            left, right = right, left ^ (_pcg(right ^ key) & mask)
        return (left << np.uint32(half)) | right
    v = feistel(np.arange(n, dtype=np.uint32))
    while (outside := v >= n).any():
        v[outside] = feistel(v[outside])
    return v.astype(np.int32)


def uniform_bits(seed, offset, count):
    """float32 uniforms on [0, 1) from hash(hash(offset + i) ^ hash(seed))."""
    i = (np.arange(count, dtype=np.uint64) + offset).astype(np.uint32)
    bits = _pcg(_pcg(i) ^ _pcg(np.full(1, seed, np.uint32)))
    return (bits >> np.uint32(8)).astype(np.float32) * np.float32(1.0 / 16777216.0)
