"""torch's named products over ops/matmul.py's matmul: mm, bmm, mv, dot, outer, addmm, baddbmm,
tensordot, and trace. Each checks its operands' ranks and sizes with torch's messages, then runs
one matmul (or one elementwise product), so the GPU path and the gradients are matmul's."""
import math

from ..amp import autocast_op
from .elementwise import mul
from .matmul import matmul, matmul_with_bias
from ..dtypes import TYPE_NAMES
from .._tensor import Tensor, tensor_method


def _sizes(t):
    return "x".join(str(s) for s in t.shape)


@tensor_method
def mm(input, mat2):
    _check_mm(input, mat2)
    return matmul(input, mat2)


def _check_mm(input, mat2):
    if input.ndim != 2:
        raise RuntimeError("self must be a matrix")
    if mat2.ndim != 2:
        raise RuntimeError("mat2 must be a matrix")
    if input.shape[1] != mat2.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({_sizes(input)} and {_sizes(mat2)})")


@tensor_method
@autocast_op
def bmm(input, mat2):
    for name, t in (("batch1", input), ("batch2", mat2)):
        if t.ndim != 3:
            raise RuntimeError(f"{name} must be a 3D tensor")
    expected = [input.shape[0], input.shape[2]]
    if list(mat2.shape[:2]) != expected:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: {expected} but got: "
                           f"{list(mat2.shape[:2])}.")
    return matmul(input, mat2)


@tensor_method
@autocast_op
def mv(input, vec):
    if input.ndim != 2 or vec.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got 1, {input.ndim}, {vec.ndim}")
    if input.shape[1] != vec.shape[0]:
        raise RuntimeError(f"size mismatch, got input ({input.shape[0]}), mat ({_sizes(input)}), vec "
                           f"({vec.shape[0]})")
    return matmul(input, vec)


def _vectors(name, a, b):
    if a.ndim != 1 or b.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {a.ndim}D and {b.ndim}D tensors")
    if a.dtype is not b.dtype:
        raise RuntimeError(f"{name} : expected both vectors to have same dtype, but found "
                           f"{TYPE_NAMES[a.dtype.name]} and {TYPE_NAMES[b.dtype.name]}")
    if a.shape != b.shape:
        raise RuntimeError(f"inconsistent tensor size, expected tensor [{a.shape[0]}] and src [{b.shape[0]}] to "
                           f"have the same number of elements, but got {a.shape[0]} and {b.shape[0]} elements "
                           f"respectively")


@tensor_method
@autocast_op
def dot(input, other):
    _vectors("dot", input, other)
    if not input.dtype.is_floating_point:   # matmul multiplies floats only
        return (input * other).sum()
    return matmul(input, other)


@tensor_method
def inner(input, other):
    """The sum over both last dims of their products (a number times a tensor where one is 0-d)."""
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    if input.shape[-1] != other.shape[-1]:
        raise RuntimeError(f"inner() the last dimension must match on both input tensors but got shapes "
                           f"{list(input.shape)} and {list(other.shape)}")
    return tensordot(input, other, ([-1], [-1]))


@tensor_method
def outer(input, vec2):
    for name, t in (("self", input), ("vec2", vec2)):
        if t.ndim != 1:
            raise RuntimeError(f"outer: Expected 1-D argument {name}, but got {t.ndim}-D")
    return mul(input.unsqueeze(1), vec2)


ger = Tensor.ger = outer


@tensor_method
@autocast_op
def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """beta input + alpha (mat1 @ mat2); input broadcasts to the product. A bias row added at
    beta = alpha = 1 (nn.Linear's form) goes into the product's kernel."""
    _check_mm(mat1, mat2)
    if beta == 1 and alpha == 1 and input.ndim == 1 and input.shape[0] == mat2.shape[1] and input.dtype is mat1.dtype:
        return matmul_with_bias(mat1, mat2, input)
    return _scaled_sum(input, matmul(mat1, mat2), beta, alpha)


@tensor_method
@autocast_op
def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    return _scaled_sum(input, bmm(batch1, batch2), beta, alpha)


def _scaled_sum(input, product, beta, alpha):
    """beta input + alpha product, where beta = 0 ignores input (NaN and inf in it too), as torch."""
    product = product if alpha == 1 else product * alpha
    if beta == 0:
        return product
    return product + (input if beta == 1 else input * beta)


@autocast_op
def tensordot(a, b, dims=2):
    """Sum over dims of a against dims of b: an int n (a's last n with b's first n) or two lists."""
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        if dims > min(a.ndim, b.ndim):
            raise RuntimeError(f"tensordot expects dims < ndim_a or ndim_b, but got dims={dims}")
        dims_a, dims_b = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        dims_a, dims_b = ([d] if isinstance(d, int) else list(d) for d in dims)
        if len(dims_a) != len(dims_b):
            raise RuntimeError("both dimension lists should have same length")
        dims_a, dims_b = [d % a.ndim for d in dims_a], [d % b.ndim for d in dims_b]
    for da, db in zip(dims_a, dims_b):
        if a.shape[da] != b.shape[db]:
            raise RuntimeError(f"contracted dimensions need to match, but first has size {a.shape[da]} in dim {da} "
                               f"and second has size {b.shape[db]} in dim {db}")
    free_a = [d for d in range(a.ndim) if d not in dims_a]
    free_b = [d for d in range(b.ndim) if d not in dims_b]
    k = math.prod(a.shape[d] for d in dims_a)
    left = a.permute(free_a + dims_a).reshape(-1, k)
    right = b.permute(dims_b + free_b).reshape(k, -1)
    return matmul(left, right).reshape([a.shape[d] for d in free_a] + [b.shape[d] for d in free_b])


@tensor_method
def trace(input):
    if input.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input.ndim}")
    from .layout import diagonal
    return diagonal(input).sum()
