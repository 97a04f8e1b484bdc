"""autocast: ops in mixed precision inside its region (torch.autocast; see webgrad.amp).

Inside `autocast(device_type)`, an op on torch's lower-precision list (matmul, linear, conv2d,
attention, ...) casts its floating inputs to float16 and returns float16; an op on torch's float32
list (exp, log, pow, softmax, sum, the norms, the losses, ...) casts them to float32; an op on its
promote list runs in the widest of its inputs' types; every other op runs as called. The lists are
torch's for each device: the webgpu device follows CUDA's, the cpu device torch's CPU lists (see
_POLICIES). The casts are ordinary differentiable ones, so gradients reach float32 parameters as
float32.

The mechanism is one decorator, `autocast_op`, on each op's public function: outside autocast it
costs one flag check; inside, it casts the arguments by the op's entry in _POLICIES and runs the
op with autocast off, so the ops it is made of (mean's sum, cross_entropy's log_softmax) are not
cast again, as in torch, where autocast acts once per dispatched op. An op decorated but not
named in _POLICIES (mean, var, batch_norm, ...) casts nothing, and its parts are not cast either:
torch has them as ops of their own. Backward rules run as recorded.
"""
import copy
import functools
import warnings

from .. import autograd, dtypes
from .._tensor import Tensor

LOWER, FP32, PROMOTE, BANNED = "lower", "fp32", "promote", "banned"

# torch's autocast op lists (aten/src/ATen/autocast_mode.h and .cpp) for the ops webgrad has, by the
# op's torch name: (the webgpu device's policy, which is CUDA's; the cpu device's). None: not cast.
# For sum, prod, cumsum, softmax, log_softmax and the norms torch's float32 rule only sets their
# dtype= argument: one given explicitly is kept.
_POLICIES = {
    "matmul": (LOWER, LOWER), "linear": (LOWER, LOWER), "conv2d": (LOWER, LOWER),
    "scaled_dot_product_attention": (LOWER, LOWER),
    "einsum": (LOWER, LOWER),   # on the cpu, torch's einsum is made of bmm, which is on the list
    "exp": (FP32, None), "expm1": (FP32, None), "log": (FP32, None), "log2": (FP32, None),
    "log10": (FP32, None), "log1p": (FP32, None), "pow": (FP32, None), "reciprocal": (FP32, None),
    "rsqrt": (FP32, None), "tan": (FP32, None), "asin": (FP32, None), "acos": (FP32, None),
    "softplus": (FP32, None), "layer_norm": (FP32, None), "rms_norm": (FP32, None),
    "softmax": (FP32, None), "log_softmax": (FP32, None), "logsumexp": (FP32, None),
    "sum": (FP32, None), "cumsum": (FP32, None), "norm": (FP32, None), "vector_norm": (FP32, None),
    "matrix_norm": (FP32, None),
    "prod": (FP32, FP32),
    "cross_entropy": (FP32, FP32), "nll_loss": (FP32, FP32), "mse_loss": (FP32, FP32),
    "l1_loss": (FP32, FP32), "smooth_l1_loss": (FP32, FP32), "huber_loss": (FP32, FP32),
    "kl_div": (FP32, FP32), "binary_cross_entropy_with_logits": (FP32, FP32),
    "binary_cross_entropy": (BANNED, FP32),
    "scatter_add": (PROMOTE, None),
    "conv1d": (LOWER, LOWER), "conv_transpose1d": (LOWER, LOWER), "conv_transpose2d": (LOWER, None),
    "prelu": (LOWER, LOWER), "addmm": (LOWER, LOWER), "mv": (LOWER, None), "baddbmm": (LOWER, LOWER),
    "bmm": (LOWER, LOWER),
    "cosh": (FP32, None), "sinh": (FP32, None), "group_norm": (FP32, None), "cosine_similarity": (FP32, None),
    "cumprod": (FP32, None),
    "addcdiv": (PROMOTE, None), "addcmul": (PROMOTE, None), "atan2": (PROMOTE, None), "dot": (PROMOTE, None),
    "tensordot": (PROMOTE, None),
}
_COLUMN = {"webgpu": 0, "cpu": 1}
# autocast's device_type -> the webgrad device whose tensors it casts ("cuda": torch programs' GPU)
_DEVICE_TYPES = {"webgpu": "webgpu", "cuda": "webgpu", "cpu": "cpu"}
_DEFAULT_DTYPES = {"webgpu": dtypes.float16, "cpu": dtypes.bfloat16}   # torch's: float16 on the GPU

