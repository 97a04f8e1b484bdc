"""The IDX format of the MNIST files: two zero bytes, a type code, the number of dims, the dims
as big-endian u32, then the data. Gzipped files are read as they are."""
import gzip
import math
import os
import struct
import zlib

from .. import dtypes

_TYPES = {0x08: dtypes.uint8, 0x0C: dtypes.int32, 0x0D: dtypes.float32}


def read_idx(source, device=None):
    """A tensor from an IDX file (a path, or its bytes), gzipped or not. uint8 data stays uint8."""
    from ..ops.creation import frombuffer
    where = os.fspath(source) if not isinstance(source, (bytes, bytearray, memoryview)) else "IDX data"
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
    else:
        with open(source, "rb") as f:
            data = f.read()
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:
            raise ValueError(f"{where}: corrupt gzip stream ({e})") from None
    if len(data) < 4 or data[:2] != b"\0\0":
        raise ValueError(f"{where}: not an IDX file (bad magic {data[:4].hex() or 'empty'})")
    if data[2] not in _TYPES:
        raise ValueError(f"{where}: unknown IDX type code {data[2]:#04x}")
    dtype, ndim = _TYPES[data[2]], data[3]
    if len(data) < 4 + 4 * ndim:
        raise ValueError(f"{where}: truncated IDX header")
    shape = struct.unpack(f">{ndim}I", data[4:4 + 4 * ndim])
    body = data[4 + 4 * ndim:]
    expected = math.prod(shape) * dtype.itemsize
    if len(body) != expected:
        raise ValueError(f"{where}: IDX dims {list(shape)} need {expected} data bytes, the file has {len(body)}")
    if dtype is not dtypes.uint8:   # IDX is big-endian; tensors are little-endian
        body = b"".join(body[i:i + 4][::-1] for i in range(0, len(body), 4))
    return frombuffer(body, dtype, device=device).reshape(shape)
