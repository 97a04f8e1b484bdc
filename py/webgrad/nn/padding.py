"""Padding layers (ZeroPad, ConstantPad, ReflectionPad, ReplicationPad, CircularPad in 1-3 dims),
with torch.nn's arguments and reprs; the maths is F.pad (webgrad.ops.padding)."""
from . import functional as F
from .module import Module


class _PadNd(Module):
    _dims, _mode = 1, "reflect"

    def __init__(self, padding):
        super().__init__()
        widths = (padding,) * (2 * self._dims) if isinstance(padding, int) else tuple(padding)
        if len(widths) != 2 * self._dims:
            raise ValueError(f"{type(self).__name__}: padding must be an int or {2 * self._dims} ints, got "
                             f"{padding!r}")
        self.padding = widths

    def forward(self, input):
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self):
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding, value):
        super().__init__(padding)
        self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


class _ZeroPadNd(_ConstantPadNd):
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


def _padding_class(name, base, dims, mode):
    return type(name, (base,), {"_dims": dims, "_mode": mode, "__module__": __name__,
                                "__doc__": f"{mode.capitalize()} padding of the last {dims} dim(s)."})


ZeroPad1d, ZeroPad2d, ZeroPad3d = (_padding_class(f"ZeroPad{d}d", _ZeroPadNd, d, "constant") for d in (1, 2, 3))
ConstantPad1d, ConstantPad2d, ConstantPad3d = (_padding_class(f"ConstantPad{d}d", _ConstantPadNd, d, "constant")
                                               for d in (1, 2, 3))
ReflectionPad1d, ReflectionPad2d, ReflectionPad3d = (_padding_class(f"ReflectionPad{d}d", _PadNd, d, "reflect")
                                                     for d in (1, 2, 3))
ReplicationPad1d, ReplicationPad2d, ReplicationPad3d = (_padding_class(f"ReplicationPad{d}d", _PadNd, d, "replicate")
                                                        for d in (1, 2, 3))
CircularPad1d, CircularPad2d, CircularPad3d = (_padding_class(f"CircularPad{d}d", _PadNd, d, "circular")
                                               for d in (1, 2, 3))
