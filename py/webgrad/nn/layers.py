"""Layers, activations and loss modules (PyTorch's names, arguments and reprs)."""
import math

from ..ops.creation import empty
from . import functional as F
from . import init
from .containers import Sequential
from .module import Module, Parameter


class Linear(Module):
    """y = x @ weight.T + bias, weight (out_features, in_features), initialised as PyTorch does."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = Parameter(empty((out_features, in_features), device=device, dtype=dtype))
        self.register_parameter("bias", Parameter(empty(out_features, device=device, dtype=dtype)) if bias else None)
        self.reset_parameters()

    def reset_parameters(self):
        # kaiming_uniform_ with a=sqrt(5) gives U(-1/sqrt(in), 1/sqrt(in)); the bias uses the same bound
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class _Activation(Module):
    """An activation with PyTorch's inplace argument: inplace=True is accepted and computes out of
    place (the returned values are the same; the input is left as it is)."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class ReLU(_Activation):
    def forward(self, input):
        return F.relu(input)


class Tanh(Module):
    def forward(self, input):
        return F.tanh(input)


class Sigmoid(Module):
    def forward(self, input):
        return F.sigmoid(input)


class SiLU(_Activation):
    def forward(self, input):
        return F.silu(input)


class Mish(_Activation):
    def forward(self, input):
        return F.mish(input)


class GELU(Module):
    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        if self.approximate not in ("none", "tanh"):   # checked here, as PyTorch does
            raise RuntimeError("approximate argument must be either none or tanh.")
        return F.gelu(input) if self.approximate == "none" else F._gelu_tanh(input)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class LeakyReLU(_Activation):
    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__(inplace)
        self.negative_slope = negative_slope

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class ELU(_Activation):
    def __init__(self, alpha=1.0, inplace=False):
        super().__init__(inplace)
        self.alpha = alpha

    def forward(self, input):
        return F.elu(input, self.alpha)

    def extra_repr(self):
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class Hardtanh(_Activation):
    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False):
        super().__init__(inplace)
        if not max_val > min_val:   # PyTorch's module asserts this (F.hardtanh raises ValueError)
            raise AssertionError(f"max_val ({max_val}) must be greater than min_val ({min_val})")
        self.min_val, self.max_val = min_val, max_val

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}" + (", inplace=True" if self.inplace else "")


class ReLU6(Hardtanh):
    def __init__(self, inplace=False):
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self):
        return _Activation.extra_repr(self)


class Softplus(Module):
    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


def _implicit_softmax_dim(name, ndim):
    return F.implicit_softmax_dim(name, ndim, stacklevel=4)


class Softmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        dim = _implicit_softmax_dim("softmax", input.ndim) if self.dim is None else self.dim
        return F.softmax(input, dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    def forward(self, input):
        dim = _implicit_softmax_dim("log_softmax", input.ndim) if self.dim is None else self.dim
        return F.log_softmax(input, dim)


class Flatten(Module):
    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input):
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Dim `dim` of the input becomes the dims `unflattened_size` (one of which may be -1)."""

    def __init__(self, dim, unflattened_size):
        super().__init__()
        if not isinstance(unflattened_size, (tuple, list)) or not all(isinstance(s, int) for s in unflattened_size):
            raise TypeError(f"unflattened_size must be a tuple of ints, but found type "
                            f"{type(unflattened_size).__name__}")
        self.dim, self.unflattened_size = dim, unflattened_size

    def forward(self, input):
        size = input.size(self.dim)   # an IndexError for a dim out of range
        dim = self.dim % input.ndim
        known = math.prod(s for s in self.unflattened_size if s != -1)
        fits = (known != 0 and size % known == 0) if -1 in self.unflattened_size else known == size
        if not fits:
            raise RuntimeError(f"unflatten: Provided sizes {list(self.unflattened_size)} don't multiply up to the "
                               f"size of dim {self.dim} ({size}) in the input tensor")
        return input.reshape(tuple(input.shape[:dim]) + tuple(self.unflattened_size) + tuple(input.shape[dim + 1:]))

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class Identity(Module):
    def __init__(self, *args, **kwargs):  # PyTorch accepts and ignores any arguments
        super().__init__()

    def forward(self, input):
        return input


ACTIVATIONS = {"relu": ReLU, "tanh": Tanh, "sigmoid": Sigmoid, "gelu": GELU, "leaky_relu": LeakyReLU}


def mlp(sizes, activation="tanh", device=None):
    """Linear layers of the given sizes ([in, hidden..., out]) with `activation` between them."""
    if len(sizes) < 2:
        raise ValueError(f"mlp needs at least an input and an output size, got {list(sizes)}")
    if activation not in ACTIVATIONS:
        raise ValueError(f"unknown activation {activation!r}; choose one of {', '.join(ACTIVATIONS)}")
    layers = []
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        if i:
            layers.append(ACTIVATIONS[activation]())
        layers.append(Linear(n_in, n_out, device=device))
    return Sequential(*layers)
