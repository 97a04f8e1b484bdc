"""WebGPU moves whole 4-byte words into and out of buffers: a write or a read of any bytes widened to
the words that hold them (runtime.py's write and read)."""


def word_aligned(offset, data, read_word):
    """(start, bytes) widening a write of data at offset to whole 4-byte words, which is all WebGPU
    writes; the edge words keep their current bytes (read_word(at) reads 4 bytes: a blocking
    readback, but tensors are word-aligned, so this is the rare path)."""
    data = memoryview(data).cast("B")
    n = len(data)
    start, end = offset & ~3, (offset + n + 3) & ~3
    if n == 0 or (start, end) == (offset, offset + n):
        return start, data
    span = bytearray(end - start)
    span[:4] = read_word(start)
    span[-4:] = read_word(end - 4)
    span[offset - start: offset - start + n] = data
    return start, span


def word_window(offset, nbytes):
    """(start, size): the whole 4-byte words that hold bytes [offset, offset + nbytes), which is
    all WebGPU copies out of a buffer."""
    start = offset & ~3
    return start, ((offset + nbytes + 3) & ~3) - start
