"""Module, PyTorch's container of parameters, buffers and submodules.

Assigning a Parameter (parameter.py) to a module attribute registers it in `_parameters`,
assigning a Module registers it in `_modules`, in assignment order, which gives PyTorch's dotted
state_dict names (state.py). A buffer (register_buffer: BatchNorm's running statistics) is state
that is no parameter: it is in state_dict after its module's parameters (unless registered with
persistent=False), as in PyTorch, and moves with .to(). A Parameter used by two modules (weight
tying) is one tensor: parameters() yields it once, so an optimizer updates it once.
"""
from .. import dtypes
from ..autograd import no_grad
from ..ops.creation import zeros_like
from .._tensor import Tensor
from . import state
from .hooks import BackwardHook, RemovableHandle
from .parameter import Parameter

_TENSOR_TYPES = {"float32": "FloatTensor", "float64": "DoubleTensor", "int32": "IntTensor", "uint8": "ByteTensor",
                 "bool": "BoolTensor"}


def typename(value):
    """PyTorch's typename for error messages and reprs: 'webgrad.FloatTensor', 'int', 'pkg.Class'."""
    if isinstance(value, Tensor):
        return "webgrad." + _TENSOR_TYPES[value.dtype.name]
    cls = type(value)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


def _addindent(text, spaces):
    """Indent every line of text but the first (how a child's repr nests in its parent's)."""
    first, *rest = text.split("\n")
    return "\n".join([first] + [" " * spaces + line for line in rest])


def _check_name(kind, name):
    if not isinstance(name, str):
        raise TypeError(f"{kind} name should be a string. Got {typename(name)}")
    if "." in name:   # PyTorch names the culprit for modules only
        raise KeyError(f"{kind} name can't contain \".\"" + (f", got: {name}" if kind == "module" else ""))
    if name == "":
        raise KeyError(f"{kind} name can't be empty string \"\"")