_casting = {}          # device -> the lower-precision dtype, for each device autocast is on for
_cache = {}            # id(float32 parameter) -> (it, its cast): casts of weights kept for the region
_cache_enabled = True
_nesting = 0


def autocast_op(fn):
    """Make fn (an op's public function, named as torch names the op) apply autocast's policy."""
    policies = _POLICIES.get(fn.__name__, (None, None))

    @functools.wraps(fn)
    def op(*args, **kwargs):
        if not _casting:   # outside autocast: this check is all it costs
            return fn(*args, **kwargs)
        return _cast_and_run(fn, policies, args, kwargs)
    return op


def _cast_and_run(fn, policies, args, kwargs):
    global _casting
    device = _first_device(args, kwargs)
    lower = _casting.get(device)
    if lower is None or autograd._unpacking is not None:   # not this device's autocast, or a backward rule
        return fn(*args, **kwargs)
    policy = policies[_COLUMN[device]]
    if policy is BANNED:   # binary_cross_entropy alone, as in torch
        raise RuntimeError("nn.functional.binary_cross_entropy and nn.BCELoss are unsafe to autocast.\n"
                           "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
                           "In this case, combine the two layers using nn.functional.binary_cross_entropy_with_logits\n"
                           "or nn.BCEWithLogitsLoss. binary_cross_entropy_with_logits and BCEWithLogitsLoss are\n"
                           "safe to autocast.")
    if policy is not None and kwargs.get("dtype") is None:
        target = lower if policy is LOWER else dtypes.float32 if policy is FP32 else _widest(args, kwargs, device)
        args = _cast(args, target, device)
        kwargs = {k: _cast(v, target, device) for k, v in kwargs.items()}
    active, _casting = _casting, {}   # the op's own ops are not cast again
    try:
        return fn(*args, **kwargs)
    finally:
        _casting = active


def _first_device(args, kwargs):
    for value in (*args, *kwargs.values()):
        if isinstance(value, Tensor):
            return value.device
        if isinstance(value, (list, tuple)):
            found = _first_device(value, {})
            if found is not None:
                return found
    return None


def _eligible(t, device):
    return t.device == device and t.dtype.is_floating_point and t.dtype is not dtypes.float64


def _widest(args, kwargs, device):
    """The promote policy's type: float32 if any eligible input is, else the lower precision."""
    tensors = [t for t in (*args, *kwargs.values()) if isinstance(t, Tensor) and _eligible(t, device)]
    return dtypes.float32 if any(t.dtype is dtypes.float32 for t in tensors) else _casting[device]


def _cast(value, dtype, device):
    """value with its eligible tensors (floating, not float64, on device) cast to dtype; lists and
    tuples of tensors too."""
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, dtype, device) for v in value)
    if not isinstance(value, Tensor) or value.dtype is dtype or not _eligible(value, device):
        return value
    # A parameter's cast is made once per autocast region (torch's weight cache): every use of the
    # weight in the region shares it, and its gradient flows back once. One made under no_grad has
    # no graph, so it is not kept for later uses that record one.
    cacheable = (_cache_enabled and dtype is _casting[device] and value.dtype is dtypes.float32
                 and value.requires_grad and value._ctx is None and value._base is None
                 and autograd.is_grad_enabled())
    if not cacheable:
        return value.to(dtype)
    kept = _cache.get(id(value))
    if kept is None:
        kept = _cache[id(value)] = (value, value.to(dtype))
    return kept[1]


