"""Embedding lookup (torch.nn.functional.embedding): rows of a weight picked by int indices, one
kernel each way on the webgpu device (shaders/embedding.wgsl). An index outside [0, rows) raises an
IndexError: at the op on cpu, at the next read of a value on webgpu (its kernel records it on the
device: backends/webgpu/index_errors.py). The weight's gradient sums each row's picks on the device,
deterministically (in the order of the positions)."""
from .. import dtypes
from ..autograd import Function
from .half import computes_in_float32
from .._tensor import Tensor


class _Embedding(Function):
    def forward(self, weight, index, padding_idx, scale_grad_by_freq):
        self.flat = index.reshape(-1)
        self.rows, self.padding_idx, self.scale = weight.shape[0], padding_idx, scale_grad_by_freq
        out = weight.backend.embedding(weight._view, self.flat._view)
        return Tensor(out, tuple(index.shape) + (weight.shape[1],), weight.dtype, weight.device)

    def backward(self, grad):
        cols = grad.shape[-1]
        storage = grad.backend.embedding_backward(grad.reshape(-1, cols)._view, self.flat._view, self.rows,
                                                  self.padding_idx, self.scale)
        return Tensor(storage, (self.rows, cols), grad.dtype, grad.device), None


@computes_in_float32
def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """weight[input]: input int32 indices of any shape into the rows of a 2-D weight. The row
    padding_idx (negative counts from the end) gets no gradient; with scale_grad_by_freq a row's
    gradient is divided by how often the batch picks it."""
    if max_norm is not None:
        raise NotImplementedError("embedding: max_norm (renormalising the picked rows in place) is not supported")
    if sparse:
        raise NotImplementedError("embedding: sparse gradients are not supported; use sparse=False")
    if not isinstance(input, Tensor) or not isinstance(weight, Tensor):
        raise TypeError("embedding: input and weight must be Tensors")
    if input.dtype is not dtypes.int32:
        raise RuntimeError(f"embedding: expected int32 indices (Long/Int in torch), got {input.dtype.name}")
    if weight.ndim != 2:
        raise RuntimeError(f"'weight' must be 2-D, got shape {tuple(weight.shape)}")
    if input.device != weight.device:
        raise RuntimeError(f"embedding: expected the indices on the weight's device {weight.device}, "
                           f"got {input.device}")
    if padding_idx is not None:
        if not -weight.shape[0] <= padding_idx < weight.shape[0]:
            raise AssertionError("Padding_idx must be within num_embeddings")
        padding_idx %= weight.shape[0]
    return _Embedding.apply(weight, input, padding_idx, bool(scale_grad_by_freq))
