"""The loss family (shaders/cross_entropy.wgsl): cross-entropy of logits against class labels,
fused each way."""
from ...base import MUL, SUM, flat
from ..runtime import f32_bits
from .common import fill, groups

# The most logits one thread reads (row after row) where a cross-entropy's sum or mean is taken by
# one workgroup of 256 threads in the loss's own dispatch; more take a reduce and a scale after it.
# On an H100 each logit costs a thread ~0.12 us and the two dispatches saved ~20 us.
CROSS_ENTROPY_SUM_SPAN = 128


class LossKernels:
    def cross_entropy(self, logits, labels, scale=None):
        """(loss, lse) of (N, C) logits against int labels (shaders/cross_entropy.wgsl): the loss per
        row, or given a scale, the rows' sum times it, in the same dispatch where that fits."""
        rows, classes = logits.shape
        lse, words = self.empty(rows, logits.dtype), _cross_entropy_words(logits, labels, scale)
        inputs = [lse, logits.storage, labels.storage]
        if scale is not None and rows and groups(rows) * classes <= CROSS_ENTROPY_SUM_SPAN:
            loss = self.empty(1, logits.dtype)
            self.runtime.dispatch(self._cross_entropy_kernel("forward_sum"), [loss] + inputs, words, 1)
            return loss, lse
        loss = self.empty(rows, logits.dtype)
        if rows:
            self.runtime.dispatch(self._cross_entropy_kernel("forward"), [loss] + inputs, words, rows)
        if scale is None:
            return loss, lse
        total = self.reduce(SUM, flat(loss, (rows,), logits.dtype), (0,), logits.dtype)
        return self.map(MUL, (flat(total, (), logits.dtype), scale), (), logits.dtype, logits.dtype), lse

    def cross_entropy_backward(self, logits, labels, lse, grad, scale):
        """d logits, times scale, for an upstream gradient per row (grad, an (N,) view) or of 1 (None)."""
        numel = logits.numel()
        out = self.empty(numel, logits.dtype)
        if numel:
            words = _cross_entropy_words(logits, labels, scale)
            storages = [out, lse.storage, logits.storage, labels.storage]
            if grad is not None:
                words += [grad.offset, grad.strides[0]]
                storages.append(grad.storage)
            self.runtime.dispatch(self._cross_entropy_kernel("backward", grad is not None), storages, words,
                                  groups(numel))
        return out

    def _cross_entropy_kernel(self, entry, with_grad=False):
        upstream = "grad[p[8] + n * p[9]] * pf(7)" if with_grad else "pf(7)"
        return self.runtime.pipeline(("cross_entropy", entry, with_grad),
                                     lambda: fill("cross_entropy", None, upstream=upstream), entry=entry,
                                     bindings=("read_write", "read_write", "read", "read") + ("read",) * with_grad)


def _cross_entropy_words(logits, labels, scale):
    return [*logits.shape, logits.offset, *logits.strides, labels.offset, labels.strides[0],
            f32_bits(1.0 if scale is None else scale)]


