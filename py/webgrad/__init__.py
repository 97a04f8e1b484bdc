"""webgrad: PyTorch-style tensors and autograd on WebGPU, natively and in the browser."""
from ._tensor import Size, Tensor  # first: the ops modules import Tensor from it
from . import dtypes
from .autograd import enable_grad, is_grad_enabled, no_grad
from .backends import default_device, get_backend
from .dtypes import bool_ as bool, float32, float64, int32, uint8  # noqa: A001
from .ops.creation import (arange, as_tensor, empty, frombuffer, full, full_like, initial_seed, manual_seed,
                           ones, ones_like, rand, rand_like, randn, randn_like, randperm, tensor, zeros, zeros_like)
from .ops.elementwise import (abs, clamp, exp, gelu, leaky_relu, log, logical_and, logical_not,  # noqa: A004
                              logical_or, maximum, minimum, pow, relu, sigmoid, sign, sqrt, tanh, where)
from .ops.loss import log_softmax, softmax
from .ops.matmul import matmul
from .ops.movement import broadcast_shapes, cat, gather, index_select, stack
from .ops.reduce import amax, amin, argmax, argmin, max, mean, min, sum, var  # noqa: A004

float = float32  # noqa: A001
int = int32      # noqa: A001
long = int32     # class labels: WGSL has no 64-bit integers

__version__ = "0.1.0"


def memory_stats(device="webgpu"):
    """live_buffers, live_bytes, pool_bytes, peak_bytes of a device's buffer pool."""
    backend = get_backend(device)
    return backend.memory_stats() if hasattr(backend, "memory_stats") else {}


def synchronize(device="webgpu"):
    """Wait until queued work on device is done."""
    get_backend(device).sync()


from . import data, io, nn, optim  # noqa: E402  (they build on the names above)
from . import utils  # noqa: E402  (torch.utils.data as webgrad.utils.data)
from .io import load, save  # noqa: E402
from .capture import jit  # noqa: E402
