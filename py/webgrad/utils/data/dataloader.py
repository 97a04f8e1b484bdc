"""DataLoader, as torch's, run in-process: num_workers, pin_memory, timeout, prefetch_factor and
the other worker options are checked as torch checks them and otherwise have no effect (the page
has no processes to spread over; a loader's batches are made on the device anyway).

A tensor-indexed dataset (TensorDataset, webgrad.data.MNIST, or Subsets of them) with the default
collate is batched on its device: each batch is one gather per tensor by an int32 index tensor,
not a stack of items. With the default samplers the index tensor is a window of the epoch's
permutation, made on the device by randperm (a slice, a view, when unshuffled); with other
samplers it is each batch's index list, uploaded. Other datasets are fetched item by item and
collated, as torch does.
"""
import itertools

from ... import dtypes
from ..._tensor import Tensor
from ...ops.creation import tensor
from ._utils.collate import default_collate, default_convert
from .dataset import IterableDataset, Subset, TensorDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler, _Seeded

__all__ = ["DataLoader", "TENSOR_INDEXED", "get_worker_info"]

# Dataset types (exact: a subclass may redefine __getitem__) whose __getitem__ also takes a slice or
# an int32 index tensor on the dataset's `device` and returns those rows' batch as default_collate
# would make it (a tuple of stacked tensors). webgrad.data adds MNIST.
TENSOR_INDEXED = {TensorDataset}

_FROZEN = ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset", "persistent_workers")


class _InfiniteConstantSampler(Sampler):
    """An iterable dataset's sampler: None forever (the dataset's stream says when it ends)."""

    def __iter__(self):
        return itertools.repeat(None)


def get_worker_info():
    """None: every dataset runs in the loading process, as in torch with num_workers=0."""
    return None


class DataLoader:
    """Batches of a dataset, torch's arguments and checks. Map-style datasets go through a sampler
    (SequentialSampler, or RandomSampler(generator=generator) with shuffle) and a BatchSampler;
    batch_size=None yields the samples one by one, unbatched. Iterable datasets yield their stream
    in batches.

    seed (webgrad's, keyword only): shuffle from a stream of this loader's own keyed by seed, the
    same orders on every device and every run; without seed or generator the orders come from
    webgrad's generator, so manual_seed repeats them.
    """

    _initialized = False

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None, persistent_workers=False,
                 pin_memory_device="", in_order=True, seed=None):
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing."
                             "let num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor to None.")
        if prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        if multiprocessing_context is not None and num_workers == 0:
            raise ValueError("multiprocessing_context can only be used with multi-process loading "
                             f"(num_workers > 0), but got num_workers={num_workers}")
        if seed is not None:
            if generator is not None:
                raise ValueError("DataLoader: give seed or generator, not both")
            generator = _Seeded(seed)

        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            if shuffle not in (False, None):
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle option, "
                                 f"but got shuffle={shuffle}")
            if sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified sampler option, "
                                 f"but got sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified batch_sampler option, "
                                 f"but got batch_sampler={batch_sampler}")
        shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, "
                                 "and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with drop_last")

        if sampler is None:
            sampler = (_InfiniteConstantSampler() if self._iterable else
                       RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset))
        # with a BatchSampler of its own, batches are windows of batch_size on the sampler's order (so a
        # permutation made on the device can stay there)
        self._windows = batch_sampler is None and batch_size is not None
        if self._windows:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.dataset, self.batch_size, self.drop_last = dataset, batch_size, drop_last
        self.sampler, self.batch_sampler, self.generator = sampler, batch_sampler, generator
        if collate_fn is None:
            collate_fn = default_collate if batch_sampler is not None else default_convert
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        self.collate_fn = collate_fn
        self.num_workers, self.pin_memory, self.timeout = num_workers, pin_memory, timeout
        self.worker_init_fn, self.multiprocessing_context = worker_init_fn, multiprocessing_context
        self.prefetch_factor, self.persistent_workers = prefetch_factor, persistent_workers
        self.pin_memory_device, self.in_order = pin_memory_device, in_order
        self._source = None   # (base dataset, rows) of a tensor-indexed dataset, made at the first pass
        self._initialized = True

    def __setattr__(self, name, value):
        if self._initialized and name in _FROZEN:
            raise ValueError(f"{name} attribute should not be set after {type(self).__name__} is initialized")
        super().__setattr__(name, value)

    def __len__(self):
        if self._iterable:
            n = len(self.dataset)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return len(self.batch_sampler if self.batch_sampler is not None else self.sampler)

    def __iter__(self):
        if self._iterable:
            return self._stream()
        if self.batch_sampler is not None and self.collate_fn is default_collate:
            if self._source is None:
                self._source = _tensor_source(self.dataset) or False
            if self._source:
                return self._gathered(*self._source)
        return self._fetched()

    def _stream(self):
        items = iter(self.dataset)
        if self.batch_size is None:
            for item in items:
                yield self.collate_fn(item)
            return
        while batch := list(itertools.islice(items, self.batch_size)):
            if self.drop_last and len(batch) < self.batch_size:
                return
            yield self.collate_fn(batch)

    def _fetched(self):
        if self.batch_sampler is None:
            for index in self.sampler:
                yield self.collate_fn(self.dataset[index])
            return
        getitems = getattr(self.dataset, "__getitems__", None)
        for indices in self.batch_sampler:
            yield self.collate_fn(getitems(indices) if callable(getitems)
                                  else [self.dataset[i] for i in indices])

    def _gathered(self, base, rows):
        """Batches of base's rows, one gather each. rows: base's rows in the dataset's order (None:
        all of base, in order)."""
        sampler, device = self.sampler, base.device
        permuted = type(sampler) is RandomSampler and not sampler.replacement
        if self._windows and (permuted or type(sampler) is SequentialSampler) and sampler.data_source is self.dataset:
            order = sampler.order(device) if permuted else None
            if rows is not None:
                order = rows if order is None else rows[order]
            count = len(sampler)
            for start in range(0, len(self.batch_sampler) * self.batch_size, self.batch_size):
                window = slice(start, min(start + self.batch_size, count))
                yield list(base[window if order is None else order[window]])
            return
        n = len(self.dataset)
        for indices in self.batch_sampler:
            positions = tensor(_within(indices, n), dtype=dtypes.int32, device=device)
            yield list(base[positions if rows is None else rows[positions]])


def _within(indices, n):
    """indices as non-negative ints (negative ones count from the end, as in indexing); IndexError
    for one out of range (a gather on the GPU could not raise it)."""
    out = []
    for i in indices:
        i = int(i)
        if not -n <= i < n:
            raise IndexError(f"index {i} is out of bounds for dimension 0 with size {n}")
        out.append(i % n)
    return out


def _tensor_source(dataset):
    """(base, rows) when dataset's samples are rows of a tensor-indexed dataset `base`: rows is an
    int32 tensor on base's device mapping dataset's indices to base's (None: dataset is base);
    None for any other dataset."""
    if type(dataset) in TENSOR_INDEXED:
        return dataset, None
    if type(dataset) is not Subset:
        return None
    source = _tensor_source(dataset.dataset)
    if source is None:
        return None
    base, rows = source
    indices = dataset.indices.tolist() if isinstance(dataset.indices, Tensor) else dataset.indices
    positions = tensor(_within(indices, len(dataset.dataset)), dtype=dtypes.int32, device=base.device)
    return base, positions if rows is None else rows[positions]
