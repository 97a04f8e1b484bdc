"""Recurrent layers (RNN, LSTM, GRU) and their cells, with torch.nn's arguments, parameter names
(weight_ih_l0, weight_hh_l0, bias_ih_l0, bias_hh_l0, weight_hr_l0 for an LSTM's projection, a
_reverse suffix for the backward direction), initialisation (every parameter U(-1/sqrt(hidden),
1/sqrt(hidden))), gate order, shapes and errors.

They are compositions of tensor ops, so forward and backward run on the input's device: a
layer's input projection for every time step is one matmul, then each step is a matmul of the
hidden state and a few elementwise ops. The four kinds differ only in their step function
(_STEPS); the loop over layers, directions and time is shared, and a cell is one step.
"""
import math
import numbers
import warnings

from .._tensor import Tensor
from ..ops.creation import empty, zeros
from ..ops.movement import cat, stack
from . import functional as F
from . import init
from .module import Module, Parameter


# ---- one time step: (input projection gi, state tuple, hidden weights) -> new state tuple ----
# The first entry of a state is the hidden state h, which is also the step's output.
def _rnn_tanh_step(gi, state, w_hh, b_hh, w_hr=None):
    return (F.tanh(gi + F.linear(state[0], w_hh, b_hh)),)


def _rnn_relu_step(gi, state, w_hh, b_hh, w_hr=None):
    return (F.relu(gi + F.linear(state[0], w_hh, b_hh)),)


def _lstm_step(gi, state, w_hh, b_hh, w_hr=None):
    """Gates i, f, g, o (PyTorch's order); an LSTM with proj_size projects h by w_hr."""
    h, c = state
    gates = gi + F.linear(h, w_hh, b_hh)
    n = c.shape[-1]
    sig = F.sigmoid(gates)   # over all four gates in one op; g's slice goes unused
    c = sig[..., n:2 * n] * c + sig[..., :n] * F.tanh(gates[..., 2 * n:3 * n])
    h = sig[..., 3 * n:] * F.tanh(c)
    return (h if w_hr is None else F.linear(h, w_hr), c)


def _gru_step(gi, state, w_hh, b_hh, w_hr=None):
    """Gates r, z, n (PyTorch's order); r scales the hidden part of n, bias included."""
    h = state[0]
    gh = F.linear(h, w_hh, b_hh)
    n = h.shape[-1]
    rz = F.sigmoid(gi[..., :2 * n] + gh[..., :2 * n])
    candidate = F.tanh(gi[..., 2 * n:] + rz[..., :n] * gh[..., 2 * n:])
    return (candidate + rz[..., n:] * (h - candidate),)   # (1 - z) * candidate + z * h


# mode (PyTorch's names) -> (gates stacked in weight_ih / weight_hh, step)
_STEPS = {"RNN_TANH": (1, _rnn_tanh_step), "RNN_RELU": (1, _rnn_relu_step), "LSTM": (4, _lstm_step),
          "GRU": (3, _gru_step)}
_NONLINEARITY_MODES = {"tanh": "RNN_TANH", "relu": "RNN_RELU"}


def _scan(step, x, state, w_ih, w_hh, b_ih, b_hh, w_hr, reverse):
    """One direction of one layer over an (L, N, in) input: (outputs (L, N, H), final state)."""
    gi = F.linear(x, w_ih, b_ih)   # every step's input projection in one matmul
    outputs = [None] * x.shape[0]
    for t in reversed(range(x.shape[0])) if reverse else range(x.shape[0]):
        state = step(gi[t], state, w_hh, b_hh, w_hr)
        outputs[t] = state[0]
    return stack(outputs), state


def _uniform_init(module):
    stdv = 1.0 / math.sqrt(module.hidden_size) if module.hidden_size > 0 else 0
    for weight in module.parameters():
        init.uniform_(weight, -stdv, stdv)


