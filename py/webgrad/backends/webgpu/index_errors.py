"""Index errors found on the device and raised on the host, at the next read of a value.

Checking indices on the host would need their values: a readback per op. Instead a kernel that
meets an index outside its range records the first one in a few words the runtime owns
(shaders/index_error.wgsl) and reads in range instead; every read of a value (runtime.read) fetches
those words in the same copy and map as the value, and raises the error they hold, after clearing
them. A bad index so costs no round trip and no dispatch, and its error comes at the first read
after the op, as CUDA's device-side asserts do; under wg.jit the replayed kernels bind the same
words.

A kernel family adopts it in three steps:
  1. its module declares each message once, at import:
         OUT_OF_RANGE = index_errors.code("op", "index {index} is out of bounds ... {dim} ... {size}")
  2. its WGSL is filled with includes=("index_error",) and the code in a slot of its own, declares
         @group(0) @binding(N) var<storage, read_write> index_error: IndexErrorRecord;
     and reads each index through checked_index(index, size, code, dim) (or calls
     report_index_error where "in range" means something else, such as a class label's [0, C));
  3. its dispatches bind runtime.index_errors.storage at binding N, as "read_write".
"""
import struct

# shaders/index_error.wgsl's IndexErrorRecord: flag, code, index, size, dim
RECORD = struct.Struct("<IIiII")
_messages = []   # (op, message) by code - 1


class DeviceIndexError(IndexError, RuntimeError):
    """An index out of range, found by a kernel. An IndexError, as torch raises for x[idx],
    index_select and class targets, and a RuntimeError, as it raises for gather and scatter_add:
    one kernel serves several of those ops and cannot tell which one called it."""


def code(op, message):
    """The code a kernel records op's errors with; message is formatted with the recorded index,
    size and dim (str.format: {index}, {size}, {dim})."""
    if (op, message) not in _messages:
        _messages.append((op, message))
    return _messages.index((op, message)) + 1


class IndexErrors:
    """The runtime's error words: a buffer that the kernels bind (storage) and that every read of a
    value fetches along (region)."""

    def __init__(self, storage, driver):
        self.storage = storage   # a new buffer (WebGPU zero-fills it: no error yet), live for good
        self.region = (storage.handle, 0, RECORD.size)
        self._driver = driver

    def raise_recorded(self, words):
        """Raise the error the words (read from region) hold, if any; they are cleared first, so
        the next error is recorded anew."""
        flag, which, index, size, dim = RECORD.unpack(words)
        if flag:
            self._driver.write_buffer(self.storage.handle, 0, bytes(RECORD.size))
            op, message = _messages[which - 1]
            raise DeviceIndexError(f"{op}: {message.format(index=index, size=size, dim=dim)} (found by a webgpu "
                                   f"kernel; raised at the first read of a value after it)")
