"""wg.save / wg.load in the safetensors format: an 8-byte little-endian header length, a JSON
header naming each tensor's dtype, shape and byte range, then the raw little-endian data.
A file is checked whole before any tensor is made, so a corrupt file loads nothing; the checks are
the safetensors package's (the entries tile the data section exactly), plus: no duplicate names.
A file that does not start as one ("not a safetensors file") is told apart from a damaged one ("not
a valid safetensors file"), and said what it is where its first bytes tell."""
import json
import math
import os
import struct

from .. import dtypes
from ._files import describe, looks_like_safetensors, open_regular

_CODES = {dtypes.float32: "F32", dtypes.float64: "F64", dtypes.float16: "F16", dtypes.int32: "I32", dtypes.uint8: "U8",
          dtypes.bool_: "BOOL"}
_DTYPES = {code: dtype for dtype, code in _CODES.items()}


def save(tensors, path, metadata=None):
    """Write a dict of name -> Tensor (a state_dict) to path."""
    from .._tensor import Tensor
    header, blobs, at = {}, [], 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name, t in tensors.items():
        if not isinstance(t, Tensor):
            raise TypeError(f"save: {name!r} is a {type(t).__name__}, not a Tensor")
        raw = t.detach().contiguous()._host_bytes()
        header[name] = {"dtype": _CODES[t.dtype], "shape": list(t.shape), "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)   # the data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)


def load(path, device=None):
    """Read a safetensors file into a dict of name -> Tensor on device."""
    from ..ops.creation import frombuffer
    with open_regular(path, "a safetensors file") as f:
        data = f.read()
    entries, view = _parse(data, os.fspath(path)), memoryview(data)   # views: no copy of each tensor
    return {name: frombuffer(view[begin:end], dtype, device=device).reshape(shape)
            for name, (dtype, shape, begin, end) in entries.items()}


def _parse(data, where):
    def fail(why):
        raise ValueError(f"{where}: not a valid safetensors file: {why}")

    if not looks_like_safetensors(data):   # some other file: say what it is, not what its bytes would mean
        if len(data) < 8:
            why = f"{len(data)} bytes, shorter than the 8-byte header length a safetensors file starts with"
        else:
            what = describe(data)
            why = f"it is {what}" if what else "its start is no safetensors header (an 8-byte length, then JSON)"
        raise ValueError(f"{where}: not a safetensors file: {why}")
    (size,) = struct.unpack("<Q", data[:8])
    if size > len(data) - 8:
        fail(f"header length {size} runs past the end of the file ({len(data)} bytes)")
    try:
        header = json.loads(data[8:8 + size], object_pairs_hook=_unique_keys)
    except _DuplicateKey as e:
        fail(f"the header names {e.args[0]!r} twice")
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        fail(f"header is not JSON ({e})")
    metadata = header.pop("__metadata__", {})
    if not (isinstance(metadata, dict) and all(isinstance(v, str) for v in metadata.values())):
        fail(f"__metadata__ is not an object of strings: {metadata!r}")
    body = len(data) - 8 - size
    entries, spans = {}, []
    for name, info in header.items():
        try:
            dtype, shape, (begin, end) = _DTYPES[info["dtype"]], info["shape"], info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            fail(f"entry {name!r} lacks a known dtype, shape or data_offsets: {info!r}")
        if not (isinstance(shape, list) and all(type(s) is int and s >= 0 for s in shape)):
            fail(f"entry {name!r} has a bad shape {shape!r}")
        if not (type(begin) is int and type(end) is int and 0 <= begin <= end <= body):
            fail(f"entry {name!r} has data offsets {[begin, end]} outside the {body}-byte data section")
        if end - begin != math.prod(shape) * dtype.itemsize:
            fail(f"entry {name!r} holds {end - begin} bytes, but {info['dtype']}{shape} needs "
                 f"{math.prod(shape) * dtype.itemsize}")
        entries[name] = (dtype, tuple(shape), 8 + size + begin, 8 + size + end)
        spans.append((begin, end))
    at = 0   # the entries, in offset order, cover the data section without overlaps or gaps
    for begin, end in sorted(spans):
        if begin < at:
            fail("two tensors' data overlap")
        if begin > at:
            fail(f"bytes {at} to {begin} of the data section belong to no tensor")
        at = end
    if at != body:
        fail(f"the data section has {body} bytes, its tensors cover {at}")
    return entries


class _DuplicateKey(ValueError):
    pass


def _unique_keys(pairs):
    """A JSON object as a dict, refusing a name given twice (json would keep the last silently)."""
    out = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out
