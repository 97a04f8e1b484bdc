"""The optim family (shaders/optim.wgsl): one fused update per parameter tensor."""
from ..runtime import f32_bits
from .common import fill, groups


class OptimKernels:
    def optimizer_step(self, kind, param, grad, states, hyper):
        """kind 'sgd', 'sgd_momentum' or 'adam': update param (and its state tensors) in place; hyper()
        gives the kernel's hyperparameters (floats, with flags as ints, see shaders/optim.wgsl) and
        runs again at each replay, so learning-rate changes and step counts reach replayed steps."""
        numel = param.numel()
        if numel == 0:
            return
        bindings = ("read_write", "read") + ("read_write",) * len(states)
        pipeline = self.runtime.pipeline(("optim", kind, len(states)), lambda: fill("optim", None),
                                         entry=kind, bindings=bindings)

        def words():
            return [numel, param.offset, grad.offset] + [
                h if isinstance(h, int) and not isinstance(h, bool) else f32_bits(h) for h in hyper()]
        self.runtime.dispatch(pipeline, [param.storage, grad.storage] + [s.storage for s in states],
                              words(), groups(numel), refresh=words)