class RNNBase(Module):
    """The multi-layer, optionally bidirectional recurrence shared by RNN, LSTM and GRU.

    forward(input, hx=None): input (L, N, input_size), (N, L, input_size) with batch_first, or
    unbatched (L, input_size); hx (num_layers * num_directions, N, H) (unbatched: without N),
    zeros when None, and a tuple (h_0, c_0) for an LSTM. Returns (output, h_n), h_n a tuple
    (h_n, c_n) for an LSTM; output holds the last layer's h at every step, both directions
    concatenated. Dropout (training only) applies to every layer's output but the last's."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        if isinstance(dropout, bool) or not isinstance(dropout, numbers.Number) or not 0 <= dropout <= 1:
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an "
                             "element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                          f"expects num_layers greater than 1, but got dropout={dropout} and num_layers={num_layers}",
                          stacklevel=3)
        if not isinstance(hidden_size, int):
            raise TypeError(f"hidden_size should be of type int, got: {type(hidden_size).__name__}")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if mode not in _STEPS:
            raise ValueError(f"Unrecognized RNN mode: {mode}")
        self.mode, self.input_size, self.hidden_size, self.num_layers = mode, input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional, self.proj_size = bidirectional, proj_size
        gate_size = _STEPS[mode][0] * hidden_size
        out_size = proj_size or hidden_size
        self._all_weights = []   # parameter names per (layer, direction), PyTorch's order
        for layer in range(num_layers):
            for direction in range(self.num_directions):
                layer_input = input_size if layer == 0 else out_size * self.num_directions
                shapes = [("weight_ih", (gate_size, layer_input)), ("weight_hh", (gate_size, out_size))]
                if bias:
                    shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                if proj_size:
                    shapes.append(("weight_hr", (proj_size, hidden_size)))
                names = []
                for role, shape in shapes:
                    names.append(f"{role}_l{layer}{'_reverse' if direction else ''}")
                    setattr(self, names[-1], Parameter(empty(shape, device=device, dtype=dtype)))
                self._all_weights.append(names)
        self.reset_parameters()

    @property
    def num_directions(self):
        return 2 if self.bidirectional else 1

    @property
    def all_weights(self):
        return [[getattr(self, name) for name in names] for names in self._all_weights]

    def reset_parameters(self):
        _uniform_init(self)

    def flatten_parameters(self):
        """A no-op: PyTorch packs cuDNN's weights here; webgrad's are used as they are."""

    def _state_sizes(self):
        """The last dim of each state tensor: h (proj_size if projected), and an LSTM's c."""
        out_size = self.proj_size or self.hidden_size
        return (out_size, self.hidden_size) if self.mode == "LSTM" else (out_size,)

    def _initial_state(self, hx, batch, batched, like):
        lead, sizes, lstm = self.num_layers * self.num_directions, self._state_sizes(), self.mode == "LSTM"
        if hx is None:
            return tuple(zeros(lead, batch, size, dtype=like.dtype, device=like.device) for size in sizes)
        parts = (hx[0], hx[1]) if lstm else (hx,)
        ndim = 3 if batched else 2
        if any(p.ndim != ndim for p in parts):
            got = ", ".join(f"{p.ndim}-D" for p in parts)
            raise RuntimeError(f"For {'batched 3-D' if batched else 'unbatched 2-D'} input, "
                               f"{'hx and cx' if lstm else 'hx'} should also be {ndim}-D but got "
                               + (f"({got}) tensors" if lstm else f"{got} tensor"))
        if not batched:
            parts = tuple(p.unsqueeze(1) for p in parts)
        for k, (p, size) in enumerate(zip(parts, sizes)):
            if tuple(p.shape) != (lead, batch, size):
                raise RuntimeError(f"Expected {f'hidden[{k}]' if lstm else 'hidden'} size {(lead, batch, size)}, "
                                   f"got {list(p.shape)}")
        return parts

    def forward(self, input, hx=None):
        name = type(self).__name__
        if not isinstance(input, Tensor):
            raise TypeError(f"{name}: input must be a Tensor (packed sequences are not supported), got "
                            f"{type(input).__name__}")
        if input.ndim not in (2, 3):
            raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.ndim}D instead")
        batched = input.ndim == 3
        x = input if batched else input.unsqueeze(1)
        if batched and self.batch_first:
            x = x.transpose(0, 1)
        if x.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, got "
                               f"{x.shape[-1]}")
        states = self._initial_state(hx, x.shape[1], batched, x)
        step = _STEPS[self.mode][1]
        finals = []
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(self.num_directions):
                k = layer * self.num_directions + direction
                suffix = "_reverse" if direction else ""
                weights = [getattr(self, f"{role}_l{layer}{suffix}", None)
                           for role in ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr")]
                out, final = _scan(step, x, tuple(s[k] for s in states), *weights, reverse=direction == 1)
                outputs.append(out)
                finals.append(final)
            x = outputs[0] if len(outputs) == 1 else cat(outputs, dim=2)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        last = tuple(stack([final[i] for final in finals]) for i in range(len(states)))
        if not batched:
            x, last = x.squeeze(1), tuple(s.squeeze(1) for s in last)
        elif self.batch_first:
            x = x.transpose(0, 1)
        return x, (last if self.mode == "LSTM" else last[0])

    def extra_repr(self):
        text = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            text += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            text += f", num_layers={self.num_layers}"
        if self.bias is not True:
            text += f", bias={self.bias}"
        if self.batch_first is not False:
            text += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            text += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            text += f", bidirectional={self.bidirectional}"
        return text


class RNN(RNNBase):
    """Elman RNN: h_t = nonlinearity(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh), tanh or relu."""

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        if nonlinearity not in _NONLINEARITY_MODES:
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__(_NONLINEARITY_MODES[nonlinearity], input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, 0, device, dtype)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    """Long short-term memory; proj_size > 0 projects h to proj_size (weight_hr_l{k})."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, device, dtype)


class GRU(RNNBase):
    """Gated recurrent unit."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, 0,
                         device, dtype)


