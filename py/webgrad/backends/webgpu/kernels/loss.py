"""The loss family (shaders/loss.wgsl): cross-entropy of logits against class labels, fused each way."""
import functools

from ...base import SUM, flat
from .. import index_errors
from .common import fill, groups
from .params import ParamBlock, i32, u32

# The most logits one thread reads (row after row) where a cross-entropy's sum or mean is taken by
# one workgroup (WORKGROUP_SIZE threads) in the loss's own dispatch; more take a reduce (and for a
# mean, a division) after it. On an H100 each logit costs a thread ~0.12 us and the two dispatches
# saved ~20 us.
CROSS_ENTROPY_SUM_SPAN = 128
# What the kernels report a label outside [0, C) as (torch's words; index_errors.py).
TARGET_ERROR = index_errors.code("cross_entropy", "Target {index} is out of bounds for {size} classes")
# Parameter packers kept, one per layout of logits, labels and upstream gradient.
LOSS_PACKERS_KEPT = 1024

LOSS_PARAMS = ParamBlock(
    u32("rows"), u32("classes"), u32("row_stride"), u32("class_stride"), u32("label_stride"),
    u32("grad_stride"), i32("ignore_index"), u32("mean"),
    u32("offsets", 3))   # of logits, labels and grad: last, as the words that change per call (packer)


class LossKernels:
    def cross_entropy(self, logits, labels, ignore_index, reduction):
        """(loss, stats) of (N, C) logits against int labels (shaders/loss.wgsl): the loss per row
        ('none'), or their sum or mean, in the same dispatch where that fits; stats holds the rows'
        maxima, their log-sums of exp(x - max), then the factor the backward multiplies by."""
        rows, classes = logits.shape
        mean = reduction == "mean"
        stats = self.empty(2 * rows + 1, logits.dtype)
        inputs = [stats, logits.storage, labels.storage, self.runtime.index_errors.storage]
        words = _loss_words(logits, labels, None, ignore_index, mean)
        if reduction != "none" and groups(rows) * classes <= CROSS_ENTROPY_SUM_SPAN:
            loss = self.empty(1, logits.dtype)
            self.runtime.dispatch(loss_pipeline(self.runtime, "forward_sum"), [loss] + inputs, words, 1)
            return loss, stats
        # a mean's rows are followed by whether each counts, which the reduce sums alongside
        loss = self.empty(rows * (1 + mean), logits.dtype)
        if rows:
            self.runtime.dispatch(loss_pipeline(self.runtime, "forward"), [loss] + inputs, words, rows)
        if reduction == "none":
            return loss, stats
        if not mean:
            return self.reduce(SUM, flat(loss, (rows,), logits.dtype), (0,), logits.dtype), stats
        totals = self.reduce(SUM, flat(loss, (2, rows), logits.dtype), (1,), logits.dtype)
        out = self.empty(1, logits.dtype)
        self.runtime.dispatch(loss_pipeline(self.runtime, "finish"), [out, stats, totals], words, 1)
        return out, stats

    def cross_entropy_backward(self, logits, labels, stats, grad, ignore_index):
        """d logits for an upstream gradient per row (grad, an (N,) view) or of 1 (None), times the
        factor the forward left in stats."""
        numel = logits.numel()
        out = self.empty(numel, logits.dtype)
        if numel:
            storages = [out, stats.storage, logits.storage, labels.storage, self.runtime.index_errors.storage]
            if grad is not None:
                storages.append(grad.storage)
            self.runtime.dispatch(loss_pipeline(self.runtime, "backward", "grad" if grad is not None else None),
                                  storages, _loss_words(logits, labels, grad, ignore_index, False), groups(numel))
        return out


def loss_pipeline(runtime, entry, sixth=None):
    """The pipeline of a shaders/loss.wgsl entry point; sixth, what binding 6 holds: None, "grad" (the
    backward's upstream gradient, read) or "d_logits" (forward_sum's, written: the backward of an implicit
    1 folded in by wg.jit's fusion, backends/webgpu/fusion_loss.py)."""
    def source():
        return fill("loss", LOSS_PARAMS, includes=("workgroup", "index_error"), target_error=str(TARGET_ERROR),
                    upstream="grad[params_offsets(2u) + n * params.grad_stride]" if sixth == "grad" else "1.0",
                    sixth_binding=_SIXTH_BINDINGS[sixth], writes_d_logits=str(sixth == "d_logits").lower(),
                    store_d_logits="d_logits[i] = d;" if sixth == "d_logits" else "")
    bindings = {"finish": ("read_write", "read_write", "read")}.get(
        entry, ("read_write", "read_write", "read", "read", "read_write"))
    if sixth is not None:
        bindings += ("read",) if sixth == "grad" else ("read_write",)
    return runtime.pipeline(("loss", entry, sixth), source, entry=entry, bindings=bindings)


_SIXTH_BINDINGS = {None: "", "grad": "@group(0) @binding(6) var<storage, read> grad: array<f32>;",
                   "d_logits": "@group(0) @binding(6) var<storage, read_write> d_logits: array<f32>;"}


def _loss_words(logits, labels, grad, ignore_index, mean):
    """LOSS_PARAMS's words; grad (an (N,) view) only for the backward."""
    pack = _loss_packer(logits.shape, logits.strides, labels.strides[0], 0 if grad is None else grad.strides[0],
                        ignore_index, mean)
    return pack([logits.offset, labels.offset, 0 if grad is None else grad.offset])


@functools.lru_cache(maxsize=LOSS_PACKERS_KEPT)
def _loss_packer(shape, strides, label_stride, grad_stride, ignore_index, mean):
    return LOSS_PARAMS.packer(rows=shape[0], classes=shape[1], row_stride=strides[0], class_stride=strides[1],
                              label_stride=label_stride, grad_stride=grad_stride, ignore_index=ignore_index,
                              mean=int(mean))
