"""Saving a checkpoint: an object's tensors become storage records, and the pickle names them in
torch._utils._rebuild_tensor_v2 calls, as torch.save writes them.

Tensors that share a storage (views, tied weights) share one record, which holds only the span of
the storage they reach, so they load as views of one storage again.
"""
import json
import math

from .._tensor import Size, Tensor
from . import archive
from .pickle_writer import Global, Persistent, Reduce, Unsupported, dump
from .storage_types import SAVED_AS
from .walk import describe, find

_SAVABLE = "tensors, dicts, OrderedDicts, lists, tuples, sets, strings, bytes, numbers, bools and None"


class CheckpointWriter:
    """obj pickled, with the storage records of its tensors: one per storage (and dtype) they view,
    holding the span of elements they reach; keys are numbered in the order the pickle meets them.
    A value that can't be saved is a TypeError here, before any file is opened."""

    def __init__(self, obj):
        self.spans = {}   # (id(storage), dtype) -> [a tensor on it, lowest element, past the highest, key]
        for _, t in find(obj, Tensor):
            span = self.spans.setdefault((id(t._storage), t.dtype), [t, math.inf, -math.inf, None])
            if t.numel():
                span[1] = min(span[1], t._offset)
                span[2] = max(span[2], t._offset + sum((n - 1) * st for n, st in zip(t.shape, t._strides)) + 1)
        self.order = []
        try:
            self.pickled = dump(obj, self.reduce)
        except Unsupported as e:
            raise TypeError(f"save: can't save a value of type {type(e.obj).__name__} (at "
                            f"{describe(e.path) or 'the top level'}); webgrad saves {_SAVABLE}") from None

    def reduce(self, obj):
        """What the pickle writes for a tensor (and for a Size, as torch.Size)."""
        if type(obj) is Size:
            return Reduce(Global("torch", "Size"), (tuple(obj),))
        if not isinstance(obj, Tensor):
            return None
        span = self.spans[(id(obj._storage), obj.dtype)]
        if span[3] is None:
            span[3] = str(len(self.order))
            self.order.append(span)
        numel = max(span[2] - span[1], 0)
        storage = Persistent(("storage", Global("torch", SAVED_AS[obj.dtype]), span[3], "cpu", numel))
        offset = obj._offset - span[1] if obj.numel() else 0
        return Reduce(Global("torch._utils", "_rebuild_tensor_v2"),
                      (storage, offset, tuple(obj.shape), tuple(obj._strides), obj.requires_grad,
                       Reduce(Global("collections", "OrderedDict"), ())))

    def write(self, f):
        archive.write(f, self.records())

    def records(self):
        """(record name, bytes) in the archive's order; one storage's elements in memory at a time."""
        yield "data.pkl", self.pickled
        yield "byteorder", b"little"
        yield archive.DEVICES_RECORD, json.dumps({key: t.device for t, _, _, key in self.order}).encode()
        for t, lo, hi, key in self.order:
            span = Tensor(t._storage, (hi - lo,), t.dtype, t.device, (1,), lo) if hi > lo else None
            yield f"data/{key}", span._host_bytes() if span is not None else b""
        yield "version", b"3\n"
