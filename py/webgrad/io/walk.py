"""Walking a saved object: the tensors inside its containers, each named by where it sits
(['model']['fc.weight']), for saving its tensors' storages and for naming a tensor in an error."""
from collections import OrderedDict

from .._tensor import Tensor
from .rebuild import TensorRef

_CONTAINERS = (dict, OrderedDict, list, tuple, set)


def find(obj, kind):
    """(path, x) for every x of `kind` inside obj's dicts, lists, tuples and sets, depth first, each
    container once (an object may hold itself); path reads like an index: ['model']['fc.weight']."""
    seen, stack = set(), [((), obj)]
    while stack:
        path, x = stack.pop()
        if isinstance(x, kind):
            yield describe(path) or "(the saved object itself)", x
            continue
        if type(x) not in _CONTAINERS or id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, dict):
            children = [(path + (("key", k),), k) for k in x] + [(path + (("item", k),), v) for k, v in x.items()]
            children += [(path + (("attribute", k),), v) for k, v in getattr(x, "__dict__", {}).items()]
        elif type(x) is set:
            children = [(path + (("member", None),), v) for v in x]
        else:
            children = [(path + (("item", i),), v) for i, v in enumerate(x)]
        stack.extend(reversed(children))


def describe(path):
    """A path of steps, as pickle_writer.Unsupported lists them, read like an index ('' for none)."""
    return "".join(_label(how, key) for how, key in path)


def _label(how, key):
    if how == "key":
        return f"(the key {key!r:.60})" if not isinstance(key, (Tensor, TensorRef)) else "(a key)"
    return {"item": f"[{key!r:.60}]", "attribute": f".{key!s:.60}", "member": "{a member}"}[how]
