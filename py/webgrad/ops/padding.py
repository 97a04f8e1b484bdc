"""torch.nn.functional.pad in all its modes. Constant padding writes the input into a filled tensor
(ops.conv.pad); reflect, replicate and circular padding gather each padded dim's source positions
(index_select), so they run on the input's device and their gradient sums back into the input."""
from .. import dtypes
from .conv import pad as constant_pad
from .creation import tensor

_SOURCE = {
    "reflect": lambda j, n: -j if j < 0 else (2 * (n - 1) - j if j >= n else j),
    "replicate": lambda j, n: min(max(j, 0), n - 1),
    "circular": lambda j, n: j % n,
}


def _check_sizes(input, pad, mode):
    dims = len(pad) // 2
    if len(pad) % 2 or dims not in (1, 2, 3) or input.ndim not in (dims + 1, dims + 2):
        raise NotImplementedError(
            f"Padding size {len(pad)} is not supported for {input.ndim}D input tensor.\n"
            "Supported combinations for non-constant padding:\n"
            "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
            "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
            "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")
    for i in range(dims):
        dim = input.ndim - 1 - i
        before, after, size = pad[2 * i], pad[2 * i + 1], input.shape[dim]
        if mode == "reflect" and (before >= size or after >= size):
            raise RuntimeError(f"Argument #4: Padding size should be less than the corresponding input dimension, "
                               f"but got: padding ({before}, {after}) at dimension {dim} of input "
                               f"{list(input.shape)}")
        if mode == "circular" and (before > size or after > size):
            raise RuntimeError("Padding value causes wrapping around more than once.")
        if mode == "replicate" and size == 0:
            raise RuntimeError(f"padding: the input's dim {dim} is empty, so there is nothing to replicate")


def pad(input, pad, mode="constant", value=None):
    """pad = (last_before, last_after, previous_before, previous_after, ...); negative widths crop."""
    if mode == "constant":
        return constant_pad(input, pad, 0.0 if value is None else value)
    if mode not in _SOURCE:
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if value is not None and value != 0:
        raise RuntimeError(f"Padding mode \"{mode}\" doesn't take in value argument")
    pad = [int(p) for p in pad]
    _check_sizes(input, pad, mode)
    out = input
    for i in range(len(pad) // 2):
        dim, before, after = input.ndim - 1 - i, pad[2 * i], pad[2 * i + 1]
        crop_before, crop_after = max(-before, 0), max(-after, 0)   # negative widths crop, before the padding
        size = out.shape[dim] - crop_before - crop_after
        sources = [crop_before + _SOURCE[mode](j, size) for j in range(-max(before, 0), size + max(after, 0))]
        out = out.index_select(dim, tensor(sources, dtype=dtypes.int32, device=input.device))
    return out
