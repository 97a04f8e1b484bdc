"""wg.jit's fusion, continued (fusion.py): a cross-entropy's backward for backward()'s implicit 1 runs in
its forward's dispatch.

ops/loss.py's node takes that 1 as no gradient at all (Function.takes_unit_grad), so its backward kernel
(kernels/loss.py) reads nothing that the forward did not have: the logits, the labels, and the stats the
forward wrote. Where a recording holds a one-workgroup forward (forward_sum) and such a backward of the
same stats, and no dispatch between the two writes what the backward reads or touches the buffer it
writes, the forward's dispatch writes d logits too (shaders/loss.wgsl: the backward's expression, so
the values are the backward kernel's bit for bit) and the backward's dispatch goes.
"""
import struct

from .kernels.loss import LOSS_PARAMS, loss_pipeline
from .runtime import PARAMS_BYTES

_FORWARD, _BACKWARD = ("loss", "forward_sum", None), ("loss", "backward", None)
# The words a forward and its backward share: all but `mean` (the backward's factor comes from stats).
_WORDS = len(LOSS_PARAMS.scalars) + 3
_MEAN = [f.name for f in LOSS_PARAMS.scalars].index("mean")


def fold_loss_backward(runtime, recording):
    """Fold each such backward into its forward (see the module's doc); returns how many dispatches went.
    (The loss kernels' words are fixed at recording: none of them is among those a replay refreshes.)"""
    keys = {pipeline: key for key, pipeline in runtime._pipelines.items() if key in (_FORWARD, _BACKWARD)}
    folded = 0
    j = 0
    while j < len(recording.dispatches):
        forward = _forward_of(runtime, recording, keys, j)
        if forward is None:
            j += 1
            continue
        _, handles, grid = recording.dispatches[forward]
        d_logits = recording.dispatches[j][1][0]
        recording.dispatches[forward] = (loss_pipeline(runtime, "forward_sum", "d_logits"), handles + (d_logits,),
                                         grid)
        del recording.dispatches[j]
        del recording.params[j * PARAMS_BYTES:(j + 1) * PARAMS_BYTES]
        recording.refresh = [(index - (index > j), words) for index, words in recording.refresh]
        folded += 1
    return folded


def _forward_of(runtime, recording, keys, j):
    """The index of the forward_sum dispatch that dispatch j, a backward of an implicit 1, may fold into,
    or None."""
    pipeline, handles, _ = recording.dispatches[j]
    if keys.get(pipeline) != _BACKWARD:
        return None
    d_logits, reads = handles[0], set(handles[1:4])   # stats, logits, labels (then the index error words)
    words = _words(recording, j)
    for i in range(j - 1, -1, -1):
        pipeline_i, handles_i, _ = recording.dispatches[i]
        if keys.get(pipeline_i) == _FORWARD and handles_i[1:] == handles[1:] and _words(recording, i) == words:
            return i
        writes = {h for h, mode in zip(handles_i, runtime._layout_of[pipeline_i]) if mode != "read"}
        if writes & reads or d_logits in handles_i:
            return None
    return None


def _words(recording, index):
    """A loss dispatch's parameter words, `mean` left out."""
    words = struct.unpack_from(f"<{_WORDS}I", recording.params, index * PARAMS_BYTES)
    return words[:_MEAN] + words[_MEAN + 1:]
