"""Softmax, log-softmax and the losses built on them (numerically stable: the row max is
subtracted before exp)."""
import math

from .. import dtypes
from ..autograd import Function
from .movement import wrap_dim
from .reduce import amax
from .._tensor import Tensor


def _shift(x, dim):
    """x minus its max along dim, so exp cannot overflow (an empty tensor has no max and needs none)."""
    return x - amax(x, dim, keepdim=True) if x.numel() else x


class _Softmax(Function):
    def forward(self, x, dim):
        shifted = _shift(x, dim).exp()
        self.out, self.dim = shifted / shifted.sum(dim, keepdim=True), dim
        return self.out

    def backward(self, grad):
        return self.out * (grad - (grad * self.out).sum(self.dim, keepdim=True))


class _LogSoftmax(Function):
    def forward(self, x, dim):
        shifted = _shift(x, dim)
        self.out, self.dim = shifted - shifted.exp().sum(dim, keepdim=True).log(), dim
        return self.out

    def backward(self, grad):
        return grad - self.out.exp() * grad.sum(self.dim, keepdim=True)


class _CrossEntropy(Function):
    """Cross-entropy of (N, C) logits against int class labels, per row or reduced to their mean or
    sum, one fused kernel each way (backend.cross_entropy); the rows' log-sum-exp is kept for the
    backward. One node for the reduced loss, so its backward is one kernel, which takes
    backward()'s implicit gradient itself."""
    takes_unit_grad = True

    def forward(self, logits, labels, reduction):
        rows = logits.shape[0]
        # what the rows' summed losses are multiplied by; None keeps them per row
        self.scale = {"none": None, "sum": 1.0, "mean": 1 / rows if rows else math.nan}[reduction]
        loss, lse = logits.backend.cross_entropy(logits._view, labels._view, self.scale)
        self.logits, self.labels = logits, labels
        self.lse = Tensor(lse, (rows,), logits.dtype, logits.device)
        return Tensor(loss, (rows,) if self.scale is None else (), logits.dtype, logits.device)

    def backward(self, grad):
        logits = self.logits
        g = logits.backend.cross_entropy_backward(logits._view, self.labels._view, self.lse._view,
                                                  None if grad is None else grad.expand(logits.shape[0])._view,
                                                  1.0 if self.scale is None else self.scale)
        return Tensor(g, logits.shape, logits.dtype, logits.device), None


def _float(x, name):
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"{name}: expected a floating point input, got {x.dtype.name}")
    return x


def softmax(x, dim):
    return _Softmax.apply(_float(x, "softmax"), wrap_dim(dim, x.ndim))


def log_softmax(x, dim):
    return _LogSoftmax.apply(_float(x, "log_softmax"), wrap_dim(dim, x.ndim))


def _check_reduction(reduction):
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction; use 'mean', 'sum' or 'none'")


def _reduce_loss(loss, reduction):
    _check_reduction(reduction)
    return loss.mean() if reduction == "mean" else loss.sum() if reduction == "sum" else loss


def cross_entropy(input, target, reduction="mean", label_smoothing=0.0):  # noqa: A002
    """input: (N, C) or (C,) logits; target: int class indices (N,) or class probabilities like input."""
    if not isinstance(target, Tensor):
        raise TypeError(f"cross_entropy: target must be a Tensor, not {type(target).__name__}")
    if input.ndim not in (1, 2):
        raise ValueError(f"cross_entropy expects (N, C) or (C,) logits, got shape {tuple(input.shape)}")
    _check_reduction(reduction)
    batched = input.ndim == 2
    logits = input if batched else input.unsqueeze(0)
    classes = logits.shape[1]
    if target.dtype.is_floating_point:
        if target.shape != input.shape:
            raise RuntimeError(f"cross_entropy: a float target holds class probabilities and must have the input's "
                               f"shape {tuple(input.shape)}, got {tuple(target.shape)} (class indices are int32)")
        probs = target if batched else target.unsqueeze(0)
        if label_smoothing:
            probs = probs * (1 - label_smoothing) + label_smoothing / classes
        loss = -(log_softmax(logits, 1) * probs).sum(1)
    else:
        if target.dtype is not dtypes.int32:
            raise RuntimeError(f"cross_entropy: expected int32 class indices, got {target.dtype.name}")
        labels = target if batched else target.reshape(1)
        if labels.ndim != 1:
            raise RuntimeError(f"cross_entropy: class-index targets must be 1-D (0-D for a (C,) input), "
                               f"got shape {tuple(target.shape)}")
        if labels.shape != (logits.shape[0],):
            raise ValueError(f"cross_entropy: expected target of shape ({logits.shape[0]},) for input "
                             f"{tuple(input.shape)}, got {tuple(target.shape)}")
        if not label_smoothing:   # one node, the reduction included
            loss = _CrossEntropy.apply(_float(logits, "cross_entropy"), labels, reduction)
            return loss if batched or reduction != "none" else loss.squeeze(0)
        logp = log_softmax(logits, 1)
        loss = -logp.gather(1, labels.unsqueeze(1)).squeeze(1) * (1 - label_smoothing) - \
            logp.mean(1) * label_smoothing
    return _reduce_loss(loss if batched else loss.squeeze(0), reduction)


def mse_loss(input, target, reduction="mean"):  # noqa: A002
    if input.shape != target.shape:
        raise RuntimeError(f"mse_loss: input shape {tuple(input.shape)} and target shape "
                         f"{tuple(target.shape)} differ")
    diff = input - target
    return _reduce_loss(diff * diff, reduction)