class autocast:
    """torch.autocast: a context manager and decorator in whose region ops run in mixed precision
    on device_type's tensors ('webgpu', or 'cuda' as torch programs name the GPU, or 'cpu').

    dtype is the lower precision, float16 (the default on the GPU; torch's cpu default, bfloat16,
    webgrad does not have). On the webgpu device float16 needs the adapter's shader-f16 feature:
    entering the region without it raises, never running in float32 instead."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        if device_type not in _DEVICE_TYPES:
            raise RuntimeError(f"User specified an unsupported autocast device_type '{device_type}': webgrad's "
                               "autocast takes 'webgpu' (or 'cuda', its name in torch programs) and 'cpu'")
        self.device = device_type
        self._device = _DEVICE_TYPES[device_type]
        self.fast_dtype = _DEFAULT_DTYPES[self._device] if dtype is None else dtypes.as_dtype(dtype)
        self._cache_enabled = True if cache_enabled is None else bool(cache_enabled)
        self._enabled = bool(enabled)
        if self._enabled and self.fast_dtype is dtypes.bfloat16:
            raise RuntimeError(f"autocast('{device_type}'): webgrad has no bfloat16 (the default dtype of "
                               "torch's cpu autocast); pass dtype=webgrad.float16")
        if self._enabled and self.fast_dtype is not dtypes.float16:   # as torch: a warning, then off
            warnings.warn(f"In {device_type} autocast, but the target dtype is not supported. Disabling autocast.\n"
                          f"webgrad's autocast only supports float16, not {self.fast_dtype.name}.", stacklevel=2)
            self._enabled = False

    def __enter__(self):
        global _cache_enabled, _nesting
        if self._enabled and self._device == "webgpu" and not _webgpu_has_float16(self.device):
            self._enabled = False
        self._previous = (_casting.get(self._device), _cache_enabled)
        if self._enabled:
            _casting[self._device] = self.fast_dtype
        else:
            _casting.pop(self._device, None)
        _cache_enabled = self._cache_enabled
        _nesting += 1
        return self

    def __exit__(self, *exc):
        global _cache_enabled, _nesting
        _nesting -= 1
        if _nesting == 0:
            _cache.clear()
        previous, _cache_enabled = self._previous
        if previous is None:
            _casting.pop(self._device, None)
        else:
            _casting[self._device] = previous
        return False

    def __call__(self, func):
        if not callable(func):
            raise TypeError(f"autocast()(func) requires a callable, but got {type(func).__name__}. Did you mean "
                            "to use autocast as a context manager? For example:\n"
                            "    with webgrad.autocast(device_type=...):\n        output = model(input)")

        @functools.wraps(func)
        def autocast_region(*args, **kwargs):
            with copy.copy(self):   # a region of its own per call: calls may nest
                return func(*args, **kwargs)
        return autocast_region


def _webgpu_has_float16(device_type):
    """Whether float16 runs on the webgpu device. Without an adapter autocast is off with a warning
    (torch's when CUDA is missing); an adapter without shader-f16 raises the refusal a float16
    tensor there meets."""
    from ..backends import get_backend
    from ..backends.webgpu.kernels.common import check_float16
    try:
        backend = get_backend("webgpu")
    except RuntimeError as error:
        warnings.warn(f"autocast('{device_type}'): the webgpu device is not available ({error}). Disabling "
                      "autocast.", stacklevel=3)
        return False
    check_float16(dtypes.float16, backend.runtime)
    return True


def is_autocast_enabled(device_type="cuda"):
    """torch.is_autocast_enabled: whether autocast is on for device_type ('cuda': webgpu, as in torch)."""
    return _DEVICE_TYPES.get(device_type, device_type) in _casting


def get_autocast_dtype(device_type):
    """torch.get_autocast_dtype: the lower precision autocast uses on device_type."""
    device = _DEVICE_TYPES.get(device_type, device_type)
    return _casting.get(device, _DEFAULT_DTYPES.get(device, dtypes.float16))

