"""The attention family (shaders/attention.wgsl): scaled dot-product attention, fused ("flash"
style): one dispatch forward, two backward (dq, then dk and dv)."""
import math

from .... import dtypes
from .common import check_gpu_dtype, fill
from .params import ParamBlock, f32, u32

# shaders/attention.wgsl's threads per row (G: each holds an eighth of a row's dims, so few
# registers) and rows per workgroup (ROWS: each staged tile serves them all). Past
# ATTENTION_MAX_HEAD dims a thread's share outgrows its registers: the op composes attention there.
ATTENTION_THREADS_PER_ROW = 8
ATTENTION_ROWS = 16
ATTENTION_MAX_HEAD = 128


# The three kernels' parameters (their meanings: shaders/attention.wgsl).
ATTENTION_PARAMS = ParamBlock(
    u32("batch"), u32("dims"), u32("queries"), u32("keys"), u32("head"), u32("value_head"), f32("scale"),
    u32("mask_kind"), u32("causal"), u32("lse_at"), u32("stats_at"), u32("dv_at"),
    u32("shape", "dims"), u32("q_strides", "dims"), u32("k_strides", "dims"), u32("v_strides", "dims"),
    u32("mask_strides", "dims"), u32("dout_strides", "dims"), u32("offsets", 5))


class AttentionKernels:
    attention_max_head = ATTENTION_MAX_HEAD

    def attention(self, q, k, v, mask, causal, scale):
        check_gpu_dtype(q.dtype, "attention of")
        batch, queries = math.prod(q.shape[:-2]), q.shape[-2]
        numel = batch * queries * v.shape[-1]
        saved = self._empty((numel + batch * queries,), q.dtype)   # out, then lse
        # the entry point shares functions that read dout: q is bound there (and for saved), unread
        inputs = [q.storage, k.storage, v.storage, _mask_storage(q, mask), q.storage, q.storage]
        self._attention("forward", [saved, *inputs], q, k, v, mask, None, causal, scale, queries, lse_at=numel)
        return saved

    def attention_backward(self, grad, q, k, v, saved, mask, causal, scale):
        batch, (queries, head), keys = math.prod(q.shape[:-2]), q.shape[-2:], k.shape[-2]
        inputs = [q.storage, k.storage, v.storage, _mask_storage(q, mask), grad.storage]
        dq_numel, dk_numel = batch * queries * head, batch * keys * head
        dq = self._empty((dq_numel + 2 * batch * queries,), q.dtype)   # dq, then the rows' (lse, D)
        dkv = self._empty((dk_numel + batch * keys * v.shape[-1],), q.dtype)   # dk, then dv
        offsets = dict(lse_at=batch * queries * v.shape[-1], stats_at=dq_numel, dv_at=dk_numel)
        self._attention("dq", [dq, *inputs, saved], q, k, v, mask, grad, causal, scale, queries, **offsets)
        self._attention("dkv", [dkv, *inputs, dq], q, k, v, mask, grad, causal, scale, keys, **offsets)
        return dq, dkv

    def _attention(self, entry, storages, q, k, v, mask, grad, causal, scale, rows, lse_at=0, stats_at=0, dv_at=0):
        """One dispatch of `entry`, a workgroup per (batch, ROWS rows); q, k, v, mask and grad share
        their leading (batch) dims."""
        batch_shape = q.shape[:-2]
        batch = math.prod(batch_shape)
        if not batch or not rows:
            return
        dims = len(batch_shape) + 2
        no_mask = (0,) * dims
        words = ATTENTION_PARAMS.pack(
            batch=batch, dims=dims, queries=q.shape[-2], keys=k.shape[-2], head=q.shape[-1], value_head=v.shape[-1],
            scale=scale, mask_kind=0 if mask is None else 1 if mask.dtype is dtypes.bool_ else 2,
            causal=int(causal), lse_at=lse_at, stats_at=stats_at, dv_at=dv_at,
            shape=(*batch_shape, q.shape[-2], k.shape[-2]), q_strides=q.strides, k_strides=k.strides,
            v_strides=v.strides, mask_strides=no_mask if mask is None else mask.strides,
            dout_strides=no_mask if grad is None else grad.strides,
            offsets=[t.offset if t is not None else 0 for t in (q, k, v, mask, grad)])
        per_thread = tuple(-(-size // ATTENTION_THREADS_PER_ROW) for size in (q.shape[-1], v.shape[-1]))
        pipeline = self.runtime.pipeline(
            ("attention", entry, per_thread),
            lambda: fill("attention", ATTENTION_PARAMS, threads_per_row=str(ATTENTION_THREADS_PER_ROW),
                         rows=str(ATTENTION_ROWS), dq=str(per_thread[0]), dv=str(per_thread[1])),
            entry=entry, bindings=("read_write",) + ("read",) * (len(storages) - 1))
        self.runtime.dispatch(pipeline, storages, words, batch * -(-rows // ATTENTION_ROWS))


def _mask_storage(q, mask):
    """The mask's binding: its storage, or q's where there is none (bound, never read)."""
    return q.storage if mask is None else mask.storage
