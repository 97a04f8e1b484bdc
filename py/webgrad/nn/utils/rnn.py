"""torch.nn.utils.rnn's pad_sequence: variable-length sequences padded into one batch (webgrad's
recurrent layers take padded batches; there are no PackedSequences)."""
from ...ops.conv import pad
from ...ops.movement import stack

__all__ = ["pad_sequence"]


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Sequences of shape (L_i, *) padded with padding_value to the longest one, L, and stacked:
    (L, B, *), or (B, L, *) with batch_first. Gradients flow back to every sequence."""
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    if padding_side not in ("left", "right"):
        raise ValueError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        missing = longest - s.shape[0]
        widths = (0, 0) * (s.ndim - 1) + ((0, missing) if padding_side == "right" else (missing, 0))
        padded.append(pad(s, widths, padding_value))
    return stack(padded, 0 if batch_first else 1)
