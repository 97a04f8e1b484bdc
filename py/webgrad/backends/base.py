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


def wgsl_is_nan(x):
    """WGSL: whether x (of type T) is a NaN, by its bits: compilers may assume x == x, and WGSL's
    max/min/clamp leave NaN operands to the driver. Always false when T is an integer type."""
    return f"(T(0.5) != T(0) && (bitcast<u32>({x}) & 0x7fffffffu) > 0x7f800000u)"


def _extreme(better):
    """A max/min combine step that keeps a NaN once seen, as PyTorch's max/min do."""
    return f"if ({wgsl_is_nan('v')} || (!{wgsl_is_nan('acc')} && v {better} acc)) {{ acc = v; }}"


def _arg_extreme(better):
    """argmax/argmin's step: NaN beats every number, and between equals (NaNs too) the first index wins."""
    v_nan, acc_nan = wgsl_is_nan("v"), wgsl_is_nan("acc")
    return (f"if (({v_nan} && (!{acc_nan} || j < at)) || (!{v_nan} && !{acc_nan} && "
            f"(v {better} acc || (v == acc && j < at)))) {{ acc = v; at = j; }}")


SUM = Reduction("sum", "T(0)", "acc = acc + v;", lambda np, a, axes: a.sum(axis=axes))
MAX = Reduction("max", "lowest_T()", _extreme(">"), lambda np, a, axes: a.max(axis=axes))
MIN = Reduction("min", "highest_T()", _extreme("<"), lambda np, a, axes: a.min(axis=axes))
ARGMAX = Reduction("argmax", "lowest_T()", _arg_extreme(">"), _numpy_arg("argmax"), arg=True)
ARGMIN = Reduction("argmin", "highest_T()", _arg_extreme("<"), _numpy_arg("argmin"), arg=True)

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
    def check_fits(self, shape, dtype): pass   # raises for a tensor larger than the device holds (webgpu's limits)
    def upload(self, raw, dtype): raise NotImplementedError          # bytes -> storage
    def download(self, view): raise NotImplementedError              # the view's elements, as bytes
    def bitcast(self, storage, dtype): raise NotImplementedError     # the same memory as dtype's elements
    def sync(self): raise NotImplementedError

    # ---- map: out[i] = op(args...) over broadcast views and scalars; into `out` (a View) if given ----
    def map(self, op, args, shape, compute, out_dtype, out=None): raise NotImplementedError

    def map_reads_out(self):
        """Whether map into out may now take out's own elements (its storage, offset and strides) as an
        operand, each read before it is written; else callers pass a copy."""
        return True

    def map_runner(self, op, args, shape, compute, out_dtype, out=None):
        """map into a new storage for operands laid out as args are, as one callable an op keeps (the
        hot path of elementwise ops): run(storages, offsets, scalars) takes, in args' order, each View's
        storage and offset (its shape, strides and dtype as args's) and each scalar operand's value.
        Given out (a View), the runner writes into a storage laid out as out, given first in storages
        and offsets (an in-place write), and returns it."""
        layout = [(a.shape, a.strides, a.dtype) if isinstance(a, View) else None for a in args]

        def run(storages, offsets, scalars):
            places, numbers = iter(zip(storages, offsets)), iter(scalars)
            out_view = None
            if out is not None:
                storage, offset = next(places)
                out_view = View(storage, out.shape, out.strides, offset, out.dtype)
            operands = []
            for fields in layout:
                if fields is None:
                    operands.append(next(numbers))
                else:
                    (storage, offset), (view_shape, strides, dtype) = next(places), fields
                    operands.append(View(storage, view_shape, strides, offset, dtype))
            return self.map(op, operands, shape, compute, out_dtype, out_view)
        return run

    # ---- reduce: op over `dims` of x ----
    def reduce(self, op, x, dims, out_dtype): raise NotImplementedError

    # ---- matmul and convolution (bias added in the product's store) ----
    # triangle: what of a causal attention's product may be left out (kernels/matmul.py's TRIANGLES);
    # a dense product is exact wherever it is read; out: a View to write the result into (its storage is
    # returned), else a fresh dense one
    def matmul(self, a, b, bias=None, bias_dim=-1, triangle=None, out=None): raise NotImplementedError
    # groups: weight (Co, C / groups, kh, kw), each group's filters over its channels; bias with groups 1 only
    def conv2d(self, x, weight, bias, stride, padding, dilation, groups=1): raise NotImplementedError
    def conv2d_input_grad(self, grad, weight, in_shape, padding, dilation, groups=1): raise NotImplementedError
    def conv2d_weight_grad(self, grad, x, kernel, stride, padding, dilation, groups=1): raise NotImplementedError
    def fold(self, g, shape, kernel, stride, dilation, padding=(0, 0)): raise NotImplementedError

    # ---- gather ----
    def gather(self, x, dim, index): raise NotImplementedError
    def scatter_add(self, grad, dim, index, shape): raise NotImplementedError

    # ---- pool: (values, int32 indices) forward; the input's gradient backward ----
    def max_pool2d(self, x, shape, kernel, stride, padding, dilation): raise NotImplementedError
    def max_pool2d_backward(self, grad, indices, shape, kernel, stride, padding, dilation): raise NotImplementedError

    # ---- loss: cross-entropy of (N, C) logits against int labels, rows labelled ignore_index not
    # counted: (loss per row ('none'), or their sum or mean; (N + 1,) stats: each row's log-sum-exp,
    # then the factor the backward multiplies by). Backward: d logits for an upstream gradient per
    # row, or of 1 (grad None) ----
    def cross_entropy(self, logits, labels, ignore_index, reduction): raise NotImplementedError
    def cross_entropy_backward(self, logits, labels, stats, grad, ignore_index): raise NotImplementedError

    # ---- random: draw() gives (seed, offset) and runs again at each jit replay ----
    def random(self, shape, normal, draw, dtype): raise NotImplementedError
    def permutation(self, n, half, draw): raise NotImplementedError

    # ---- optim: fused updates of many parameters, and gradient clipping over many gradients ----
    def optimizer_step(self, update, regions, states, segments, hyper, gate=None):
        """Update parameters and their state in place with update (webgrad.optim.fused.FusedUpdate:
        its kind, hyperparameters and state buffers by name). regions: flat Views of an arena
        (webgrad.optim.arena), laid out alike: the parameters', then one per name in states, one after
        another in one buffer from its start, or each at the start of its own; segments: (start,
        grad) for each parameter to update: its elements from `start` of each region, its gradient a
        contiguous View (in none of the regions' buffers). hyper() gives the step's hyperparameters
        as update's record; it runs once per call, and again at each jit replay, so learning-rate
        changes and step counts reach replayed steps. gate (a GradScaler's step), a float32 View of
        three elements: whether the gradients overflowed (nonzero: leave everything as it is), the
        step count after this step, and the factor each gradient is read times (where it is not 1,
        each gradient is also left times it, as torch's fused updates leave them unscaled); then
        hyper(step_count) gives the record at that count (or hyper() one whose step-dependent values
        go unused, where the kernel works them out itself)."""
        raise NotImplementedError

    # The norm of contiguous gradient Views together, in parts: (storage, count) of partials (of the
    # gradients' dtype; float32 for float16 gradients, whose squares would overflow) that a
    # sum (a max for norm_type inf, a min for -inf) folds into the sum of |x|^norm_type (the max or
    # the min of |x|; norm_type is not 0); scale_grads multiplies each gradient in place by
    # min(1, max_norm / (total + 1e-6)) (total: a View of one element), as torch's clipping does.
    def grad_norm_partials(self, grads, norm_type): raise NotImplementedError
    def scale_grads(self, grads, max_norm, total): raise NotImplementedError

    # ---- scan: running sums of x along dim (from its end when reverse), contiguous in x's shape ----
    def cumsum(self, x, dim, reverse=False): raise NotImplementedError

    # ---- sort: int32 indices sorting x along dim, stably (NaN above every number) ----
    def argsort(self, x, dim, descending=False): raise NotImplementedError

    # ---- norm: (y, stats) of an (R, C) view normalised along rows (layer norm when centered, else
    # RMS), times weight plus bias ((C,) or None); stats (R, 2): each row's mean (0 for RMS) and rstd.
    # Backward: (dx, (2, C) d weight and d bias where param_grads, else None) ----
    def norm(self, x, weight, bias, eps, centered): raise NotImplementedError
    def norm_backward(self, grad, x, stats, weight, centered, param_grads): raise NotImplementedError

    # ---- embedding: rows of an (R, C) weight picked by a 1-D int32 index, (N, C); backward sums each
    # row's picks into an (R, C) gradient (none for padding_idx; divided by the row's count where
    # scale_by_freq) ----
    def embedding(self, weight, index): raise NotImplementedError
    def embedding_backward(self, grad, index, rows, padding_idx, scale_by_freq): raise NotImplementedError

    # ---- attention: softmax(q k^T * scale + mask) v over (*B, L, E) q, (*B, S, E) k and (*B, S, Ev) v
    # of one batch shape; mask None, or a bool (True attends) or float (added) view of (*B, L, S);
    # causal: key s only for queries l >= s. Returns one storage: out (*B, L, Ev), then each query's
    # log-sum-exp (*B, L). Backward, from out's gradient and that storage: (dq storage, a storage of
    # dk (*B, S, E) then dv (*B, S, Ev)); storages may run on past what they hold ----
    # layouts: (out, dq, dk, dv)'s strides, which a backend with attention_layouts writes them
    # through (a transposed view's results then view the transpose back), others write contiguous
    attention_max_head = None   # the largest E and Ev attention() takes (None: any)
    attention_layouts = False
    def attention_keeps_weights(self, batch, queries, keys): return False   # webgpu's kept-weights path
    def attention(self, q, k, v, mask, causal, scale, layouts=None): raise NotImplementedError
    def attention_backward(self, grad, q, k, v, saved, mask, causal, scale, layouts=None): raise NotImplementedError
