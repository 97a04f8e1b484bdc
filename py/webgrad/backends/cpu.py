"""The cpu device: NumPy. It is the reference the webgpu kernels are tested against, so each op
runs its Elementwise/Reduction's NumPy twin, and random numbers use the same counter hash as WGSL."""
import math

import numpy as np

from .. import dtypes
from .base import PERMUTATION_ROUNDS, Backend, View


def _np_dtype(dtype):
    dtypes.check_supported(dtype, "cpu")
    return np.bool_ if dtype.kind == "b" else np.dtype(dtype.name)


def _computed_in(dtype):
    """The NumPy dtype a kernel of compute dtype `dtype` works in: float16 in float32 (rounded once,
    at the store), as the webgpu kernels and PyTorch's CPU half kernels do."""
    return np.float32 if dtype is dtypes.float16 else _np_dtype(dtype)


def _in_range(op, idx, dim, size):
    """idx, its values checked to lie in [-size, size), in the words of the webgpu kernels' check."""
    outside = idx[(idx < -size) | (idx >= size)]
    if outside.size:
        raise IndexError(f"{op}: index {outside.flat[0]} is out of bounds for dimension {dim} with size {size}")
    return idx


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
        arrays = [self.view(a).astype(_computed_in(compute), copy=False)
                  if isinstance(a, View) and not (op.arg_kinds and op.arg_kinds[i]) else
                  (self.view(a) if isinstance(a, View) else a) for i, a in enumerate(args)]
        if op.index:
            arrays.insert(0, np.arange(math.prod(shape)).astype(_computed_in(compute)).reshape(shape))
        with np.errstate(all="ignore"):   # (and float16's rounding past its range to inf, as torch's)
            result = np.asarray(op.numpy(np, *arrays)).astype(_np_dtype(out_dtype), copy=False)
        result = np.broadcast_to(result, shape)
        if out is not None:
            np.copyto(self.view(out), result, casting="unsafe")
            return out.storage
        return np.ascontiguousarray(result).reshape(-1).copy()

    def reduce(self, op, x, dims, out_dtype):
        a = self.view(x)
        if x.dtype is not dtypes.float32:   # sums of bools and bytes in int32, of float16 in float32
            a = a.astype(_computed_in(x.dtype) if x.dtype.is_floating_point else np.int32, copy=False)
        return np.asarray(op.numpy(np, a, dims)).astype(_np_dtype(out_dtype)).reshape(-1)

    def matmul(self, a, b, bias=None, bias_dim=-1, triangle=None, out=None):   # (dense: exact where read)
        x, y = (self.view(v).astype(_computed_in(v.dtype), copy=False) for v in (a, b))
        if y.ndim == 2 and x.ndim > 2:   # (..., M, K) @ (K, N) as one product, not one BLAS call per matrix
            product = (x.reshape(-1, x.shape[-1]) @ y).reshape(*x.shape[:-1], y.shape[-1])
        else:
            product = np.matmul(x, y)
        if bias is not None:
            product = product + (self.view(bias) if bias_dim == -1 else self.view(bias)[:, None])
        if out is not None:
            np.copyto(self.view(out), product, casting="unsafe")
            return out.storage
        return product.astype(_np_dtype(a.dtype), copy=False).reshape(-1)

    def gather(self, x, dim, index):
        size = x.shape[dim]
        idx = _in_range("gather", self.view(index), dim, size)
        src = self.view(x)[tuple(slice(0, s) for s in index.shape[:dim]) + (slice(None),) +
                           tuple(slice(0, s) for s in index.shape[dim + 1:])]
        return np.take_along_axis(src, idx % size, axis=dim).reshape(-1).copy()

    def scatter_add(self, grad, dim, index, shape):
        out = np.zeros(shape, self.view(grad).dtype)
        # the index's extent outside dim, all of dim; a view: scatter writes through it
        region = out[tuple(slice(None) if d == dim else slice(0, s) for d, s in enumerate(index.shape))]
        idx = _in_range("scatter_add", self.view(index), dim, shape[dim]) % shape[dim]
        grid = list(np.indices(index.shape, sparse=True))
        grid[dim] = idx
        np.add.at(region, tuple(grid), self.view(grad))
        return out.reshape(-1)

    def cross_entropy(self, logits, labels, ignore_index, reduction):
        """shaders/loss.wgsl's forward: the loss per row, or their sum or mean over the rows not
        ignored; then the rows' maxima, their log-sums of exp(x - max) and the backward's factor."""
        x, y = self.view(logits), self.view(labels)
        counted = y != ignore_index
        outside = counted & ((y < 0) | (y >= x.shape[1]))
        if outside.any():
            raise IndexError(f"cross_entropy: target {y[outside][0]} is out of bounds for {x.shape[1]} classes")
        top = x.max(1)
        log_sum = np.log(np.exp(x - top[:, None]).sum(1))
        loss = np.where(counted, (top - x[np.arange(len(y)), np.where(counted, y, 0)]) + log_sum, 0).astype(x.dtype)
        factor, count = 1.0, counted.sum()
        if reduction == "mean":   # none counted: torch's NaN, and a zero gradient
            factor = 1 / count if count else 0.0
            loss = np.array([loss.sum() / count if count else np.nan], x.dtype)
        elif reduction == "sum":
            loss = loss.sum(dtype=x.dtype).reshape(1)
        return loss, np.concatenate([top, log_sum, [factor]]).astype(x.dtype)

    def cross_entropy_backward(self, logits, labels, stats, grad, ignore_index):
        y, stats = self.view(labels), self.view(stats)
        counted, rows = y != ignore_index, len(y)
        out = np.exp((self.view(logits) - stats[:rows, None]) - stats[rows:-1, None])
        out[np.arange(len(y)), np.where(counted, y, 0)] -= 1
        out[~counted] = 0
        return (out * (stats[-1] if grad is None else self.view(grad)[:, None] * stats[-1])).reshape(-1)

    def fold(self, g, shape, kernel, stride, dilation, padding=(0, 0)):
        return _fold(self.view(g), shape, kernel, stride, dilation, padding)

    # groups: the channel dims split into (groups, channels of a group), g in the subscripts
    def conv2d(self, x, weight, bias, stride, padding, dilation, groups=1):
        cells = _windows(self.view(x), weight.shape[2:], stride, padding, dilation)
        out = np.einsum("gockl,ngcklyx->ngoyx", _split(self.view(weight), 0, groups), _split(cells, 1, groups))
        out = out.reshape(out.shape[0], -1, *out.shape[3:])
        if bias is not None:
            out = out + self.view(bias)[:, None, None]
        return np.ascontiguousarray(out).reshape(-1)

    def conv2d_input_grad(self, grad, weight, in_shape, padding, dilation, groups=1):
        cols = np.einsum("gockl,ngoyx->ngcklyx", _split(self.view(weight), 0, groups),
                         _split(self.view(grad), 1, groups))
        return _fold(cols.reshape(in_shape[0], in_shape[1], *cols.shape[3:]), in_shape, weight.shape[2:], (1, 1),
                     dilation, padding)

    def conv2d_weight_grad(self, grad, x, kernel, stride, padding, dilation, groups=1):
        cells = _windows(self.view(x), kernel, stride, padding, dilation)
        return np.ascontiguousarray(np.einsum("ngoyx,ngcklyx->gockl", _split(self.view(grad), 1, groups),
                                              _split(cells, 1, groups))).reshape(-1)

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

    def random(self, shape, normal, draw, dtype):
        numel, (seed, offset) = math.prod(shape), draw()
        if normal:
            u = uniform_bits(seed, offset, 2 * numel)
            u1, u2 = u[0::2], u[1::2]
            values = np.sqrt(-2 * np.log(1 - u1)) * np.cos(np.float32(2 * math.pi) * u2)
        else:
            values = uniform_bits(seed, offset, numel)
        return values.astype(_np_dtype(dtype))

    def permutation(self, n, half, draw):
        return permutation_of(n, half, *draw())

    def optimizer_step(self, update, regions, states, segments, hyper, gate=None):
        """update.numpy, the NumPy twin of its WGSL function, on each segment's slices of the arena's
        regions (changed in place); float hyperparameters are rounded to the arena's dtype, as the
        kernel's are to f32. A float16 arena is updated in float32 and rounded as it is stored back,
        as the kernel does. Gated: nothing where the gate says the gradients overflowed, else the
        record at the gate's step count, and each gradient read times the gate's factor (and left
        times it, where it is not 1)."""
        factor = None
        if gate is not None:
            overflowed, step_count, factor = self.view(gate).reshape(-1)[:3].tolist()
            if overflowed:
                return
        stored = [self.view(region) for region in regions]
        param, *kept = working = [a.astype(_computed_in(regions[0].dtype), copy=False) for a in stored]
        h = hyper() if gate is None else hyper(step_count)
        h = h._replace(**{name: param.dtype.type(getattr(h, name)) for name, kind in update.hyper.items()
                          if kind == "f32"})
        for start, grad in segments:
            end = start + grad.numel()
            stored_grad = self.view(grad).reshape(-1)
            g = stored_grad.astype(param.dtype, copy=False)
            with np.errstate(all="ignore"):
                if factor is not None and factor != 1:   # in float32, as the kernel multiplies
                    g = g * param.dtype.type(factor)
                    stored_grad[...] = g
                update.numpy(np, param[start:end], g, {name: state[start:end] for name, state in zip(states, kept)}, h)
        for region, values in zip(stored, working):
            if values is not region:
                region[...] = values

    def grad_norm_partials(self, grads, norm_type):
        arrays = [np.abs(self.view(g)).astype(_computed_in(g.dtype), copy=False).reshape(-1) for g in grads]
        with np.errstate(all="ignore"):
            if norm_type == math.inf:
                parts = [a.max(initial=0) for a in arrays]
            elif norm_type == -math.inf:
                parts = [a.min(initial=math.inf) for a in arrays]
            else:
                parts = [(a * a if norm_type == 2 else a if norm_type == 1 else a ** norm_type).sum() for a in arrays]
        return np.array(parts, dtype=arrays[0].dtype), len(parts)

    def scale_grads(self, grads, max_norm, total):
        """torch's coefficient: the reciprocal of total + 1e-6, times max_norm, clamped to 1."""
        norm = self.view(total).reshape(-1)[0]
        with np.errstate(all="ignore"):
            coef = norm.dtype.type(max_norm) * (norm.dtype.type(1) / (norm + norm.dtype.type(1e-6)))
        coef = norm.dtype.type(1) if coef > 1 else coef
        for g in grads:
            self.view(g)[...] *= coef

    def cumsum(self, x, dim, reverse=False):
        a = self.view(x)
        if reverse:
            return np.flip(np.cumsum(np.flip(a, dim), dim, dtype=a.dtype), dim).reshape(-1).copy()
        return np.cumsum(a, dim, dtype=a.dtype).reshape(-1)

    def argsort(self, x, dim, descending=False):
        """Stable; NaN above every number (first when descending), as shaders/sort.wgsl sorts."""
        a = np.moveaxis(self.view(x), dim, -1)
        if descending:   # NaNs first, then the keys from the top; ~a reverses ints without overflow
            flipped = -a if a.dtype.kind == "f" else ~a
            order = np.lexsort((flipped, ~np.isnan(a) if a.dtype.kind == "f" else np.ones(a.shape, bool)))
        else:
            order = np.argsort(a, axis=-1, kind="stable")
        return np.ascontiguousarray(np.moveaxis(order.astype(np.int32), -1, dim)).reshape(-1)

    def norm(self, x, weight, bias, eps, centered):
        """shaders/norm.wgsl's forward: two passes over each row (its mean, then its variance)."""
        a = self.view(x)
        mean = a.mean(1, keepdims=True) if centered else np.zeros((len(a), 1), a.dtype)
        rstd = 1 / np.sqrt(((a - mean) ** 2).mean(1, keepdims=True) + eps)
        y = (a - mean) * rstd * (1 if weight is None else self.view(weight)) + (0 if bias is None else self.view(bias))
        return y.astype(a.dtype).reshape(-1), np.concatenate([mean, rstd], 1).reshape(-1)

    def norm_backward(self, grad, x, stats, weight, centered, param_grads):
        dy, s = self.view(grad), self.view(stats)
        xhat = (self.view(x) - s[:, :1]) * s[:, 1:]
        g = dy if weight is None else dy * self.view(weight)
        shift = g.mean(1, keepdims=True) if centered else 0
        dx = s[:, 1:] * (g - shift - xhat * (g * xhat).mean(1, keepdims=True))
        return dx.reshape(-1), np.stack([(dy * xhat).sum(0), dy.sum(0)]).reshape(-1) if param_grads else None

    def embedding(self, weight, index):
        w, idx = self.view(weight), self.view(index)
        outside = (idx < 0) | (idx >= len(w))
        if outside.any():
            raise IndexError(f"embedding: index out of range in self (index {idx[outside][0]}; indices must lie "
                             f"in [0, {len(w)}))")
        return w[idx].reshape(-1)

    def embedding_backward(self, grad, index, rows, padding_idx, scale_by_freq):
        g, idx = self.view(grad), self.view(index)
        out = np.zeros((rows, g.shape[1]), g.dtype)
        np.add.at(out, idx, g)
        if scale_by_freq:
            out /= np.maximum(np.bincount(idx, minlength=rows), 1)[:, None]
        if padding_idx is not None:
            out[padding_idx] = 0
        return out.reshape(-1)

    def attention(self, q, k, v, mask, causal, scale, layouts=None):
        """shaders/attention.wgsl's forward in full: out, then lse (-inf where every key is masked)."""
        s = self._scores(q, k, mask, causal, scale)
        top = s.max(-1, keepdims=True, initial=-np.inf)
        e = np.exp(s - np.where(np.isfinite(top), top, 0))
        total = e.sum(-1, keepdims=True)
        with np.errstate(all="ignore"):
            out = np.where(total > 0, e / total, 0) @ self.view(v)
            lse = np.where(total > 0, top + np.log(total), -np.inf)
        return np.concatenate([out.reshape(-1), lse.reshape(-1)]).astype(out.dtype)

    def attention_backward(self, grad, q, k, v, saved, mask, causal, scale, layouts=None):
        a, b, c, dout = self.view(q), self.view(k), self.view(v), self.view(grad)
        numel = math.prod(dout.shape)
        out, lse = saved[:numel].reshape(dout.shape), saved[numel:numel + numel // dout.shape[-1]]
        s = self._scores(q, k, mask, causal, scale)
        with np.errstate(all="ignore"):
            p = np.where(np.isneginf(s), 0, np.exp(s - lse.reshape(s.shape[:-1] + (1,))))
        ds = p * (dout @ np.swapaxes(c, -1, -2) - (dout * out).sum(-1, keepdims=True))
        dk, dv = (np.swapaxes(ds, -1, -2) @ a) * scale, np.swapaxes(p, -1, -2) @ dout
        return (ds @ b * scale).reshape(-1), np.concatenate([dk.reshape(-1), dv.reshape(-1)])

    def _scores(self, q, k, mask, causal, scale):
        """scale * q k^T, -inf where masked (a False of a bool mask, a later key when causal), plus a float mask."""
        s = self.view(q) @ np.swapaxes(self.view(k), -1, -2) * scale
        if mask is not None:
            m = self.view(mask)
            s = np.where(m, s, -np.inf) if m.dtype == np.bool_ else s + m
        if causal:
            s = np.where(np.tri(*s.shape[-2:], dtype=bool), s, -np.inf)
        return s

    def sync(self):
        pass


def _split(a, dim, groups):
    """a with its dim split into (groups, a.shape[dim] // groups)."""
    return a.reshape(*a.shape[:dim], groups, a.shape[dim] // groups, *a.shape[dim + 1:])


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
