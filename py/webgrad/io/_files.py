"""What both file readers share: opening only regular files, and reading at most what a file holds."""
import os
import stat

_CHUNK = 1 << 20


def open_regular(path, what):
    """path opened for reading bytes; a ValueError for a device, FIFO or socket (whose reads may
    never end), the usual OSError for a missing file or a directory, TypeError for what is no
    path (open() would take an int as a file descriptor)."""
    f = open(os.fspath(path), "rb")
    if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
        f.close()
        raise ValueError(f"{path}: not a regular file, so not {what}")
    return f


def read_upto(f, n):
    """Up to n bytes of f. In chunks: f.read(n) would allocate all n bytes first, and n comes from
    the file's own header, which may claim terabytes."""
    out = bytearray()
    while len(out) < n:
        chunk = f.read(min(n - len(out), _CHUNK))
        if not chunk:
            break
        out += chunk
    return out


# Leading bytes of the files a user may pick by mistake, and what each one is.
_MAGIC = ((b"PK\x03\x04", "a zip archive (the checkpoint format of torch.save)"), (b"\x1f\x8b", "gzip-compressed"),
          (b"\x80\x02", "a pickle (PyTorch's checkpoint format from before torch 1.6)"),
          (b"\x89PNG", "a PNG image"), (b"\xff\xd8\xff", "a JPEG image"), (b"GIF8", "a GIF image"),
          (b"%PDF", "a PDF document"))


MAX_SAFETENSORS_HEADER = 100 * 1024 * 1024   # the safetensors package's limit


def looks_like_safetensors(data):
    """Whether data starts as a safetensors file does: an 8-byte little-endian header length of a
    header that may be (whether or not the file holds all of it), then the header's opening '{'."""
    return data[8:9] == b"{" and 2 <= int.from_bytes(data[:8], "little") <= MAX_SAFETENSORS_HEADER


def describe(data):
    """What a file's bytes are, as far as their start tells ("a PNG image", "text", ...), or None."""
    if looks_like_safetensors(data):
        return "a safetensors file"
    for magic, what in _MAGIC:
        if data.startswith(magic):
            return what
    head = bytes(data[:512])
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as e:   # a multi-byte character cut off at the end of head is still text
        text = head[:e.start].decode("utf-8") if e.start >= len(head) - 3 else ""
    if text and all(c.isprintable() or c in "\n\r\t" for c in text):
        return "text"
    return None
