"""Containers, with torch.nn's names, methods, errors and reprs: Sequential, ModuleList,
ModuleDict, ParameterList, ParameterDict. Entries are registered submodules (or parameters)
named "0", "1", ... (or by their keys), so state_dict names are PyTorch's."""
import collections
import collections.abc
import itertools
import operator

from .._tensor import Tensor
from .module import Module, Parameter, _addindent, typename


def _abs_index(idx, length):
    """idx as a non-negative int, or IndexError as PyTorch's containers raise it."""
    idx = operator.index(idx)
    if not -length <= idx < length:
        raise IndexError(f"index {idx} is out of range")
    return idx % length


class _IndexedModules(Module):
    """The list part Sequential and ModuleList share: modules named "0", "1", ... in order."""

    def _renumber(self, modules):
        self._modules.clear()
        for i, module in enumerate(modules):
            self._modules[str(i)] = module

    def __getitem__(self, idx):   # by position, whatever the names (a Sequential may have its own)
        if isinstance(idx, slice):
            return self._slice(idx)
        return list(self._modules.values())[_abs_index(idx, len(self))]

    def __setitem__(self, idx, module):
        self.add_module(list(self._modules)[_abs_index(idx, len(self))], module)

    def __delitem__(self, idx):
        modules = list(self._modules.values())
        if isinstance(idx, slice):
            del modules[idx]
        else:
            del modules[_abs_index(idx, len(self))]
        self._renumber(modules)   # the rest keep their order and are numbered from 0 again

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        if not isinstance(modules, collections.abc.Iterable):
            raise TypeError(f"{type(self).__name__}.extend should be called with an iterable, but got "
                            f"{type(modules).__name__}")
        for module in modules:
            self.append(module)
        return self

    def insert(self, index, module):
        if not isinstance(module, Module):
            raise TypeError(f"{typename(module)} is not a Module subclass")
        modules = list(self._modules.values())
        modules.insert(index, module)
        self._renumber(modules)

    def pop(self, key):
        module = self[key]
        del self[key]
        return module

    def __iadd__(self, modules):
        return self.extend(modules)


class Sequential(_IndexedModules):
    """Modules applied in order; named "0", "1", ... (or by the keys of one OrderedDict argument)."""

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], collections.OrderedDict):
            for name, module in args[0].items():
                self.add_module(name, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)

    def _slice(self, idx):
        return type(self)(collections.OrderedDict(list(self._modules.items())[idx]))

    def __add__(self, other):
        if not isinstance(other, Sequential):
            raise ValueError(f"add operator supports only objects of Sequential class, but {type(other)} is given.")
        return Sequential(*self, *other)

    def forward(self, input):
        for module in self:
            input = module(input)
        return input


class ModuleList(_IndexedModules):
    """A list of modules, registered so their parameters are the owner's; no forward of its own."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def _slice(self, idx):
        return type(self)(list(self._modules.values())[idx])

    def __add__(self, other):
        return ModuleList(itertools.chain(self, other))

    def __repr__(self):
        """Runs of equal modules print once: '(0-2): 3 x Linear(...)'."""
        if not self._modules:
            return self._get_name() + "()"
        reprs = [repr(m) for m in self]
        lines, start = [], 0
        for i in range(1, len(reprs) + 1):
            if i == len(reprs) or reprs[i] != reprs[start]:
                run = i - start
                line = f"({start}): {reprs[start]}" if run == 1 else f"({start}-{i - 1}): {run} x {reprs[start]}"
                lines.append(_addindent(line, 2))
                start = i
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"


class ModuleDict(Module):
    """An ordered dict of modules, registered under their keys."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def clear(self):
        self._modules.clear()

    def pop(self, key):
        module = self[key]
        del self[key]
        return module

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules):
        for key, module in _pairs(modules, "ModuleDict"):
            self[key] = module


def _pairs(entries, owner, sort_plain_dicts=False):
    """(key, value) pairs from a mapping or an iterable of pairs, checked as PyTorch checks them."""
    if not isinstance(entries, collections.abc.Iterable):
        raise TypeError(f"{owner}.update should be called with an iterable of key/value pairs, but got "
                        f"{type(entries).__name__}")
    if isinstance(entries, collections.abc.Mapping) or hasattr(entries, "items"):
        items = list(entries.items())
        # an unordered mapping's keys are sorted (PyTorch's ParameterDict rule, from before dicts kept order)
        plain = not isinstance(entries, (collections.OrderedDict, ModuleDict, ParameterDict))
        return sorted(items) if sort_plain_dicts and plain else items
    pairs = []
    for j, pair in enumerate(entries):
        if not isinstance(pair, collections.abc.Iterable):
            raise TypeError(f"{owner} update sequence element #{j} should be Iterable; is {type(pair).__name__}")
        pair = tuple(pair)
        if len(pair) != 2:
            raise ValueError(f"{owner} update sequence element #{j} has length {len(pair)}; 2 is required")
        pairs.append(pair)
    return pairs


