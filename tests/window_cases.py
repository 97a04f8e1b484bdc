"""Random sliding-window cases shared by the convolution and pooling tests: sizes drawn from the
test's seeded generator, and each pair of sizes written either way torch accepts."""
from conftest import rng


def draw(low, high):
    """A whole number from low to high, both included."""
    return int(rng().integers(low, high + 1))


def pair_or_int(a, b):
    """(a, b), or a lone int when both are equal half of the time: both spellings must work."""
    return a if a == b and rng().random() < 0.5 else (a, b)


def input_size(k, d, p, extra):
    """An input size that fits a kernel k with dilation d after padding p on both sides, plus up to `extra`."""
    need = max(1, d * (k - 1) + 1 - 2 * p)
    return need + draw(0, extra)