class RNNCellBase(Module):
    """One step of a recurrence: weight_ih (gates * hidden, input), weight_hh (gates * hidden,
    hidden), bias_ih and bias_hh (None with bias=False)."""

    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        self.weight_ih = Parameter(empty((num_chunks * hidden_size, input_size), device=device, dtype=dtype))
        self.weight_hh = Parameter(empty((num_chunks * hidden_size, hidden_size), device=device, dtype=dtype))
        for name in ("bias_ih", "bias_hh"):
            self.register_parameter(name, Parameter(empty(num_chunks * hidden_size, device=device, dtype=dtype))
                                    if bias else None)
        self.reset_parameters()

    def reset_parameters(self):
        _uniform_init(self)

    def _step(self, mode, input, hx, states):
        """Run mode's step on input (N, input_size) or (input_size,) and hx: a tuple of `states`
        tensors (N, hidden) or (hidden,), or None for zeros. Returns the new state tuple."""
        name = type(self).__name__
        if input.ndim not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.ndim}D instead")
        if hx is not None and any(h.ndim not in (1, 2) for h in hx):
            raise ValueError(f"{name}: Expected hidden to be 1D or 2D, got "
                             f"{next(h.ndim for h in hx if h.ndim not in (1, 2))}D instead")
        batched = input.ndim == 2
        x = input if batched else input.unsqueeze(0)
        if hx is None:
            hx = tuple(zeros(x.shape[0], self.hidden_size, dtype=x.dtype, device=x.device) for _ in range(states))
        elif not batched:
            hx = tuple(h.unsqueeze(0) for h in hx)
        if x.shape[1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {x.shape[1]} expected {self.input_size}")
        for k, h in enumerate(hx):
            if h.shape[0] != x.shape[0]:
                raise RuntimeError(f"Input batch size {x.shape[0]} doesn't match hidden{k} batch size {h.shape[0]}")
            if h.shape[1] != self.hidden_size:
                raise RuntimeError(f"hidden{k} has inconsistent hidden_size: got {h.shape[1]}, expected "
                                   f"{self.hidden_size}")
        state = _STEPS[mode][1](F.linear(x, self.weight_ih, self.bias_ih), tuple(hx), self.weight_hh, self.bias_hh)
        return state if batched else tuple(s.squeeze(0) for s in state)

    def extra_repr(self):
        text = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            text += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            text += f", nonlinearity={self.nonlinearity}"
        return text


class RNNCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        if self.nonlinearity not in _NONLINEARITY_MODES:
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        return self._step(_NONLINEARITY_MODES[self.nonlinearity], input, None if hx is None else (hx,), 1)[0]


class LSTMCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input, hx=None):
        """hx: a tuple (h, c), or None for zeros; returns the tuple (h', c')."""
        if hx is not None and not (isinstance(hx, (tuple, list)) and len(hx) == 2):
            raise TypeError(f"LSTMCell: hx must be a tuple (h, c) of Tensors, not {type(hx).__name__}")
        return self._step("LSTM", input, hx, 2)


class GRUCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input, hx=None):
        return self._step("GRU", input, None if hx is None else (hx,), 1)[0]
