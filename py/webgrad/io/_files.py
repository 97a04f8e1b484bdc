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
