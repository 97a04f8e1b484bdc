"""default_collate and default_convert, as torch's: samples (tensors, numbers, strings and the
dicts, namedtuples, tuples and lists of them) into batches.

Numbers follow torch's dtypes as far as webgrad has them: ints become int32 (webgrad's long),
floats float64 on the cpu device and float32 on webgpu (WGSL has no f64). NumPy is not imported
here (the page has none); NumPy values are recognised by their type's module.
"""
import array
import collections.abc
import copy
import re

from .... import dtypes
from ....backends import default_device
from ...._tensor import Tensor
from ....ops.creation import as_tensor, frombuffer, tensor
from ....ops.movement import stack

_numpy_text_or_object = re.compile(r"[SaUO]")   # dtype.str of arrays default_collate cannot make tensors of

default_collate_err_msg_format = ("default_collate: batch must contain tensors, numpy arrays, numbers, "
                                  "dicts or lists; found {}")


def _is_numpy(value):
    return type(value).__module__ == "numpy" and type(value).__name__ not in ("str_", "string_", "bytes_")


def default_convert(data):
    """NumPy arrays and scalars inside data (a sample, or a batch a custom sampler made) become
    tensors; containers are rebuilt around them; anything else is returned as is."""
    if isinstance(data, Tensor):
        return data
    if _is_numpy(data):
        if type(data).__name__ == "ndarray" and _numpy_text_or_object.search(data.dtype.str):
            return data
        return as_tensor(data)
    return _rebuild(data, default_convert)


def _rebuild(data, convert):
    """data's container of the same type holding convert(each element); data itself if it is no container."""
    if isinstance(data, collections.abc.Mapping):
        return _same_mapping(data, {key: convert(data[key]) for key in data})
    if isinstance(data, tuple) and hasattr(data, "_fields"):   # namedtuple
        return type(data)(*(convert(d) for d in data))
    if isinstance(data, tuple):
        return [convert(d) for d in data]   # a list, as torch gives
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        return _same_sequence(data, [convert(d) for d in data])
    return data


def _same_mapping(like, items):
    """A mapping of like's type holding items (a plain dict where that type cannot be built so)."""
    try:
        if isinstance(like, collections.abc.MutableMapping):
            clone = copy.copy(like)
            clone.update(items)
            return clone
        return type(like)(items)
    except TypeError:
        return items


def _same_sequence(like, items):
    try:
        if isinstance(like, collections.abc.MutableSequence):
            clone = copy.copy(like)
            for i, item in enumerate(items):
                clone[i] = item
            return clone
        return type(like)(items)
    except TypeError:
        return items


def collate(batch, *, collate_fn_map=None):
    """Collate a list of samples: an element type found in collate_fn_map (exactly, else by
    isinstance in the map's order) is collated by its function; containers are collated field by
    field; anything else is a TypeError."""
    elem = batch[0]
    if collate_fn_map is not None:
        if type(elem) in collate_fn_map:
            return collate_fn_map[type(elem)](batch, collate_fn_map=collate_fn_map)
        for kind, fn in collate_fn_map.items():
            if isinstance(elem, kind):
                return fn(batch, collate_fn_map=collate_fn_map)
        if _is_numpy(elem):   # torch lists NumPy's types in default_collate_fn_map; NumPy is not imported here
            return collate_numpy_fn(batch, collate_fn_map=collate_fn_map)
    if isinstance(elem, collections.abc.Mapping):
        return _same_mapping(elem, {key: collate([d[key] for d in batch], collate_fn_map=collate_fn_map)
                                    for key in elem})
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):   # namedtuple
        return type(elem)(*(collate(samples, collate_fn_map=collate_fn_map) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        if any(len(sample) != len(elem) for sample in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        fields = [collate(samples, collate_fn_map=collate_fn_map) for samples in zip(*batch)]
        return fields if isinstance(elem, tuple) else _same_sequence(elem, fields)
    raise TypeError(default_collate_err_msg_format.format(type(elem)))


def collate_tensor_fn(batch, *, collate_fn_map=None):
    return stack(batch, 0)


def collate_numpy_fn(batch, *, collate_fn_map=None):
    elem = batch[0]
    if type(elem).__name__ == "ndarray":
        if _numpy_text_or_object.search(elem.dtype.str):
            raise TypeError(default_collate_err_msg_format.format(elem.dtype))
        return collate([as_tensor(b) for b in batch], collate_fn_map=collate_fn_map)
    import numpy   # the batch holds NumPy scalars, so NumPy is there
    return as_tensor(numpy.asarray(batch))


def collate_float_fn(batch, *, collate_fn_map=None):
    device = default_device()   # where torch.tensor(batch) would put them
    dtype = dtypes.float64 if device == "cpu" else dtypes.float32
    # from the numbers' own bytes: tensor(batch, dtype=float64) reads them as float32 first
    return frombuffer(array.array(dtype.array_code, batch), dtype, device=device)


def collate_int_fn(batch, *, collate_fn_map=None):
    return tensor(batch)


def collate_str_fn(batch, *, collate_fn_map=None):
    return batch


default_collate_fn_map = {Tensor: collate_tensor_fn, float: collate_float_fn, int: collate_int_fn,
                          str: collate_str_fn, bytes: collate_str_fn}


def default_collate(batch):
    """A list of samples as one batch: tensors stacked on a new first dimension, numbers as a
    tensor, strings as a list, dicts / namedtuples / sequences collated per field (a tuple's
    fields come back as a list, as torch gives)."""
    return collate(batch, collate_fn_map=default_collate_fn_map)
