"""TensorDataset and DataLoader. Batches are gathered on the data's device: a shuffled epoch is
one uploaded permutation and an index_select per batch, an unshuffled one is slices (views)."""
import array
import random

from ..ops.creation import _drawer, frombuffer


class TensorDataset:
    """Tensors sharing their first dimension; indexing (an int, a slice or an index tensor)
    indexes them all."""

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        if any(t.ndim == 0 or t.shape[0] != tensors[0].shape[0] for t in tensors):
            raise ValueError(f"Size mismatch between tensors: {[tuple(t.shape) for t in tensors]}")
        if len({t.device for t in tensors}) > 1:
            raise ValueError(f"TensorDataset: tensors are on different devices: {[t.device for t in tensors]}")
        self.tensors = tensors

    @property
    def device(self):
        return self.tensors[0].device

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]


class DataLoader:
    """Batches of a dataset that takes slices and int32 index tensors (as TensorDataset does).

    With shuffle, each epoch draws a new permutation from a random.Random seeded once by `seed`;
    with seed None, as in PyTorch, each epoch seeds it from webgrad's generator (so manual_seed
    repeats the orders).
    """

    def __init__(self, dataset, batch_size=1, shuffle=False, drop_last=False, seed=None):
        if not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size}")
        self.dataset, self.batch_size, self.shuffle, self.drop_last = dataset, batch_size, shuffle, drop_last
        self._rng = None if seed is None else random.Random(seed)

    def __len__(self):
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self):
        n = len(self.dataset)
        order = None
        if self.shuffle:
            perm = list(range(n))
            (self._rng or random.Random(_generator_position())).shuffle(perm)
            order = frombuffer(array.array("i", perm), "int32", device=self.dataset.device)
        for start in range(0, len(self) * self.batch_size, self.batch_size):
            window = slice(start, min(start + self.batch_size, n))
            yield self.dataset[window if order is None else order[window]]


def _generator_position():
    """A shuffle seed drawn from webgrad's generator, so manual_seed makes shuffles repeat."""
    seed, offset = _drawer(1)()
    return (seed << 32) | offset
