"""The IDX format of the MNIST files: two zero bytes, a type code, the number of dims, the dims
as big-endian u32, then the data. Gzipped files are read as they are.

The file is read as a stream and only as far as its header says it goes, then checked to end
there: a wrong header fails before any large read, and a gzip stream that inflates to far more
than it declares is never inflated past that."""
import array
import gzip
import io
import math
import os
import struct
import zlib

from .. import dtypes
from ._files import open_regular, read_upto

_TYPES = {0x08: dtypes.uint8, 0x0C: dtypes.int32, 0x0D: dtypes.float32}
_GZIP_MAGIC = b"\x1f\x8b"


def read_idx(source, device=None):
    """A tensor from an IDX file (a path, or its bytes), gzipped or not. uint8 data stays uint8."""
    from ..ops.creation import frombuffer
    if isinstance(source, (bytes, bytearray, memoryview)):
        where, f = "IDX data", io.BytesIO(source)
    else:
        where = os.fspath(source)
        f = open_regular(where, "an IDX file")
    with f:
        if f.read(2) != _GZIP_MAGIC:
            f.seek(0)
            dtype, shape, body = _read(f, where)
        else:
            f.seek(0)
            try:
                dtype, shape, body = _read(gzip.GzipFile(fileobj=f), where)
            except (OSError, EOFError, zlib.error) as e:   # a bad CRC, a cut or corrupt stream, trailing bytes
                raise ValueError(f"{where}: corrupt gzip stream ({e})") from None
    if dtype is not dtypes.uint8:   # IDX is big-endian; tensors are little-endian
        words = array.array("I", body)
        words.byteswap()
        body = words.tobytes()
    return frombuffer(body, dtype, device=device).reshape(shape)


def _read(f, where):
    """(dtype, shape, the raw big-endian data) of the IDX stream f, which must end where its data does."""
    head = f.read(4)
    if len(head) < 4 or head[:2] != b"\0\0":
        raise ValueError(f"{where}: not an IDX file (bad magic {head.hex() or 'empty'})")
    if head[2] not in _TYPES:
        raise ValueError(f"{where}: unknown IDX type code {head[2]:#04x}")
    dtype, ndim = _TYPES[head[2]], head[3]
    dims = f.read(4 * ndim)
    if len(dims) < 4 * ndim:
        raise ValueError(f"{where}: truncated IDX header ({ndim} dims declared, {len(dims) // 4} present)")
    shape = struct.unpack(f">{ndim}I", dims)
    expected = math.prod(shape) * dtype.itemsize
    body = read_upto(f, expected)
    if len(body) < expected:
        raise ValueError(f"{where}: IDX dims {list(shape)} need {expected} data bytes, the file has {len(body)}")
    if f.read(1):
        raise ValueError(f"{where}: IDX dims {list(shape)} need {expected} data bytes, the file has more")
    return dtype, shape, body
