"""TensorDataset and DataLoader. Batches are gathered on the data's device: a shuffled epoch is
one permutation made on the device (randperm) and an index_select per batch, an unshuffled one is
slices (views)."""
from ..ops.creation import PERMUTATION_ROUNDS, randperm


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

    With shuffle, each epoch draws a new permutation: from its own stream keyed by `seed`, or with
    seed None, as in PyTorch, from webgrad's generator (so manual_seed repeats the orders).
    """

    def __init__(self, dataset, batch_size=1, shuffle=False, drop_last=False, seed=None):
        if not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size}")
        self.dataset, self.batch_size, self.shuffle, self.drop_last = dataset, batch_size, shuffle, drop_last
        self._seed, self._epochs = seed, 0

    def __len__(self):
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self):
        n = len(self.dataset)
        order = None
        if self.shuffle:
            draw = None if self._seed is None else self._own_stream()
            order = randperm(n, device=self.dataset.device, draw=draw)
        for start in range(0, len(self) * self.batch_size, self.batch_size):
            window = slice(start, min(start + self.batch_size, n))
            yield self.dataset[window if order is None else order[window]]

    def _own_stream(self):
        """The draw of the next epoch's permutation in this loader's own (seed, offset) stream."""
        epoch, self._epochs = self._epochs, self._epochs + 1
        return lambda: (self._seed & 0xFFFFFFFF, (epoch * PERMUTATION_ROUNDS) & 0xFFFFFFFF)
