"""The random family (shaders/random.wgsl): counter-based uniform and normal draws, and randperm."""
from .... import dtypes
from .common import check_gpu_dtype, fill, groups


class RandomKernels:
    def random(self, numel, normal, draw, dtype):
        """draw() gives (seed, offset) and moves the generator on; it runs again at each replay."""
        check_gpu_dtype(dtype, "random")
        storage = self.empty(numel, dtype)
        if numel:
            pipeline = self.runtime.pipeline(("random",), lambda: fill("random", None), bindings=("read_write",))

            def words():
                return [numel, *draw(), int(normal)]
            self.runtime.dispatch(pipeline, [storage], words(), groups(numel), refresh=words)
        return storage

    def permutation(self, n, half, draw):
        """randperm(n) as int32 (shaders/random.wgsl's permutation); draw() as for random."""
        storage = self.empty(n, dtypes.int32)
        if n:
            pipeline = self.runtime.pipeline(("random", "permutation"), lambda: fill("random", None),
                                             entry="permutation", bindings=("read_write",))

            def words():
                return [n, *draw(), half]
            self.runtime.dispatch(pipeline, [storage], words(), groups(n), refresh=words)
        return storage

