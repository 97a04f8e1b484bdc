"""Losses that compare input and target element by element, composed of elementwise kernels and a
reduction (so forward and backward run on the input's device): l1, smooth_l1, huber, binary
cross-entropy (on probabilities and on logits) and KL divergence (mse_loss is in ops/loss.py).
reduction: 'none', 'mean' or 'sum'."""
import warnings

from ..amp import autocast_op
from .activation import logsigmoid
from .elementwise import log, where
from .loss import broadcast_target as _broadcast_target, check_reduction, reduce_loss


def _same_shape(input, target, message):
    if input.shape != target.shape:
        raise ValueError(message.format(target=tuple(target.shape), input=tuple(input.shape)))


@autocast_op
def l1_loss(input, target, reduction="mean"):
    check_reduction(reduction)
    _broadcast_target("l1_loss", input, target)
    return reduce_loss((input - target).abs(), reduction)


@autocast_op
def smooth_l1_loss(input, target, reduction="mean", beta=1.0):
    """0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (beta 0: the l1 loss)."""
    check_reduction(reduction)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    _broadcast_target("smooth_l1_loss", input, target)
    d = (input - target).abs()
    if beta == 0:
        return reduce_loss(d, reduction)
    return reduce_loss(where(d < beta, d * d * (0.5 / beta), d - 0.5 * beta), reduction)


@autocast_op
def huber_loss(input, target, reduction="mean", delta=1.0):
    """0.5 d^2 where |d| <= delta, else delta (|d| - 0.5 delta)."""
    check_reduction(reduction)
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    _broadcast_target("huber_loss", input, target)
    d = (input - target).abs()
    return reduce_loss(where(d <= delta, d * d * 0.5, (d - 0.5 * delta) * delta), reduction)


@autocast_op
def binary_cross_entropy(input, target, weight=None, reduction="mean"):
    """-(t log x + (1 - t) log(1 - x)), each log at least -100 as in PyTorch. Inputs outside [0, 1]
    give NaN here (PyTorch's cpu raises; reading the values back to check would cost a round trip)."""
    check_reduction(reduction)
    _same_shape(input, target, "Using a target size ({target}) that is different to the input size ({input}) is "
                               "deprecated. Please ensure they have the same size.")
    loss = -(target * log(input).clamp(min=-100.0) + (1 - target) * log(1 - input).clamp(min=-100.0))
    return reduce_loss(loss if weight is None else loss * weight, reduction)


@autocast_op
def binary_cross_entropy_with_logits(input, target, weight=None, reduction="mean", pos_weight=None):
    """binary_cross_entropy(sigmoid(x), t) without its overflow: (1 - t) x - (1 + (pos_weight - 1) t)
    log(sigmoid(x)), with log-sigmoid as one stable kernel."""
    check_reduction(reduction)
    _same_shape(input, target, "Target size ({target}) must be the same as input size ({input})")
    log_weight = 1.0 if pos_weight is None else (pos_weight - 1) * target + 1
    loss = (1 - target) * input - log_weight * logsigmoid(input)
    return reduce_loss(loss if weight is None else loss * weight, reduction)


@autocast_op
def kl_div(input, target, reduction="mean", log_target=False):
    """target (log(target) - input) with input log-probabilities; 0 where target is 0 (as xlogy
    gives). reduction also takes 'batchmean': the sum over the first dim's size."""
    if reduction not in ("mean", "sum", "none", "batchmean"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the support size."
                      "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                      "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
                      UserWarning, stacklevel=3)   # past autocast_op's frame
    if log_target:
        loss = target.exp() * (target - input)
    else:
        zero = target == 0
        loss = where(zero, 0.0, target * log(where(zero, 1.0, target))) - target * input
    if reduction == "batchmean":
        return loss.sum() / (input.shape[0] if input.ndim else 1)
    return reduce_loss(loss, reduction)
