"""How a tensor prints, as in PyTorch: one number format for all the values shown (whole numbers
as `1.`, fixed `precision` decimals, or scientific when the magnitudes call for it), rows wrapped
at `linewidth`, and a tensor past `threshold` elements summarized to `edgeitems` at each end of
every dimension. Only the values shown are read back from the device.
"""
import math

from . import dtypes
from .autograd import no_grad

_PROFILES = {"default": dict(precision=4, threshold=1000, edgeitems=3, linewidth=80),
             "short": dict(precision=2, threshold=1000, edgeitems=2, linewidth=80),
             "full": dict(precision=4, threshold=math.inf, edgeitems=3, linewidth=80)}
_options = dict(_PROFILES["default"], sci_mode=None)


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None, sci_mode=None):
    """torch.set_printoptions: a profile ('default', 'short', 'full') first, then the options given."""
    _options.update(_PROFILES.get(profile, {}))
    given = dict(precision=precision, threshold=threshold, edgeitems=edgeitems, linewidth=linewidth)
    _options.update({name: value for name, value in given.items() if value is not None})
    _options["sci_mode"] = sci_mode   # as in torch: a call that leaves it out goes back to automatic


def get_printoptions():
    """The options, as keywords that set_printoptions takes back (torch has it in torch._tensor_str too)."""
    return dict(_options)


def tensor_repr(t):
    suffixes = [f"device='{t.device}'"] if t.device.type != "cpu" else []
    if t.numel() == 0:   # no values to tell the kind by: the size (unless 1-d) and dtype say it
        body = "[]"
        if t.ndim != 1:
            suffixes.append(f"size={tuple(t.shape)}")
        if t.dtype is not dtypes.float32:
            suffixes.append(f"dtype={t.dtype!r}")
    else:
        with no_grad():
            body = _values_str(t, indent=len("tensor("))
        if not _options["edgeitems"]:
            suffixes.append(f"size={tuple(t.shape)}")
        # int32 is webgrad's default integer type, as int64 is torch's
        if t.dtype not in (dtypes.float32, dtypes.int32, dtypes.bool_):
            suffixes.append(f"dtype={t.dtype!r}")
    if t.requires_grad:   # (webgrad's graph nodes are not named as torch's are: no grad_fn=<...>)
        suffixes.append("requires_grad=True")
    return _with_suffixes("tensor(" + body, suffixes, indent=len("tensor("))


def _values_str(t, indent):
    edge = _options["edgeitems"]
    summarize = t.numel() > _options["threshold"]
    if summarize and not edge:
        return "[...]"
    values = (_edges(t, edge) if summarize else t).tolist()
    fmt = _Formatter(_flat(values), t.dtype.is_floating_point)
    return _layout(values, t.shape, indent, fmt, summarize)


def _edges(t, edge):
    """t cut to its first and last `edge` entries along every dimension longer than 2 * edge."""
    from .ops.movement import cat   # (the ops build on Tensor, which imports this module)
    for dim, size in enumerate(t.shape):
        if size > 2 * edge:
            t = cat([t.narrow(dim, 0, edge), t.narrow(dim, size - edge, edge)], dim)
    return t


def _flat(values):
    if not isinstance(values, list):
        return [values]
    return [v for item in values for v in _flat(item)]


class _Formatter:
    """The format of every value shown, padded to the widest; chosen from the finite nonzero values."""

    def __init__(self, values, floating):
        self.floating, self.precision = floating, _options["precision"]
        self.int_mode, self.sci_mode = True, False
        if not floating:
            self.width = max(len(str(v)) for v in values)
            return
        self.width = 1
        finite = [v for v in values if v != 0 and math.isfinite(v)]
        if not finite:
            return
        self.int_mode = all(v == math.ceil(v) for v in finite)
        largest, smallest = max(map(abs, finite)), min(map(abs, finite))
        automatic = largest / smallest > 1000 or largest > 1e8 or smallest < 1e-4
        self.sci_mode = automatic if _options["sci_mode"] is None else _options["sci_mode"]
        # (nan and inf do not widen the column, as in torch)
        self.width = max(1, *(len(self._text(v)) for v in finite))

    def _text(self, value):
        if not self.floating:
            return str(value)
        if self.sci_mode:
            return f"{value:.{self.precision}e}"
        if self.int_mode:   # whole numbers keep a '.' to show the tensor is floating
            return f"{value:.0f}" + ("." if math.isfinite(value) else "")
        return f"{value:.{self.precision}f}"

    def __call__(self, value):
        return self._text(value).rjust(self.width)


def _layout(values, shape, indent, fmt, summarize):
    """values (nested lists, already cut to the edges when summarizing) laid out under `indent`."""
    if not shape:
        return fmt(values)
    edge = _options["edgeitems"]
    cut = summarize and shape[0] > 2 * edge
    if len(shape) == 1:
        items = [fmt(v) for v in values]
        if cut:
            items[edge:edge] = [" ..."]
        per_line = max(1, (_options["linewidth"] - indent) // (fmt.width + 2))
        lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
        return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"
    rows = [_layout(row, shape[1:], indent + 1, fmt, summarize) for row in values]
    if cut:
        rows[edge:edge] = ["..."]
    # a blank line between blocks for each dimension past the second
    return "[" + ("," + "\n" * (len(shape) - 1) + " " * (indent + 1)).join(rows) + "]"


def _with_suffixes(text, suffixes, indent):
    """text + ', suffix' each, starting a new line under `indent` where the line would pass linewidth."""
    line_length = len(text) - text.rfind("\n") + 1   # (torch's count, one more than the line has)
    for suffix in suffixes:
        if line_length + len(suffix) + 2 > _options["linewidth"]:
            text += ",\n" + " " * indent + suffix
            line_length = indent + len(suffix)
        else:
            text += ", " + suffix
            line_length += len(suffix) + 2
    return text + ")"