class Module:
    def __init__(self):
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_buffers", {})
        object.__setattr__(self, "_non_persistent_buffers", set())
        object.__setattr__(self, "_modules", {})

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args, **kwargs):
        hooks = self.__dict__.get("_hooks")
        if not hooks:
            return self.forward(*args, **kwargs)
        for hook, with_kwargs in list(hooks["pre"].values()):
            changed = hook(self, args, kwargs) if with_kwargs else hook(self, args)
            if changed is not None:
                if with_kwargs:
                    args, kwargs = changed
                else:
                    args = changed if isinstance(changed, tuple) else (changed,)
        backward_hook = None
        if hooks["backward"] or hooks["backward_pre"]:
            backward_hook = BackwardHook(self, [h for h, _ in hooks["backward"].values()],
                                         [h for h, _ in hooks["backward_pre"].values()])
            args = backward_hook.setup_inputs(args)
        output = self.forward(*args, **kwargs)
        for hook, with_kwargs in list(hooks["post"].values()):
            changed = hook(self, args, kwargs, output) if with_kwargs else hook(self, args, output)
            output = output if changed is None else changed
        return output if backward_hook is None else backward_hook.setup_outputs(output)

    # ---- hooks: fn(module, args) before forward, fn(module, args, output) after it ----
    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """hook(module, args) (with_kwargs: hook(module, args, kwargs)) runs before each forward; what
        it returns, if not None, replaces the arguments."""
        return self._add_hook("pre", hook, prepend, with_kwargs)

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
        """hook(module, args, output) (with_kwargs: hook(module, args, kwargs, output)) runs after
        each forward; what it returns, if not None, replaces the output."""
        return self._add_hook("post", hook, prepend, with_kwargs)

    def register_full_backward_hook(self, hook, prepend=False):
        """hook(module, grad_input, grad_output) runs when the gradients of the module's positional Tensor
        arguments have been computed; what it returns, if not None, replaces grad_input (nn/hooks.py)."""
        return self._add_hook("backward", hook, prepend, False)

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """hook(module, grad_output) runs when the gradients of the module's outputs have been computed;
        what it returns, if not None, replaces grad_output."""
        return self._add_hook("backward_pre", hook, prepend, False)

    def _add_hook(self, when, hook, prepend, with_kwargs):
        if "_hooks" not in self.__dict__:
            object.__setattr__(self, "_hooks", {"pre": {}, "post": {}, "backward": {}, "backward_pre": {}})
        hooks = self._hooks[when]
        handle = RemovableHandle(hooks)
        hooks[handle.id] = (hook, with_kwargs)
        if prepend:   # first in order, in the same dict (other handles hold it)
            rest = dict(hooks)
            hooks.clear()
            hooks[handle.id] = rest.pop(handle.id)
            hooks.update(rest)
        return handle

    # ---- attribute registration (PyTorch's rules) ----
    def __setattr__(self, name, value):
        params = self.__dict__.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._forget(name, keep=self._parameters)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{typename(value)}' as parameter '{name}' "
                                "(webgrad.nn.Parameter or None expected)")
            params[name] = None
        elif isinstance(value, Module):
            if params is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._forget(name, keep=self._modules)
            self._modules[name] = value
        elif params is not None and name in self._modules:
            if value is not None:
                raise TypeError(f"cannot assign '{typename(value)}' as child module '{name}' "
                                "(webgrad.nn.Module or None expected)")
            self._modules[name] = None
        elif params is not None and name in self._buffers:   # a buffer stays a buffer when reassigned
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{typename(value)}' as buffer '{name}' (webgrad.Tensor or None "
                                "expected)")
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def _forget(self, name, keep):
        """Drop name from the instance dict and every store but `keep` before it is registered
        anew in keep (where it keeps its place, so a reassigned parameter keeps its state_dict slot)."""
        for store in (self.__dict__, self._parameters, self._buffers, self._modules):
            if store is not keep:
                store.pop(name, None)
        self._non_persistent_buffers.discard(name)

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

    def register_parameter(self, name, param):
        """Register param (a Parameter, or None for an absent one such as bias=False's)."""
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        _check_name("parameter", name)
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{typename(param)}' object to parameter '{name}' "
                            "(webgrad.nn.Parameter or None required)")
        self._parameters[name] = param

    def add_module(self, name, module):
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{typename(module)} is not a Module subclass")
        _check_name("module", name)
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module

    register_module = add_module

    def register_buffer(self, name, tensor, persistent=True):
        """Register tensor (or None) as state that is no parameter: in state_dict (unless not
        persistent), moved by .to(), never handed to an optimizer."""
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        _check_name("buffer", name)
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{typename(tensor)}' object to buffer '{name}' "
                            "(webgrad Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers.discard(name)
        else:
            self._non_persistent_buffers.add(name)

    def get_submodule(self, target):
        """The module at a dotted path ('encoder.layers.0'); '' is self."""
        module = self
        for name in target.split(".") if target else []:
            if module._modules.get(name) is None:
                raise AttributeError(f"{module._get_name()} has no attribute `{name}`")
            module = module._modules[name]
        return module

    # ---- traversal ----
    def _walk(self, prefix=""):
        """(dotted name, module) of self and every descendant, shared ones as often as they occur."""
        yield prefix, self
        for name, child in self._modules.items():
            if child is not None:
                yield from child._walk(f"{prefix}.{name}" if prefix else name)

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        seen = set() if memo is None else memo
        for name, module in self._walk(prefix):
            if not remove_duplicate or module not in seen:
                seen.add(module)
                yield name, module

    def modules(self, remove_duplicate=True):
        for _, module in self.named_modules(remove_duplicate=remove_duplicate):
            yield module

    def named_children(self):
        seen = set()
        for name, child in self._modules.items():
            if child is not None and child not in seen:
                seen.add(child)
                yield name, child

    def children(self):
        for _, child in self.named_children():
            yield child

    def _named_members(self, store, prefix, recurse, remove_duplicate):
        seen = set()
        walk = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for module_name, module in walk:
            for name, t in getattr(module, store).items():
                if t is None or (remove_duplicate and id(t) in seen):
                    continue
                seen.add(id(t))
                yield (f"{module_name}.{name}" if module_name else name), t

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """(dotted name, parameter), each parameter once (by its first name) unless remove_duplicate=False."""
        return self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        return self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def apply(self, fn):
        """fn(module) on every child (recursively), then on self, as PyTorch's init idiom uses."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    # ---- state (state.py) ----
    def state_dict(self, *, destination=None, prefix="", keep_vars=False):
        """Ordered name -> parameter or buffer, with PyTorch's dotted names: detached views sharing
        storage (the tensors themselves with keep_vars=True)."""
        return state.state_dict(self, destination, prefix, keep_vars)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copy values into the existing parameters and buffers in place, so optimizers keep their
        references; returns the (missing_keys, unexpected_keys) named tuple. Values may be Tensors,
        NumPy arrays or nested lists; a torch int64 counter (num_batches_tracked) loads into
        webgrad's int32 one. Nothing is copied when an error is raised."""
        return state.load_state_dict(self, state_dict, strict, assign)

    # ---- modes, gradients, devices ----
    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for child in self.children():
            child.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            p.grad = None if set_to_none or p.grad is None else zeros_like(p.grad)

    def _apply(self, fn):
        """fn on every parameter (in place: the Parameter object, and an optimizer's reference to
        it, stays, as with PyTorch's `param.data = fn(param)`), its gradient, and every buffer."""
        converted = {}   # original -> result (tensors hash by identity), so a shared one is converted once
        with no_grad():
            for module in self.modules():
                for p in module._parameters.values():
                    if p is not None and p not in converted:
                        converted[p] = p   # converted in place: the object itself is the result
                        p._set_data(fn(p))   # p points at the result's storage, layout, dtype, device
                        if p.grad is not None:
                            p.grad = fn(p.grad)
                for name, b in module._buffers.items():
                    if b is not None:
                        if b not in converted:
                            converted[b] = fn(b)
                        module._buffers[name] = converted[b]
        return self

    def to(self, *args, **kwargs):
        """Move parameters and buffers to a device and/or cast the floating ones to a floating
        dtype, with Tensor.to's arguments (non_blocking is accepted and has no effect)."""
        device, dtype = _parse_to(args, kwargs)
        if dtype is not None and not dtype.is_floating_point:
            raise TypeError(f"nn.Module.to only accepts floating point or complex dtypes, but got desired "
                            f"dtype={dtype!r}")
        return self._apply(lambda t: t.to(device=device, dtype=dtype if t.dtype.is_floating_point else None))

    def cpu(self):
        return self._apply(lambda t: t.cpu())

    def type(self, dst_type):
        return self._apply(lambda t: t.to(dst_type))

    def float(self):
        return self._apply(lambda t: t.float() if t.dtype.is_floating_point else t)

    def double(self):
        return self._apply(lambda t: t.double() if t.dtype.is_floating_point else t)

    def half(self):
        return self._apply(lambda t: t.half() if t.dtype.is_floating_point else t)

    # ---- printing ----
    def extra_repr(self):
        return ""

    def _get_name(self):
        return type(self).__name__

    def __repr__(self):
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({name}): " + _addindent(repr(child), 2) for name, child in self._modules.items()]
        lines = extra_lines + child_lines
        text = self._get_name() + "("
        if len(extra_lines) == 1 and not child_lines:
            text += extra_lines[0]
        elif lines:
            text += "\n  " + "\n  ".join(lines) + "\n"
        return text + ")"


def _parse_to(args, kwargs):
    """(device, dtype) among Module.to's arguments, as Tensor.to reads them; either may be None."""
    device, dtype = kwargs.get("device"), kwargs.get("dtype")
    unknown = set(kwargs) - {"device", "dtype", "non_blocking", "memory_format"}
    if unknown:
        raise TypeError(f"to() got an unexpected keyword argument '{sorted(unknown)[0]}'")
    for a in args:
        if isinstance(a, Tensor):
            device, dtype = a.device, a.dtype
        elif isinstance(a, str):
            try:
                dtype = dtypes.as_dtype(a)
            except TypeError:
                device = a
        elif isinstance(a, bool):   # to(device, dtype, non_blocking) positionally
            continue
        else:
            dtype = a
    return device, (None if dtype is None else dtypes.as_dtype(dtype))
