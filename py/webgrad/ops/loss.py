"""Softmax, log-softmax, the class losses built on them (cross_entropy, nll_loss) and mse_loss (numerically
stable: the row max is subtracted before exp). Cross-entropy of class indices over (N, C) logits,
ignore_index included, is one fused kernel each way; weight, smoothing and (N, C, d1, ...) inputs
are composed of log_softmax, gather and reductions."""
import math
import warnings

from ..amp import autocast_op
from .. import dtypes
from ..autograd import Function
from .elementwise import where
from .movement import wrap_dim
from .reduce import amax
from .half import computes_in_float32
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
    sum, one fused kernel each way (backend.cross_entropy); rows labelled ignore_index add nothing,
    and the mean counts only the others, on the device. The rows' maxima and log-sums of exp(x - max)
    (and the backward's factor: 1, or the mean's 1 / count) are kept for the backward. One node for the reduced loss, so
    its backward is one kernel, which takes backward()'s implicit gradient itself (and under wg.jit runs in the
    forward's dispatch: backends/webgpu/fusion_loss.py)."""
    takes_unit_grad = True

    def forward(self, logits, labels, ignore_index, reduction):
        rows = logits.shape[0]
        loss, stats = logits.backend.cross_entropy(logits._view, labels._view, ignore_index, reduction)
        self.logits, self.labels, self.ignore_index = logits, labels, ignore_index
        self.stats = Tensor(stats, (2 * rows + 1,), logits.dtype, logits.device)
        return Tensor(loss, (rows,) if reduction == "none" else (), logits.dtype, logits.device)

    def backward(self, grad):
        logits = self.logits
        g = logits.backend.cross_entropy_backward(logits._view, self.labels._view, self.stats._view,
                                                  None if grad is None else grad.expand(logits.shape[0])._view,
                                                  self.ignore_index)
        return Tensor(g, logits.shape, logits.dtype, logits.device), None


def _float(x, name):
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"{name}: expected a floating point input, got {x.dtype.name}")
    return x


@autocast_op
def softmax(x, dim, dtype=None):
    """Along dim; with dtype, of x cast to it first."""
    x = x if dtype is None else x.to(dtype)
    return _Softmax.apply(_float(x, "softmax"), wrap_dim(dim, x.ndim))


@autocast_op
def log_softmax(x, dim, dtype=None):
    x = x if dtype is None else x.to(dtype)
    return _LogSoftmax.apply(_float(x, "log_softmax"), wrap_dim(dim, x.ndim))


def check_reduction(reduction):
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction")


def reduce_loss(loss, reduction):
    check_reduction(reduction)
    return loss.mean() if reduction == "mean" else loss.sum() if reduction == "sum" else loss


def broadcast_target(name, input, target):
    """PyTorch broadcasts a target of another shape, with a warning."""
    if input.shape != target.shape:
        warnings.warn(f"{name}: Using a target size ({tuple(target.shape)}) that is different to the input size "
                      f"({tuple(input.shape)}). This will likely lead to incorrect results due to broadcasting. "
                      f"Please ensure they have the same size.", UserWarning, stacklevel=4)   # past autocast_op's frame


@autocast_op
def mse_loss(input, target, reduction="mean"):
    check_reduction(reduction)
    broadcast_target("mse_loss", input, target)
    diff = input - target
    return reduce_loss(diff * diff, reduction)


def _rows(x):
    """(N, C, d1, ...) as (N * d1 * ..., C): the classes last, one row per position."""
    return x if x.ndim == 2 else x.movedim(1, -1).reshape(-1, x.shape[1])


def _check_classes(name, input, target, weight):
    if not isinstance(target, Tensor):
        raise TypeError(f"{name}: target must be a Tensor, not {type(target).__name__}")
    if input.ndim == 0:
        raise ValueError(f"{name}: expected an input of 1 or more dimensions, got a 0-d tensor")
    classes = input.shape[1] if input.ndim > 1 else input.shape[0]
    if weight is not None and (weight.ndim != 1 or weight.shape[0] != classes):
        raise RuntimeError(f"{name}: weight tensor should be defined either for all {classes} classes or no classes "
                           f"but got weight tensor of shape: {list(weight.shape)}")
    _float(input, name)
    return classes


