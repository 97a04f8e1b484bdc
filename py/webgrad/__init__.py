"""webgrad: PyTorch-style tensors and autograd on WebGPU, natively and in the browser."""
from ._tensor import Size, Tensor  # first: the ops modules import Tensor from it
from ._tensor_str import set_printoptions
from . import dtypes
from .autograd import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from .backends import default_device, get_backend
from .device import accelerator, cuda, device
from .dtypes import bool_ as bool, bfloat16, float16, float32, float64, int32, uint8
from .ops.creation import (arange, as_tensor, empty, from_numpy, frombuffer, full, full_like, initial_seed, manual_seed,
                           ones, ones_like, rand, rand_like, randn, randn_like, randperm, tensor, zeros, zeros_like)
from .ops.elementwise import (abs, bitwise_and, bitwise_not, bitwise_or, bitwise_xor, clamp, exp, gelu, leaky_relu, log,
                              logical_and, logical_not, logical_or, logical_xor, maximum, minimum, pow, relu, sigmoid,
                              sign, sqrt, tanh, where)
from .ops.loss import log_softmax, softmax
from .ops.matmul import matmul
from .ops.indexing import chunk, gather, index_select, narrow, select, split, unbind
from .ops.masking import masked_select
from .ops.movement import (broadcast_shapes, cat, flatten, movedim, moveaxis, permute, reshape, squeeze, stack,
                           swapaxes, swapdims, t, transpose, unflatten, unsqueeze)
from .ops.reduce import amax, amin, argmax, argmin, max, mean, min, sum, var
from .ops.creation import linspace, logspace
from .ops.einsum import einsum
from .ops.generator import Generator, default_generator, get_rng_state, seed, set_rng_state
from .ops.rearrange import flip, fliplr, flipud, masked_fill, roll, tile, tril, triu
from .ops.reduce import all, any, logsumexp, norm, prod, std
from .ops.sampling import bernoulli, multinomial, normal, randint, randint_like
from .ops.scan import cumprod, cumsum
from .ops.scatter import scatter, scatter_add
from .ops.sort import argsort, msort, sort, topk
from .ops.unary import (acos, allclose, asin, atan, ceil, cos, erf, expm1, floor, frac, isclose, isfinite,
                        isinf, isnan, log1p, log2, log10, nan_to_num, reciprocal, round, rsqrt, sin, square, tan,
                        trunc)
from .ops.unary import (acosh, arccosh, arcsinh, arctanh, asinh, atanh, cosh, deg2rad, exp2, logit, rad2deg, sgn,
                        sinh)
from .ops.elementwise import clone, eq, ge, gt, le, lt, mul, ne, neg
from .ops.arith import (add, addcdiv, addcmul, arctan2, atan2, div, divide, floor_divide, fmod, hypot, lerp,
                        logaddexp, multiply, negative, remainder, sub, subtract, true_divide)
from .ops.products import addmm, baddbmm, bmm, dot, ger, inner, mm, mv, outer, tensordot, trace
from .ops.layout import (atleast_1d, atleast_2d, atleast_3d, broadcast_to, column_stack, diag, diagonal, diff, dstack,
                         eye, hstack, index_add, index_fill, meshgrid, repeat_interleave, rot90, row_stack,
                         take_along_dim, tril_indices, triu_indices, vstack)
from .ops.layout import channels_last, channels_last_3d, contiguous_format, memory_format, preserve_format
from .ops.selection import (aminmax, argwhere, bincount, count_nonzero, equal, kthvalue, median, nanmean,
                            nansum, nonzero, std_mean, unique, var_mean)
arcsin, arccos, arctan = asin, acos, atan
clip = clamp

float = float32
double = float64
half = float16
int = int32
# Class labels and indices: WGSL has no 64-bit integers, so int64 is int32 (creating one from a value
# outside int32's range raises).
long = int64 = int32
dtype = dtypes.DType


def is_tensor(obj):
    return isinstance(obj, Tensor)


def is_floating_point(x):
    return x.dtype.is_floating_point


def numel(x):
    return x.numel()


def get_default_dtype():
    return float32


def set_default_dtype(d):
    if dtypes.as_dtype(d) is not float32:
        raise TypeError(f"webgrad's default dtype is float32 (float64 exists on the cpu device only), not {d}")


def compile(model=None, **options):
    """torch.compile: returns what it is given (webgrad.jit records and replays training steps)."""
    return model if model is not None else (lambda fn: fn)


__version__ = "0.1.0"


def memory_stats(device_name="webgpu"):
    """live_buffers, live_bytes, pool_bytes, peak_bytes of a device's buffer pool."""
    backend = get_backend(device_name)
    return backend.memory_stats() if hasattr(backend, "memory_stats") else {}


def synchronize(device_name="webgpu"):
    """Wait until queued work on device_name is done."""
    get_backend(device_name).sync()


from . import data, io, linalg, nn, optim, profiler  # noqa: E402  (they build on the names above)
from . import utils  # noqa: E402  (torch.utils.data as webgrad.utils.data)
from . import random  # noqa: E402  (torch.random.manual_seed)
from .io import load, save  # noqa: E402
from .capture import jit  # noqa: E402
from . import amp  # noqa: E402
from .amp import autocast, get_autocast_dtype, is_autocast_enabled  # noqa: E402
cuda.amp = amp.cuda_amp   # torch.cuda.amp.autocast / GradScaler: the webgpu device's
