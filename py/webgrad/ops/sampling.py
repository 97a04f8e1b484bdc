"""Random draws built on rand/randn (ops/creation.py), so they run on the device and take a
generator=: randint, normal, bernoulli and multinomial (with replacement by inverse CDF over a
cumsum, without by the exponential race: the num_samples largest log(u) / p, by topk)."""
from .. import dtypes
from .creation import _shape, rand, randn
from .scan import cumsum
from .sort import topk
from .unary import isfinite
from .._tensor import Tensor, tensor_method


def randint(*args, size=None, generator=None, dtype=None, device=None, requires_grad=False, low=None, high=None):
    """randint(high, size) or randint(low, high, size): integers uniform on [low, high), int32 (PyTorch's
    int64) unless dtype says otherwise. One float32 uniform per element (24 bits), so spans above
    2**24 do not reach every integer."""
    if size is None and args and isinstance(args[-1], (tuple, list)):
        *args, size = args
    if high is None and len(args) == 2:
        low, high = args
    elif high is None and len(args) == 1:
        high = args[0]
    elif args:
        low = args[0]
    low = 0 if low is None else int(low)
    if high is None or size is None:
        raise TypeError("randint() needs high and size: randint(high, size) or randint(low, high, size)")
    high = int(high)
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    span = high - low
    dtype = dtypes.as_dtype(dtype or dtypes.int32)
    u = rand(_shape((size,)), generator=generator, device=device)
    drawn = (u * float(span)).floor().clamp(max=float(span - 1))
    out = (drawn.int() + low).to(dtype) if not dtype.is_floating_point else (drawn + float(low)).to(dtype)
    return out.requires_grad_() if requires_grad else out


def randint_like(input, low=0, high=None, *, dtype=None, device=None, requires_grad=False):
    """randint over input's shape (randint_like(x, high) or randint_like(x, low, high)), in its dtype and device."""
    low, high = (0, low) if high is None else (low, high)
    return randint(low, high, input.shape, dtype=dtype or input.dtype, device=device or input.device,
                   requires_grad=requires_grad)


def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device=None, requires_grad=False):
    """Normal draws of mean and std (numbers, or tensors broadcast together); with numbers, size
    gives the shape. Differentiable in tensor mean and std, as in PyTorch."""
    if not isinstance(std, Tensor) and std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    tensors = [t for t in (mean, std) if isinstance(t, Tensor)]
    if tensors:
        from .movement import broadcast_shapes
        shape = broadcast_shapes(*[t.shape for t in tensors])
        device = tensors[0].device
        dtype = tensors[0].dtype
    elif size is None:
        raise TypeError("normal(): with a number mean and std, size is needed")
    else:
        shape = _shape((size,))
    out = randn(shape, generator=generator, dtype=dtype, device=device) * std + mean
    return out.requires_grad_() if requires_grad else out


@tensor_method
def bernoulli(x, p=None, *, generator=None):
    """1 with probability p (x itself when p is None), else 0, in x's dtype."""
    chance = x if p is None else p
    return (rand(x.shape, generator=generator, dtype=x.dtype, device=x.device) < chance).to(x.dtype)


@tensor_method
def multinomial(input, num_samples, replacement=False, *, generator=None):
    """num_samples category indices (int32) per row of the (C,) or (N, C) weights input. The weights are
    checked on the cpu device; on webgpu (as on CUDA, where PyTorch leaves it to a device assert) bad
    weights give arbitrary categories."""
    if input.ndim not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got: {input.dtype.name}")
    if num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    classes = input.shape[-1]
    if not replacement and num_samples > classes:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    weights = input.detach() if input.ndim == 2 else input.detach().unsqueeze(0)
    if input.device == "cpu":
        _check_weights(weights)
    if replacement:   # the category whose cumulative weight first passes u * total
        u = rand((weights.shape[0], num_samples), generator=generator, dtype=weights.dtype, device=input.device)
        cdf = cumsum(weights, 1)
        target = u * cdf[:, -1:]
        out = (cdf[:, :-1].unsqueeze(1) <= target.unsqueeze(2)).int().sum(2)
    else:   # u ** (1 / p) races: the largest win, in order, as sequential draws without replacement would
        keys = rand(weights.shape, generator=generator, dtype=weights.dtype, device=input.device).log() / weights
        out = topk(keys, num_samples, 1).indices
    return out if input.ndim == 2 else out.squeeze(0)


def _check_weights(weights):
    if (~isfinite(weights) | (weights < 0)).any().item():
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    if (weights.sum(1) <= 0).any().item():
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