def _describe(value, type_name):
    """One entry of a ParameterList / ParameterDict repr."""
    if not isinstance(value, Tensor):
        return f"Object of type: {type(value).__name__}"
    size = "x".join(str(s) for s in value.shape)
    device = "" if value.device == "cpu" else f" ({value.device})"
    kind = "Parameter" if isinstance(value, Parameter) else "Tensor"
    return f"{kind} containing: [{type_name(value)} of size {size}{device}]"


class ParameterList(Module):
    """A list of parameters, registered as "0", "1", ...; a plain Tensor becomes a Parameter."""

    def __init__(self, values=None):
        super().__init__()
        self._size = 0
        if values is not None:
            self.extend(values)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ParameterList([self[i] for i in range(len(self))[idx]])
        return getattr(self, str(_abs_index(idx, len(self))))

    def __setitem__(self, idx, value):
        if isinstance(value, Tensor) and not isinstance(value, Parameter):
            value = Parameter(value)
        setattr(self, str(_abs_index(idx, len(self))), value)

    def __len__(self):
        return self._size

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def append(self, value):
        self._size += 1
        self[self._size - 1] = value
        return self

    def extend(self, values):
        if not isinstance(values, collections.abc.Iterable) or isinstance(values, Tensor):
            raise TypeError(f"ParameterList.extend should be called with an iterable, but got {type(values).__name__}")
        for value in values:
            self.append(value)
        return self

    def __iadd__(self, values):
        return self.extend(values)

    def __call__(self, *args, **kwargs):
        raise RuntimeError("ParameterList should not be called.")

    def extra_repr(self):
        return "\n".join(f"  ({i}): " + _describe(p, lambda t: repr(t.dtype)) for i, p in enumerate(self))


class ParameterDict(Module):
    """An ordered dict of parameters under string keys; a plain Tensor becomes a Parameter."""

    def __init__(self, parameters=None):
        super().__init__()
        self._keys = {}
        if parameters is not None:
            self.update(parameters)

    @staticmethod
    def _attr(key):
        if not isinstance(key, str):
            raise TypeError(f"Index given to ParameterDict cannot be used as a key as it is not a string (type is "
                            f"'{type(key).__name__}').")
        return key

    def __getitem__(self, key):
        return getattr(self, self._attr(key))

    def __setitem__(self, key, value):
        attr = self._attr(key)
        self._keys[key] = None
        if isinstance(value, Tensor) and not isinstance(value, Parameter):
            value = Parameter(value)
        setattr(self, attr, value)

    def __delitem__(self, key):
        del self._keys[key]
        delattr(self, self._attr(key))

    def __len__(self):
        return len(self._keys)

    def __iter__(self):
        return iter(self._keys)

    def __reversed__(self):
        return reversed(list(self._keys))

    def __contains__(self, key):
        return key in self._keys

    def copy(self):
        return ParameterDict(collections.OrderedDict(self.items()))

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]

    def clear(self):
        for key in list(self._keys):
            del self[key]

    def pop(self, key):
        value = self[key]
        del self[key]
        return value

    def popitem(self):
        key = next(reversed(self._keys))
        return key, self.pop(key)

    def get(self, key, default=None):
        return self[key] if key in self else default

    def fromkeys(self, keys, default=None):
        return ParameterDict((k, default) for k in keys)

    def keys(self):
        return self._keys.keys()

    def items(self):
        return [(k, self[k]) for k in self._keys]

    def values(self):
        return [self[k] for k in self._keys]

    def update(self, parameters):
        for key, value in _pairs(parameters, "ParametersDict", sort_plain_dicts=True):
            self[key] = value

    def __or__(self, other):
        out = self.copy()
        out.update(other)
        return out

    def __ror__(self, other):
        out = ParameterDict(other)
        out.update(self)
        return out

    def __ior__(self, other):
        self.update(other)
        return self

    def __call__(self, input):
        raise RuntimeError("ParameterDict should not be called.")

    def extra_repr(self):
        return "\n".join(f"  ({k}): " + _describe(p, typename) for k, p in self.items())
