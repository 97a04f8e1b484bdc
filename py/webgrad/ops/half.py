"""float16 through the ops whose kernels read float32 only, by one rule.

The map, reduce, matmul and optim families read and write float16 buffers themselves (loads into
f32, f32 arithmetic and sums, results rounded to f16 as they are stored). The other families (conv
and fold, pooling, norms, the fused losses, attention, scans, gathers and scatters, embeddings) are
written for 32-bit elements and refuse float16 views (kernels/common.py's check_gpu_dtype); an op
built on them is decorated with computes_in_float32 (sorting sorts float32 keys instead:
ops/sort.py): its float16 tensor arguments are cast to float32, it runs, and its float32 results
are cast back to float16. The casts are autograd ops, so gradients flow back in float16,
as PyTorch's do; the arithmetic is float32 throughout, as PyTorch's half kernels accumulate in float.
"""
import functools

from .. import dtypes
from .._tensor import Tensor


def computes_in_float32(op):
    """op, run on float32 copies of its float16 tensor arguments; where every floating tensor
    argument was float16, its float32 results (a tensor, or tensors in a tuple) come back as float16."""
    @functools.wraps(op)
    def run(*args, **kwargs):
        floating = {a.dtype for a in (*args, *kwargs.values()) if isinstance(a, Tensor) and a.dtype.is_floating_point}
        if dtypes.float16 not in floating:
            return op(*args, **kwargs)
        out = op(*(_widened(a) for a in args), **{k: _widened(a) for k, a in kwargs.items()})
        return _narrowed(out) if floating == {dtypes.float16} else out
    return run


def _widened(a):
    return a.float() if isinstance(a, Tensor) and a.dtype is dtypes.float16 else a


def _narrowed(out):
    if isinstance(out, Tensor):
        return out.half() if out.dtype is dtypes.float32 else out
    if isinstance(out, tuple):
        items = [_narrowed(item) for item in out]
        return type(out)(*items) if hasattr(out, "_fields") else type(out)(items)
    return out
