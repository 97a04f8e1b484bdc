"""Vector norms along a dim, as torch.nn.functional has them: normalize, cosine_similarity and
pairwise_distance, composed of reductions and elementwise ops (any device, with gradients)."""
from ..amp import autocast_op
from .movement import broadcast_shapes


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """input / max(||input||_p, eps) along dim."""
    if out is not None:
        raise NotImplementedError("normalize: out= is not supported")
    return input / input.norm(p, dim, keepdim=True).clamp(min=eps)


@autocast_op
def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """sum(x1 / max(||x1||, eps) * x2 / max(||x2||, eps)) along dim, x1 and x2 broadcast together."""
    shape = broadcast_shapes(x1.shape, x2.shape)
    x1, x2 = x1.expand(shape), x2.expand(shape)
    unit1 = x1 / x1.norm(2, dim, keepdim=True).clamp(min=eps)
    unit2 = x2 / x2.norm(2, dim, keepdim=True).clamp(min=eps)
    return (unit1 * unit2).sum(dim)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """||x1 - x2 + eps||_p along the last dim."""
    return (x1 - x2 + eps).norm(p, -1, keepdim)
