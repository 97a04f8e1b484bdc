"""The caches of elementwise ops' plans (elementwise._map's, inplace.modify's): what an op works out
from its operands' signature (shapes, dtypes, devices, strides, scalar types), kept per signature."""
from .._tensor import Tensor


def plan_key(key, args):
    """A plan's key: key (a list of what else sets plans apart) and each operand's signature, a tensor's
    shape, dtype, device and strides, a scalar's type (flat: each kind its own types)."""
    for a in args:
        if isinstance(a, Tensor):
            key += (a.shape, a.dtype, a.device, a._strides)
        else:
            key.append(type(a))
    return tuple(key)


class Plans(dict):
    """Plans by key; past KEPT of them (ever new shapes) the cache starts over."""
    KEPT = 4096

    def keep(self, key, plan):
        if len(self) >= self.KEPT:
            self.clear()
        self[key] = plan
        return plan
