"""The random family (shaders/random.wgsl): counter-based uniform and normal draws, and randperm."""
import functools
import math

from .... import dtypes
from ...base import PERMUTATION_ROUNDS
from .common import check_gpu_dtype, fill, groups
from .params import ParamBlock, u32

# Both kernels' parameters (their meanings: shaders/random.wgsl). The draw, (seed, offset), is new
# at every call and every replay, so it comes last (ParamBlock.packer).
RANDOM_PARAMS = ParamBlock(u32("numel"), u32("normal"), u32("half"), u32("draw", 2))
# Sizes kept worked out (_sized); past this many the oldest go.
RANDOM_SIZES_KEPT = 256


@functools.lru_cache(maxsize=RANDOM_SIZES_KEPT)
def _sized(numel, normal, half):
    """One size's workgroups, and RANDOM_PARAMS as a function of the draw (seed, offset)."""
    return groups(numel), RANDOM_PARAMS.packer(numel=numel, normal=normal, half=half)


def _source():
    """shaders/random.wgsl, its Feistel network of the rounds the cpu device uses too."""
    return fill("random", RANDOM_PARAMS, rounds=str(PERMUTATION_ROUNDS))


class RandomKernels:
    def random(self, shape, normal, draw, dtype):
        """draw() gives (seed, offset) and moves the generator on; it runs again at each replay."""
        check_gpu_dtype(dtype, "random")
        storage = self._empty(shape, dtype)   # shape names the tensor in a too-large error
        self._random_kernel("main", storage, draw, math.prod(shape), int(normal), 0)
        return storage

    def permutation(self, n, half, draw):
        """randperm(n) as int32 (shaders/random.wgsl's permutation); draw() as for random."""
        storage = self.empty(n, dtypes.int32)
        self._random_kernel("permutation", storage, draw, n, 0, half)
        return storage

    def _random_kernel(self, entry, storage, draw, numel, normal, half):
        """One shaders/random.wgsl dispatch, a thread per element, its words made again (with a new
        draw) at each replay."""
        if numel:
            pipeline = self.runtime.pipeline(("random", entry), _source, entry=entry, bindings=("read_write",))
            workgroups, pack = _sized(numel, normal, half)

            def words():
                return pack(draw())
            self.runtime.dispatch(pipeline, [storage], words(), workgroups, refresh=words)
