"""Module, PyTorch's container of parameters and submodules.

A parameter is a leaf tensor that requires grad (Tensor has __slots__, so there is no Parameter
subclass): assigning one to a module attribute registers it in `_parameters`, assigning a Module
registers it in `_modules`, in assignment order, which gives PyTorch's dotted state_dict names.
"""
import collections

from ..autograd import no_grad
from ..ops.creation import as_tensor, zeros_like
from ..ops.movement import write_into
from .._tensor import Tensor


def Parameter(data, requires_grad=True):  # noqa: N802 (PyTorch's name)
    """A new leaf tensor sharing data's values (copied when data is not contiguous)."""
    return data.detach().contiguous().requires_grad_(requires_grad)


def _is_parameter(value):
    return isinstance(value, Tensor) and value.requires_grad and value.is_leaf


IncompatibleKeys = collections.namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


class Module:
    def __init__(self):
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_modules", {})
        self.training = True

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} has no forward()")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    # ---- attribute registration ----
    def __setattr__(self, name, value):
        params, modules = self.__dict__.get("_parameters"), self.__dict__.get("_modules")
        if params is None:
            raise AttributeError("cannot assign module attributes before Module.__init__() call")
        params.pop(name, None)
        modules.pop(name, None)
        self.__dict__.pop(name, None)
        if _is_parameter(value):
            params[name] = value
        elif isinstance(value, Module):
            modules[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name):  # only called when normal lookup fails
        for store in ("_parameters", "_modules"):
            found = self.__dict__.get(store, {})
            if name in found:
                return found[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for store in (self._parameters, self._modules):
            if name in store:
                del store[name]
                return
        object.__delattr__(self, name)

    def add_module(self, name, module):
        setattr(self, name, module)

    # ---- traversal ----
    def _walk(self, prefix=""):
        """(dotted name, module) of self and every descendant, shared ones as often as they occur."""
        yield prefix, self
        for name, child in self._modules.items():
            yield from child._walk(f"{prefix}.{name}" if prefix else name)

    def _all_parameters(self, prefix="", recurse=True):
        walk = self._walk(prefix) if recurse else [(prefix, self)]
        for module_name, module in walk:
            for name, p in module._parameters.items():
                yield (f"{module_name}.{name}" if module_name else name), p

    def named_parameters(self, prefix="", recurse=True):
        seen = set()
        for name, p in self._all_parameters(prefix, recurse):
            if id(p) not in seen:
                seen.add(id(p))
                yield name, p

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_children(self):
        yield from self._modules.items()

    def children(self):
        yield from self._modules.values()

    def named_modules(self, prefix=""):
        seen = set()
        for name, module in self._walk(prefix):
            if id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def modules(self):
        for _, module in self.named_modules():
            yield module

    # ---- state ----
    def state_dict(self):
        """Ordered name -> detached parameter (sharing storage), with PyTorch's dotted names."""
        return collections.OrderedDict((name, p.detach()) for name, p in self._all_parameters())

    def load_state_dict(self, state_dict, strict=True):
        """Copy values into the existing parameters in place, so optimizers keep their references."""
        own = dict(self._all_parameters())
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        errors = []
        if strict and unexpected:
            errors.append("Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ".")
        if strict and missing:
            errors.append("Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ".")
        sources = {}
        for name, value in state_dict.items():
            if name not in own:
                continue
            param = own[name]
            sources[name] = as_tensor(value, dtype=param.dtype, device=param.device)
            if sources[name].shape != param.shape:
                errors.append(f"size mismatch for {name}: copying a param with shape {tuple(sources[name].shape)} "
                              f"from checkpoint, the shape in current model is {tuple(param.shape)}.")
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" + "\n\t".join(errors))
        with no_grad():
            for name, source in sources.items():
                write_into(own[name], source)
        return IncompatibleKeys(missing, unexpected)

    # ---- modes and devices ----
    def train(self, mode=True):
        for module in self.modules():
            module.training = mode
        return self

    def eval(self):
        return self.train(False)

    def to(self, *args, **kwargs):
        """Move (or cast) parameters, as Tensor.to takes them: each becomes a new leaf tensor."""
        moved = {}  # id -> new tensor, so a parameter shared by two modules stays shared
        with no_grad():
            for module in self.modules():
                for name, p in module._parameters.items():
                    if id(p) not in moved:
                        new = p.to(*args, **kwargs)
                        if new is not p:
                            new.requires_grad_()
                            new.grad = None if p.grad is None else p.grad.to(*args, **kwargs)
                        moved[id(p)] = new
                    module._parameters[name] = moved[id(p)]
        return self

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            p.grad = None if set_to_none or p.grad is None else zeros_like(p.grad)

    # ---- printing ----
    def extra_repr(self):
        return ""

    def __repr__(self):
        lines = [line for line in self.extra_repr().split("\n") if line]
        lines += [f"({name}): " + repr(child).replace("\n", "\n  ") for name, child in self._modules.items()]
        if not self._modules:
            return f"{type(self).__name__}({''.join(lines)})"
        return f"{type(self).__name__}(\n  " + "\n  ".join(lines) + "\n)"