def _class_targets(name, input, target):
    """Class-index targets checked against input's shape: (N,) or (N, d1, ...) for (N, C, d1, ...), ()
    for (C,)."""
    if target.dtype is not dtypes.int32:
        raise RuntimeError(f"{name}: expected int32 class indices (webgrad's int64), got {target.dtype.name}")
    expected = tuple(input.shape[:1]) + tuple(input.shape[2:]) if input.ndim > 1 else ()
    if expected and target.ndim and target.shape[0] != expected[0]:
        raise ValueError(f"Expected input batch_size ({expected[0]}) to match target batch_size ({target.shape[0]}).")
    if tuple(target.shape) != expected:
        raise RuntimeError(f"Expected target size {list(expected)}, got {list(target.shape)}")


@autocast_op
def nll_loss(input, target, weight=None, ignore_index=-100, reduction="mean"):
    """-input[n, target[n]] (times weight[target[n]]) per position; targets equal to ignore_index add
    nothing, and 'mean' divides by the weight of the targets counted."""
    _check_classes("nll_loss", input, target, weight)
    _class_targets("nll_loss", input, target)
    check_reduction(reduction)
    return _nll(_rows(input if input.ndim > 1 else input.unsqueeze(0)), target, weight, ignore_index, reduction)


def _nll(logp, target, weight, ignore_index, reduction, smoothing=0.0):
    """nll_loss of (M, C) log-probabilities against the target (its shape is a 'none' result's), and
    with smoothing, PyTorch's label smoothing blended in: the mean over classes of -logp (weighted)."""
    labels = target.reshape(-1)
    ignored = labels == ignore_index
    safe = where(ignored, 0, labels)
    counted = where(ignored, 0.0, 1.0 if weight is None else weight.index_select(0, safe))
    loss = -logp.gather(1, safe.unsqueeze(1)).squeeze(1) * counted
    if smoothing:
        spread = -(logp if weight is None else logp * weight).sum(1)
        spread = where(ignored, 0.0, spread) * (smoothing / logp.shape[1])
        loss = loss * (1 - smoothing) + spread
    if reduction == "none":
        return loss.reshape(target.shape)
    if reduction == "sum":
        return loss.sum()
    # every target ignored: NaN (0 / 0) and yet a zero gradient, as PyTorch gives
    total = counted.sum()
    return (loss / where(total == 0, 1.0, total)).sum() + where(total == 0, math.nan, 0.0)


@autocast_op
@computes_in_float32
def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """input: logits (N, C), (N, C, d1, ...) or (C,); target: class indices (int32) of input's shape
    without C, or class probabilities of input's shape."""
    classes = _check_classes("cross_entropy", input, target, weight)
    check_reduction(reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    batched = input if input.ndim > 1 else input.unsqueeze(0)
    if target.dtype.is_floating_point:
        if target.shape != input.shape:
            raise RuntimeError(f"cross_entropy: a float target holds class probabilities and must have the input's "
                               f"shape {tuple(input.shape)}, got {tuple(target.shape)} (class indices are int32)")
        probs = _rows(target if input.ndim > 1 else target.unsqueeze(0))
        if label_smoothing:
            probs = probs * (1 - label_smoothing) + label_smoothing / classes
        logp = log_softmax(_rows(batched), 1)
        loss = -(logp * probs if weight is None else logp * probs * weight).sum(1)
        if reduction == "none":
            return loss.reshape(tuple(input.shape[:1]) + tuple(input.shape[2:]) if input.ndim > 1 else ())
        return loss.sum() / (loss.shape[0] if loss.shape[0] else math.nan) if reduction == "mean" else loss.sum()
    _class_targets("cross_entropy", input, target)
    if _fused(input, weight, ignore_index, label_smoothing):
        loss = _CrossEntropy.apply(batched, target.reshape(-1), ignore_index, reduction)
        return loss if input.ndim > 1 or reduction != "none" else loss.squeeze(0)
    return _nll(log_softmax(_rows(batched), 1), target, weight, ignore_index, reduction, label_smoothing)


def _fused(input, weight, ignore_index, label_smoothing):
    """Whether the fused kernel computes this cross-entropy: class indices over (N, C) or (C,) logits,
    no weight or smoothing, and an ignore_index that an int32 label can equal (one past that range
    would wrap in the kernel's i32 parameter and ignore some class)."""
    return input.ndim <= 2 and weight is None and not label_smoothing and -2**31 <= ignore_index < 2**31
