"""Module.state_dict and Module.load_state_dict: a module tree's parameters and persistent buffers
under PyTorch's dotted names, in PyTorch's order, and loading values back into them in place."""
import collections
import collections.abc

from ..autograd import no_grad
from ..ops.creation import as_tensor
from ..ops.movement import write_into
from .._tensor import Tensor


class _IncompatibleKeys(collections.namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return f"_IncompatibleKeys(missing_keys={self.missing_keys}, unexpected_keys={self.unexpected_keys})"


def named_state(module):
    """(dotted name, tensor) of state_dict in PyTorch's order: each module's parameters, then
    its persistent buffers, then its children's (a shared module under each of its names)."""
    for module_name, m in module._walk():
        dot = f"{module_name}." if module_name else ""
        for name, p in m._parameters.items():
            if p is not None:
                yield dot + name, p
        for name, b in m._buffers.items():
            if b is not None and name not in m._non_persistent_buffers:
                yield dot + name, b


def state_dict(module, destination, prefix, keep_vars):
    out = collections.OrderedDict() if destination is None else destination
    for name, t in named_state(module):
        out[prefix + name] = t if keep_vars else t.detach()
    return out


def load_state_dict(module, state_dict, strict, assign):
    if not isinstance(state_dict, collections.abc.Mapping):
        raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
    if assign:
        raise NotImplementedError("load_state_dict: assign=True is not supported; values are copied in place")
    own = dict(named_state(module))
    missing = [k for k in own if k not in state_dict]
    unexpected = [k for k in state_dict if k not in own]
    errors = []
    if strict and missing:
        errors.append("Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ". ")
    if strict and unexpected:
        errors.append("Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ". ")
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
        raise RuntimeError(f"Error(s) in loading state_dict for {type(module).__name__}:\n\t" + "\n\t".join(errors))
    with no_grad():
        for name, source in sources.items():
            write_into(own[name], source)
    return _IncompatibleKeys(missing, unexpected)
