"""The backend protocol: what a device ("cpu", "webgpu") does for the ops above it.

A backend computes; it knows nothing of autograd or Tensors. It receives Views (a storage and
the layout of the elements read from it) and scalars, and returns new storages: flat buffers of
a dtype's elements, holding a result in row-major order. The ops (webgrad.ops) wrap those in
Tensors and keep the gradients.

Each elementwise op and reduction is described once, by the kernel spec its op passes down
(Elementwise, Reduction below): a WGSL form for the webgpu device and its NumPy twin for cpu.
"""
import functools
import math
from typing import Any, NamedTuple

# Rounds of the Feistel network behind randperm (fewer leave small permutations measurably
# non-uniform); both devices use it, so both make the same permutation.
PERMUTATION_ROUNDS = 16


@functools.lru_cache(maxsize=4096)
def contiguous_strides(shape):
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


class View(NamedTuple):
    """What a backend sees of a tensor: which storage, and where in it each element lies
    (element (i, j, ...) at offset + i * strides[0] + j * strides[1] + ..., in elements)."""
    storage: Any
    shape: tuple
    strides: tuple
    offset: int
    dtype: Any

    @property
    def ndim(self):
        return len(self.shape)

    def numel(self):
        return math.prod(self.shape)

    def is_contiguous(self):
        """Row-major without gaps (dims of size 1 may have any stride)."""
        return all(stride == step for size, stride, step in
                   zip(self.shape, self.strides, contiguous_strides(self.shape)) if size != 1)

    def positions(self):
        """Element positions in the storage, in row-major order."""
        positions = [self.offset]
        for size, stride in zip(self.shape, self.strides):
            positions = [p + i * stride for p in positions for i in range(size)]
        return positions


def flat(storage, shape, dtype):
    """A contiguous View of a whole storage."""
    return View(storage, tuple(shape), contiguous_strides(tuple(shape)), 0, dtype)


class Elementwise:
    """An elementwise kernel: out = f(a, b, c) over broadcast operands.

    wgsl: an expression over a, b, c (already of the compute type T; `i` is the element's index);
    numpy: fn(np, *arrays) -> array, the same maths (with `index=True`, the element indices come
    first); arg_kinds: per-operand dtype overrides (where's condition is bool), None elsewhere."""

    def __init__(self, name, wgsl, numpy, arg_kinds=None, index=False):
        self.name = name
        self.wgsl = wgsl
        self.numpy = numpy
        self.arg_kinds = arg_kinds
        self.index = index

    def __repr__(self):
        return f"{type(self).__name__}({self.name})"


class Reduction:
    """A reduction: its WGSL identity and combine step, its NumPy twin, and whether it yields the
    index (int32) rather than the value."""

    def __init__(self, name, identity, combine, numpy, arg=False):
        self.name = name
        self.identity = identity  # WGSL expression of the start value (in type T)
        self.combine = combine    # WGSL: does value v (at index j) replace the running (acc, at)? or how to add it
        self.numpy = numpy        # fn(np, array, axes) -> array
        self.arg = arg

    def __repr__(self):
        return f"Reduction({self.name})"


def _numpy_arg(name):
    """argmax/argmin over several axes at once: the index counts row-major over the reduced dims,
    as j does in the kernel (over all dims it is the flat index)."""
    def run(np, a, axes):
        kept = [d for d in range(a.ndim) if d not in axes]
        reduced = math.prod(a.shape[d] for d in axes)
        rows = a.transpose(kept + list(axes)).reshape([a.shape[d] for d in kept] + [reduced])
        return getattr(rows, name)(axis=-1)
    return run


SUM = Reduction("sum", "T(0)", "acc = acc + v;", lambda np, a, axes: a.sum(axis=axes))
MAX = Reduction("max", "lowest_T()", "acc = max(acc, v);", lambda np, a, axes: a.max(axis=axes))
MIN = Reduction("min", "highest_T()", "acc = min(acc, v);", lambda np, a, axes: a.min(axis=axes))
ARGMAX = Reduction("argmax", "lowest_T()", "if (v > acc || (v == acc && j < at)) { acc = v; at = j; }",
                   _numpy_arg("argmax"), arg=True)
ARGMIN = Reduction("argmin", "highest_T()", "if (v < acc || (v == acc && j < at)) { acc = v; at = j; }",
                   _numpy_arg("argmin"), arg=True)

# The elementwise kernels backends compose multi-pass work from (ops use them too).
COPY = Elementwise("identity", "a", lambda np, a: a.copy())
FILL = Elementwise("fill", "a", lambda np, a: a)
MUL = Elementwise("mul", "a * b", lambda np, a, b: a * b)


class Backend:
    """The operations every device implements. Views in, new storages out (but where noted);
    `dtype`s are webgrad.dtypes; `shape`s are tuples. Methods are grouped by kernel family."""
    name = None
    is_software = False   # the device runs on the CPU (a software GPU adapter): NumPy beats it

    # ---- storage ----
    def empty(self, numel, dtype): raise NotImplementedError
    def upload(self, raw, dtype): raise NotImplementedError          # bytes -> storage
    def download(self, view): raise NotImplementedError              # the view's elements, as bytes
    def bitcast(self, storage, dtype): raise NotImplementedError     # the same memory as dtype's elements
    def sync(self): raise NotImplementedError

    # ---- map: out[i] = op(args...) over broadcast views and scalars; into `out` (a View) if given ----
    def map(self, op, args, shape, compute, out_dtype, out=None): raise NotImplementedError

    # ---- reduce: op over `dims` of x ----
    def reduce(self, op, x, dims, out_dtype): raise NotImplementedError

    # ---- matmul and convolution (bias added in the product's store) ----
    def matmul(self, a, b, bias=None, bias_dim=-1): raise NotImplementedError
    def conv2d(self, x, weight, bias, stride, padding, dilation): raise NotImplementedError
    def conv2d_input_grad(self, grad, weight, in_shape, padding, dilation): raise NotImplementedError
    def conv2d_weight_grad(self, grad, x, kernel, stride, padding, dilation): raise NotImplementedError
    def fold(self, g, shape, kernel, stride, dilation, padding=(0, 0)): raise NotImplementedError

    # ---- gather ----
    def gather(self, x, dim, index): raise NotImplementedError
    def scatter_add(self, grad, dim, index, shape): raise NotImplementedError

    # ---- pool: (values, int32 indices) forward; the input's gradient backward ----
    def max_pool2d(self, x, shape, kernel, stride, padding, dilation): raise NotImplementedError
    def max_pool2d_backward(self, grad, indices, shape, kernel, stride, padding, dilation): raise NotImplementedError

    # ---- loss: (loss, log-sum-exp) of (N, C) logits; their gradient ----
    def cross_entropy(self, logits, labels, scale=None): raise NotImplementedError
    def cross_entropy_backward(self, logits, labels, lse, grad, scale): raise NotImplementedError

    # ---- random: draw() gives (seed, offset) and runs again at each jit replay ----
    def random(self, numel, normal, draw, dtype): raise NotImplementedError
    def permutation(self, n, half, draw): raise NotImplementedError

    # ---- optim: update param and its state views in place (see webgrad.optim) ----
    def optimizer_step(self, kind, param, grad, states, hyper): raise NotImplementedError
