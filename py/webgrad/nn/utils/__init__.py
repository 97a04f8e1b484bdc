"""torch.nn.utils' gradient clipping and parameter/vector conversion.

Clipping stays on the gradients' device: the total norm and the clip coefficient are tensors,
and every gradient is scaled by min(1, max_norm / (norm + 1e-6)) whatever its value, as PyTorch
does, so nothing is read back to the host (unless error_if_nonfinite asks for a check). Like
torch's foreach path it works on many gradients at once: per device and dtype, a norm kernel
covers as many gradients as one dispatch binds (Backend.grad_norm_partials), two small ops fold
its partials into the norm, and one scale kernel multiplies them all (Backend.scale_grads).
"""
import math

from ... import dtypes
from ..._tensor import Tensor
from ...autograd import no_grad
from ...ops.creation import tensor
from ...ops.movement import cat, stack, write_into
from . import rnn  # (torch.nn.utils.rnn, imported as torch does)

__all__ = ["clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm",
           "parameters_to_vector", "vector_to_parameters"]


def _tensor_list(tensors):
    return [tensors] if isinstance(tensors, Tensor) else list(tensors)


def _vector_norm(x, norm_type):
    """The norm of x's elements as a 0-d tensor: torch.linalg.vector_norm's orders."""
    if norm_type == math.inf:
        return x.abs().amax()
    if norm_type == -math.inf:
        return x.abs().amin()
    if norm_type == 0:
        return (x != 0).to(x.dtype).sum()
    if norm_type == 1:
        return x.abs().sum()
    if norm_type == 2:
        return (x * x).sum().sqrt()
    return (x.abs() ** norm_type).sum() ** (1.0 / norm_type)


def _by_device_and_dtype(tensors):
    parts = {}
    for t in tensors:
        parts.setdefault((t.device, t.dtype), []).append(t)
    return parts.values()


def _total_norm(tensors, norm_type):
    """The norm of all the elements of tensors (of one device and dtype), a 0-d tensor."""
    if norm_type == 0:   # torch's norm of norms counts the tensors with a nonzero, not the nonzeros
        return _vector_norm(stack([_vector_norm(t, 0) for t in tensors]), 0)
    first = tensors[0]
    storage, count = first.backend.grad_norm_partials([t.contiguous()._view for t in tensors], norm_type)
    partial_dtype = dtypes.float32 if first.dtype is dtypes.float16 else first.dtype   # (backend.grad_norm_partials)
    partials = Tensor(storage, (count,), partial_dtype, first.device)
    if norm_type == math.inf:
        total = partials.amax()
    elif norm_type == -math.inf:
        total = partials.amin()
    else:
        total = partials.sum()
        total = total.sqrt() if norm_type == 2 else total if norm_type == 1 else total ** (1.0 / norm_type)
    return total.to(first.dtype)


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The norm of all the tensors' elements together (the norm of their norms), a 0-d tensor on
    the first tensor's device; 0.0 when there are none."""
    tensors = _tensor_list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return tensor(0.0)
    device = tensors[0].device
    with no_grad():
        norms = [_total_norm(part, norm_type) for part in _by_device_and_dtype(tensors)]
        total = norms[0] if len(norms) == 1 else _vector_norm(stack([n.to(device) for n in norms]), norm_type)
    if error_if_nonfinite and not math.isfinite(total.item()):   # the one host read, only when asked
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, so "
                           "it cannot be clipped. To disable this error and scale the gradients by the non-finite "
                           "norm anyway, set `error_if_nonfinite=False`")
    return total


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scale the parameters' gradients in place by min(1, max_norm / (total_norm + 1e-6))."""
    grads = [p.grad for p in _tensor_list(parameters) if p.grad is not None]
    if not grads:
        return
    with no_grad():
        total_norm = total_norm if isinstance(total_norm, Tensor) else tensor(float(total_norm))
        for part in _by_device_and_dtype(grads):
            total = total_norm.to(dtype=part[0].dtype, device=part[0].device).reshape(()).contiguous()
            flat = [g if g.is_contiguous() else g.contiguous() for g in part]   # strided ones: scaled copies
            part[0].backend.scale_grads([g._view for g in flat], float(max_norm), total._view)
            for g, scaled in zip(part, flat):
                if scaled is not g:
                    write_into(g, scaled)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Scale the gradients of parameters (an iterable of tensors, or one tensor) in place so that
    their total norm is at most max_norm; returns the total norm before clipping (a tensor)."""
    parameters = _tensor_list(parameters)
    total = get_total_norm([p.grad for p in parameters if p.grad is not None], norm_type, error_if_nonfinite,
                           foreach)
    clip_grads_with_norm_(parameters, max_norm, total, foreach)
    return total


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every gradient in place to [-clip_value, clip_value]."""
    clip_value = float(clip_value)
    with no_grad():
        for p in _tensor_list(parameters):
            if p.grad is not None:
                write_into(p.grad, p.grad.clamp(-clip_value, clip_value))


def parameters_to_vector(parameters):
    """The parameters' values flattened and joined into one 1-D tensor."""
    return cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec, parameters):
    """Copy consecutive slices of the 1-D vec into the parameters, in place."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected webgrad.Tensor, but got: {type(vec).__name__}")
    offset = 0
    with no_grad():
        for p in parameters:
            n = p.numel()
            write_into(p, vec[offset:offset + n].reshape(p.shape))
            offset += n
