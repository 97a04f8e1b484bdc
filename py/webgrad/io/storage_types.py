"""The dtype rules of checkpoints: the torch storage classes webgrad reads, each with its element
format in the file and how its elements become a webgrad dtype, and the class each webgrad dtype
is saved as.

webgrad has float32, float64 (cpu only), float16, int32, uint8 and bool, and saves each as itself.
From PyTorch files, int64 loads as int32 when every value fits (an OverflowError otherwise), int8 and
int16 as int32, bfloat16 as float32 (all exact). A storage class missing here
(complex, quantized, float8, ...) is a global the reader refuses.
"""
import array

from .. import dtypes


def _as_is(elements):
    return elements.tobytes()


def _bools(elements):
    return elements.tobytes().translate(_NONZERO_IS_ONE)   # webgrad's bool storage holds 0 and 1 only


_NONZERO_IS_ONE = bytes([0] + [1] * 255)


def _int64_to_int32(elements):
    if elements and not (-2**31 <= min(elements) and max(elements) < 2**31):
        raise OverflowError(f"int64 values from {min(elements)} to {max(elements)} do not fit in int32, "
                            f"webgrad's integer dtype")
    return array.array("i", elements).tobytes()


def _to_int32(elements):
    return array.array("i", elements).tobytes()


def _bfloat16_to_float32(elements):
    return array.array("I", [bits << 16 for bits in elements]).tobytes()   # bfloat16: float32's top half


class StorageType:
    """A torch storage class webgrad reads: the file's element format and how it becomes a webgrad dtype."""

    def __init__(self, name, code, dtype, convert):
        self.name, self.code, self.dtype, self.convert = name, code, dtype, convert
        self.itemsize = array.array(code).itemsize


STORAGE_TYPES = {t.name: t for t in [
    StorageType("FloatStorage", "f", dtypes.float32, _as_is),
    StorageType("DoubleStorage", "d", dtypes.float64, _as_is),
    StorageType("IntStorage", "i", dtypes.int32, _as_is),
    StorageType("ByteStorage", "B", dtypes.uint8, _as_is),
    StorageType("BoolStorage", "B", dtypes.bool_, _bools),
    StorageType("LongStorage", "q", dtypes.int32, _int64_to_int32),
    StorageType("ShortStorage", "h", dtypes.int32, _to_int32),
    StorageType("CharStorage", "b", dtypes.int32, _to_int32),
    StorageType("HalfStorage", "H", dtypes.float16, _as_is),
    StorageType("BFloat16Storage", "H", dtypes.float32, _bfloat16_to_float32),
]}
SAVED_AS = {dtypes.float32: "FloatStorage", dtypes.float64: "DoubleStorage", dtypes.float16: "HalfStorage",
            dtypes.int32: "IntStorage", dtypes.uint8: "ByteStorage", dtypes.bool_: "BoolStorage"}
