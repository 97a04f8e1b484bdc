"""Samplers: the order in which a DataLoader visits a map-style dataset's indices, as torch's.

Randomness comes from a generator's stream of (seed, offset) keys, the one webgrad's random ops
use (see ops/creation.py): generator=None draws from webgrad's global generator, so
webgrad.manual_seed repeats every shuffle. Permutations are made on a device by randperm (a
DataLoader keeps them there to gather its batches); sampling with replacement and weighted
sampling run on the host in Python's `random`, seeded from the same stream.
"""
import itertools
import math
import random
import weakref

from ..._tensor import Tensor
from ...ops.creation import PERMUTATION_ROUNDS, _drawer, randperm
from ...ops.movement import cat

__all__ = ["BatchSampler", "RandomSampler", "Sampler", "SequentialSampler", "SubsetRandomSampler",
           "WeightedRandomSampler"]

# ---- generators ----
# A generator object here is anything with initial_seed() (torch.Generator's interface). Its stream
# is (initial_seed(), offset); the offset of each one's next draw is kept here, so samplers sharing
# a generator draw different numbers, and restarts at 0 when the generator's seed changes (re-seeding
# it with the seed it has goes unseen: a generator of webgrad's own would carry its offset itself).
_offsets = weakref.WeakKeyDictionary()


def drawer(generator, count):
    """A draw() for randperm: the (seed, offset) of `count` fresh keys of generator's stream
    (webgrad's global generator when None), moving the stream past them."""
    if generator is None:
        return _drawer(count)

    def draw():
        seed = int(generator.initial_seed()) & 0xFFFFFFFF
        last_seed, offset = _offsets.get(generator, (seed, 0))
        offset = offset if last_seed == seed else 0
        _offsets[generator] = (seed, (offset + count) & 0xFFFFFFFF)
        return seed, offset
    return draw


def permutation(n, generator=None, device=None):
    """A random permutation of range(n) as an int32 tensor on device, from generator's stream."""
    return randperm(n, device=device, draw=drawer(generator, PERMUTATION_ROUNDS))


def host_random(generator=None):
    """A Python random.Random seeded by the next key of generator's stream (as torch seeds a fresh
    generator from its default one for each pass of a RandomSampler)."""
    seed, offset = drawer(generator, 1)()
    return random.Random(seed << 32 | offset)


class _Seeded:
    """A generator of its own, for DataLoader(seed=...): a fresh stream keyed by seed."""

    def __init__(self, seed):
        self._seed = int(seed)

    def initial_seed(self):
        return self._seed


# ---- samplers ----
class Sampler:
    """Base class: __iter__ gives indices (or lists of them, for a batch sampler); __len__, if
    defined, how many."""

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """Indices in random order: each pass a new permutation (num_samples beyond len(data_source)
    chain several), or with replacement num_samples independent uniform draws."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source, self.replacement = data_source, replacement
        self._num_samples, self.generator = num_samples, generator
        if not isinstance(replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got replacement={replacement}")
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={self.num_samples}")

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def order(self, device=None):
        """One pass without replacement as an int32 tensor on device (where a DataLoader gathers
        its batches with it)."""
        n, count = len(self.data_source), self.num_samples
        perms = [permutation(n, self.generator, device) for _ in range(-(-count // n))]
        order = perms[0] if len(perms) == 1 else cat(perms)
        return order if count == n else order[:count]

    def __iter__(self):
        if self.replacement:
            n, rng = len(self.data_source), host_random(self.generator)
            return iter([rng.randrange(n) for _ in range(self.num_samples)])
        return iter(self.order().tolist())

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices, in a new random order each pass."""

    def __init__(self, indices, generator=None):
        self.indices, self.generator = indices, generator

    def __iter__(self):
        for i in permutation(len(self.indices), self.generator).tolist():
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """num_samples indices of range(len(weights)), each drawn with probability proportional to its
    weight; without replacement an index is not drawn twice (successive draws among the rest)."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={num_samples}")
        if not isinstance(replacement, bool):
            raise ValueError(f"replacement should be a boolean value, but got replacement={replacement}")
        values = weights.tolist() if isinstance(weights, Tensor) else list(weights)
        if any(isinstance(w, (list, tuple)) for w in values):
            raise ValueError(f"weights should be a 1d sequence but given weights have shape {_shape(values)}")
        self.weights = [float(w) for w in values]
        self.num_samples, self.replacement, self.generator = num_samples, replacement, generator

    def __iter__(self):
        w = self.weights
        # torch.multinomial's checks, raised when sampling as there
        if any(not math.isfinite(v) or v < 0 for v in w):
            raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
        if sum(w) <= 0:
            raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
        if not self.replacement and self.num_samples > len(w):
            raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
        rng = host_random(self.generator)
        if self.replacement:
            return iter(rng.choices(range(len(w)), weights=w, k=self.num_samples))
        # Efraimidis-Spirakis: the num_samples largest keys u**(1/w) are a draw without replacement;
        # indices of weight 0 come last (as torch.multinomial puts them), here in index order
        keys = sorted((-(rng.random() ** (1 / v)) if v > 0 else 0.0, i) for i, v in enumerate(w))
        return iter([i for _, i in keys[:self.num_samples]])

    def __len__(self):
        return self.num_samples


def _shape(values):
    shape = []
    while isinstance(values, (list, tuple)):
        shape.append(len(values))
        values = values[0] if values else None
    return tuple(shape)


class BatchSampler(Sampler):
    """Lists of batch_size indices from sampler; the last one shorter, or dropped with drop_last."""

    def __init__(self, sampler, batch_size, drop_last):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

    def __iter__(self):
        indices = iter(self.sampler)
        while batch := list(itertools.islice(indices, self.batch_size)):
            if self.drop_last and len(batch) < self.batch_size:
                return
            yield batch

    def __len__(self):
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size
