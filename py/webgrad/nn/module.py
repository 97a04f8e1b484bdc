"""Module, PyTorch's container of parameters, buffers and submodules.

A parameter is a leaf tensor that requires grad (Tensor has __slots__, so there is no Parameter
subclass): assigning one to a module attribute registers it in `_parameters`, assigning a Module
registers it in `_modules`, in assignment order, which gives PyTorch's dotted state_dict names.
A buffer (register_buffer: BatchNorm's running statistics) is state that is no parameter: it is
in state_dict after its module's parameters, as in PyTorch, and moves with .to().
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
        object.__setattr__(self, "_buffers", {})
        object.__setattr__(self, "_non_persistent_buffers", set())
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
        buffers = self.__dict__["_buffers"]
        if name in buffers and (value is None or (isinstance(value, Tensor) and not _is_parameter(value))):
            buffers[name] = value   # a buffer stays a buffer when reassigned, as in PyTorch
            return
        buffers.pop(name, None)
        self._non_persistent_buffers.discard(name)
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
        for store in ("_parameters", "_buffers", "_modules"):
            found = self.__dict__.get(store, {})
            if name in found:
                return found[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for store in (self._parameters, self._buffers, self._modules):
            if name in store:
                del store[name]
                self._non_persistent_buffers.discard(name)
                return
        object.__delattr__(self, name)

    def add_module(self, name, module):
        setattr(self, name, module)

    def register_buffer(self, name, tensor, persistent=True):
        """Register tensor (or None) as state that is no parameter: in state_dict (unless not
        persistent), moved by .to(), never handed to an optimizer."""
        if not isinstance(name, str) or not name or "." in name:
            raise KeyError(f"buffer name must be a non-empty string without '.', got {name!r}")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                            "(a Tensor or None is required)")
        if name in self._parameters or name in self._modules or name in self.__dict__:
            raise KeyError(f"attribute '{name}' already exists")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers.discard(name)
        else:
            self._non_persistent_buffers.add(name)

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

    def _all_state(self):
        """(dotted name, tensor) of state_dict in PyTorch's order: each module's parameters, then
        its persistent buffers, then its children's."""
        for module_name, module in self._walk():
            dot = f"{module_name}." if module_name else ""
            for name, p in module._parameters.items():
                yield dot + name, p
            for name, b in module._buffers.items():
                if b is not None and name not in module._non_persistent_buffers:
                    yield dot + name, b

    def named_buffers(self, prefix="", recurse=True):
        seen = set()
        walk = self._walk(prefix) if recurse else [(prefix, self)]
        for module_name, module in walk:
            for name, b in module._buffers.items():
                if b is not None and id(b) not in seen:
                    seen.add(id(b))
                    yield (f"{module_name}.{name}" if module_name else name), b

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

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
        """Ordered name -> detached parameter or buffer (sharing storage), with PyTorch's dotted names."""
        return collections.OrderedDict((name, t.detach()) for name, t in self._all_state())

    def load_state_dict(self, state_dict, strict=True):
        """Copy values into the existing parameters and buffers in place, so optimizers keep their
        references. Values may be Tensors, NumPy arrays or nested lists; a torch int64 counter
        (num_batches_tracked) loads into webgrad's int32 one."""
        own = dict(self._all_state())
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
            if hasattr(value, "detach") and not isinstance(value, Tensor):   # a torch tensor
                value = value.detach().cpu().numpy()
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
        """Move (or cast) parameters and buffers, as Tensor.to takes them: each parameter becomes
        a new leaf tensor. A dtype casts floating tensors only (a counter buffer stays int32)."""
        moved = {}  # id -> new tensor, so a parameter shared by two modules stays shared
        device = _device_of(args, kwargs)
        with no_grad():
            for module in self.modules():
                for name, b in module._buffers.items():
                    if b is not None and id(b) not in moved:
                        moved[id(b)] = b.to(*args, **kwargs) if b.dtype.is_floating_point else (
                            b if device is None else b.to(device=device))
                    if b is not None:
                        module._buffers[name] = moved[id(b)]
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



def _device_of(args, kwargs):
    """The device among Tensor.to's arguments (None if only a dtype): where a module's cast
    leaves an integer buffer such as num_batches_tracked."""
    from .. import dtypes
    device = kwargs.get("device")
    for a in args:
        if isinstance(a, Tensor):
            device = a.device
        elif isinstance(a, str):
            try:
                dtypes.as_dtype(a)
            except TypeError:
                device = a
    return device
