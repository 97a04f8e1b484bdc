"""nn.RNN / LSTM / GRU and their cells against PyTorch's on CPU: the same weights (copied through
state_dict, so the names and shapes must be PyTorch's) and fresh random inputs give the same
outputs, final states and gradients (of the input, the initial state and every weight), on
both devices; plus PyTorch's initialisation, reprs, errors and inter-layer dropout."""
import math
import warnings

import numpy as np
import pytest
import torch

import webgrad as wg
from webgrad import nn, optim
from conftest import assert_close, randn, tag
from torch_api import raises_like

ATOL = 2e-4   # float32 through a few recurrent steps


def _copy_into_torch(ours, theirs):
    """Load our state_dict into theirs (strict: the names and shapes must be PyTorch's)."""
    ours_sd, theirs_sd = ours.state_dict(), theirs.state_dict()
    assert [(k, tuple(v.shape)) for k, v in ours_sd.items()] == [(k, tuple(v.shape)) for k, v in theirs_sd.items()]
    theirs.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in ours_sd.items()})


def _states(out):
    """The tensors of a forward's result, flattened: (output, h_n) or (output, (h_n, c_n)) or a cell's."""
    if isinstance(out, (tuple, list)):
        return [t for item in out for t in _states(item)]
    return [out]


def _compare(ours, theirs, device, inputs, call=lambda m, *a: m(*a)):
    """Run both modules on the same inputs (NumPy arrays, or tuples of them for an LSTM's hx);
    compare every result and the gradients of sum(result * random upstream) with respect to the
    inputs and every parameter."""
    def ours_tensor(a):
        return wg.tensor(a, device=device, requires_grad=True)

    def theirs_tensor(a):
        return torch.tensor(a, requires_grad=True)

    ours_in = [tuple(map(ours_tensor, a)) if isinstance(a, tuple) else ours_tensor(a) for a in inputs]
    theirs_in = [tuple(map(theirs_tensor, a)) if isinstance(a, tuple) else theirs_tensor(a) for a in inputs]
    ours_out, theirs_out = _states(call(ours, *ours_in)), _states(call(theirs, *theirs_in))
    assert len(ours_out) == len(theirs_out), tag("number of results")
    upstream = [randn(*t.shape) for t in theirs_out]
    for k, (o, t) in enumerate(zip(ours_out, theirs_out)):
        assert o.device == device and tuple(o.shape) == tuple(t.shape), tag(f"result {k}: {tuple(o.shape)}")
        assert_close(o, t, ATOL, ATOL, f"result {k}")
    sum((o * wg.tensor(g, device=device)).sum() for o, g in zip(ours_out, upstream)).backward()
    sum((t * torch.from_numpy(g)).sum() for t, g in zip(theirs_out, upstream)).backward()
    for k, (o, t) in enumerate(zip(_states(ours_in), _states(theirs_in))):
        assert_close(o.grad, t.grad, ATOL, ATOL, f"gradient of input {k}")
    theirs_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        assert_close(p.grad, theirs_params[name].grad, ATOL, ATOL, f"gradient of {name}")


RECURRENT = [
    # kind, constructor arguments, batched, with an initial state
    ("RNN", dict(num_layers=1), True, False),
    ("RNN", dict(num_layers=2, nonlinearity="relu", bidirectional=True), True, True),
    ("RNN", dict(bias=False, batch_first=True), True, True),
    ("LSTM", dict(num_layers=1), True, True),
    ("LSTM", dict(num_layers=2, bidirectional=True, batch_first=True), True, True),
    ("LSTM", dict(num_layers=2, proj_size=3), True, True),
    ("LSTM", dict(bias=False, bidirectional=True), False, True),
    ("GRU", dict(num_layers=1), False, False),
    ("GRU", dict(num_layers=2, bidirectional=True), True, True),
    ("GRU", dict(bias=False, batch_first=True, num_layers=2), True, False),
]


def _case_id(kind, kwargs, batched, with_hx):
    return "-".join([kind, *(f"{a}={v}" for a, v in kwargs.items()), "batched" if batched else "unbatched"]
                    + (["hx"] if with_hx else []))


@pytest.mark.parametrize("kind,kwargs,batched,with_hx", RECURRENT, ids=[_case_id(*case) for case in RECURRENT])
def test_recurrent_layers_match_torch(device, kind, kwargs, batched, with_hx):
    input_size, hidden, length, batch = 4, 5, 6, 3
    ours = getattr(nn, kind)(input_size, hidden, device=device, **kwargs)
    theirs = getattr(torch.nn, kind)(input_size, hidden, **kwargs)
    _copy_into_torch(ours, theirs)
    assert repr(ours) == repr(theirs)
    first = (batch, length) if kwargs.get("batch_first") else (length, batch)
    x = randn(*(first if batched else (length,)), input_size)
    inputs = [x]
    if with_hx:
        lead = ours.num_layers * ours.num_directions
        shapes = [(lead, batch, kwargs.get("proj_size") or hidden), (lead, batch, hidden)]
        shapes = [s if batched else (s[0], s[2]) for s in shapes]
        inputs.append((randn(*shapes[0]), randn(*shapes[1])) if kind == "LSTM" else randn(*shapes[0]))
    _compare(ours, theirs, device, inputs)


@pytest.mark.parametrize("kind", ["RNNCell", "LSTMCell", "GRUCell"])
@pytest.mark.parametrize("batched", [True, False], ids=["batched", "unbatched"])
def test_cells_match_torch(device, kind, batched):
    input_size, hidden, batch = 4, 6, 3
    lead = (batch,) if batched else ()
    for kwargs, with_hx in [({}, True), ({"bias": False}, False)] + (
            [({"nonlinearity": "relu"}, True)] if kind == "RNNCell" else []):
        ours = getattr(nn, kind)(input_size, hidden, device=device, **kwargs)
        theirs = getattr(torch.nn, kind)(input_size, hidden, **kwargs)
        _copy_into_torch(ours, theirs)
        assert repr(ours) == repr(theirs)
        inputs = [randn(*lead, input_size)]
        if with_hx:
            inputs.append((randn(*lead, hidden), randn(*lead, hidden)) if kind == "LSTMCell" else randn(*lead, hidden))
        _compare(ours, theirs, device, inputs)


def test_a_cell_unrolled_is_the_layer(device):
    """An LSTMCell stepped by hand with a layer's weights gives the layer's output."""
    layer, cell = nn.LSTM(3, 4, device=device), nn.LSTMCell(3, 4, device=device)
    cell.load_state_dict({k[:-3]: v for k, v in layer.state_dict().items()})   # weight_ih_l0 -> weight_ih
    x = wg.tensor(randn(5, 2, 3), device=device)
    out, (h_n, c_n) = layer(x)
    state = None
    for t in range(5):
        state = cell(x[t], state)
        assert_close(state[0], out[t], 1e-5, 1e-5, f"step {t}")
    assert_close(state[0], h_n[0], 1e-5, 1e-5, "h_n")
    assert_close(state[1], c_n[0], 1e-5, 1e-5, "c_n")


def test_training_steps_match_torch(device):
    """Three SGD steps of an embedding-free GRU + Linear regressor move the weights as PyTorch's do."""
    ours_rnn, ours_head = nn.GRU(3, 8, 2, batch_first=True, device=device), nn.Linear(8, 1, device=device)
    theirs_rnn, theirs_head = torch.nn.GRU(3, 8, 2, batch_first=True), torch.nn.Linear(8, 1)
    _copy_into_torch(ours_rnn, theirs_rnn)
    _copy_into_torch(ours_head, theirs_head)
    ours_params = list(ours_rnn.parameters()) + list(ours_head.parameters())
    theirs_params = list(theirs_rnn.parameters()) + list(theirs_head.parameters())
    ours_opt, theirs_opt = optim.SGD(ours_params, lr=0.1), torch.optim.SGD(theirs_params, lr=0.1)
    for _ in range(3):
        x, y = randn(4, 5, 3), randn(4, 1)
        for rnn, head, opt, make in [(ours_rnn, ours_head, ours_opt, lambda a: wg.tensor(a, device=device)),
                                     (theirs_rnn, theirs_head, theirs_opt, torch.tensor)]:
            opt.zero_grad()
            out, _ = rnn(make(x))
            loss = ((head(out[:, -1]) - make(y)) ** 2).mean()
            loss.backward()
            opt.step()
    for (name, p), t in zip(list(ours_rnn.named_parameters()) + list(ours_head.named_parameters()), theirs_params):
        assert_close(p, t, ATOL, ATOL, f"{name} after 3 steps")


def test_init_is_torchs(device):
    for module in (nn.LSTM(10, 400, 2, bidirectional=True, device=device), nn.GRUCell(10, 400, device=device)):
        bound = 1 / math.sqrt(400)
        for name, p in module.named_parameters():
            v = p.detach().numpy()
            assert p.device == device and p.requires_grad and isinstance(p, nn.Parameter), tag(name)
            assert np.abs(v).max() <= bound and np.abs(v).max() > 0.95 * bound, tag(name)
            assert abs(v.std() - bound / math.sqrt(3)) < 0.05 * bound, tag(name)


def test_dropout_between_layers(device):
    ours, theirs = nn.LSTM(3, 4, 3, dropout=1.0, device=device), torch.nn.LSTM(3, 4, 3, dropout=1.0)
    _copy_into_torch(ours, theirs)
    x = randn(5, 2, 3)
    # p=1 zeroes every layer's output but the last's: deterministic, so it can be compared
    _compare(ours.train(), theirs.train(), device, [x])
    ours.dropout = theirs.dropout = 0.5
    with torch.no_grad():
        expected = theirs.eval()(torch.tensor(x))[0].numpy()
    assert_close(ours.eval()(wg.tensor(x, device=device))[0], expected, ATOL, ATOL, "eval: no dropout")
    trained = ours.train()(wg.tensor(x, device=device))[0].detach().numpy()
    assert not np.allclose(trained, expected, atol=1e-3), tag("training with dropout=0.5 changed nothing")
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1"):
        nn.GRU(3, 4, dropout=0.3)


def test_errors_match_torch(device):
    cases = [
        ("LSTM", (3, 4, 2), lambda m, T: m(T(2, 2, 2, 3))),
        ("GRU", (3, 4), lambda m, T: m(T(2, 2, 2, 3))),
        ("LSTM", (3, 4, 2), lambda m, T: m(T(2, 2, 5))),
        ("LSTM", (3, 4, 2), lambda m, T: m(T(2, 2, 3), (T(1, 2, 4), T(2, 2, 4)))),
        ("LSTM", (3, 4, 2), lambda m, T: m(T(2, 2, 3), (T(2, 2, 4), T(1, 2, 4)))),
        ("LSTM", (3, 4, 2), lambda m, T: m(T(2, 3), (T(2, 1, 4), T(2, 1, 4)))),
        ("LSTM", (3, 4, 2), lambda m, T: m(T(2, 2, 3), T(2, 2, 4))),
        ("GRU", (3, 4), lambda m, T: m(T(2, 2, 3), T(2, 2, 4))),
        ("GRU", (3, 4), lambda m, T: m(T(2, 3), T(1, 2, 4))),
        ("RNNCell", (3, 4), lambda m, T: m(T(2, 5))),
        ("RNNCell", (3, 4), lambda m, T: m(T(2, 3), T(3, 4))),
        ("RNNCell", (3, 4), lambda m, T: m(T(2, 3), T(2, 5))),
        ("GRUCell", (3, 4), lambda m, T: m(T(2, 2, 3))),
        ("LSTMCell", (3, 4), lambda m, T: m(T(2, 2, 3))),
        ("LSTMCell", (3, 4), lambda m, T: m(T(2, 3), T(2, 4))),
        ("RNN", (3, 4), None, dict(nonlinearity="foo")),
        ("RNN", (3, 4), None, dict(dropout=2)),
        ("RNN", (3, 0), None),
        ("GRU", (3, 4.0), None),
        ("LSTM", (3, 4), None, dict(num_layers=0)),
        ("LSTM", (3, 4), None, dict(proj_size=4)),
    ]
    for kind, args, call, *kw in cases:
        kwargs = kw[0] if kw else {}

        def ours():
            m = getattr(nn, kind)(*args, device=device, **kwargs)
            return call(m, lambda *s: wg.zeros(*s, device=device)) if call else m

        def theirs():
            m = getattr(torch.nn, kind)(*args, **kwargs)
            return call(m, torch.zeros) if call else m

        got, expected = map(str, raises_like(ours, theirs))
        if kind != "LSTMCell" or call is None:   # torch's message names its C++ lstm_cell()
            assert got == expected, tag(f"{kind}{args}: {got!r} != {expected!r}")


def test_unbatched_and_batch_first_shapes(device):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lstm = nn.LSTM(3, 4, 2, batch_first=True, bidirectional=True, device=device)
    out, (h, c) = lstm(wg.randn(2, 7, 3, device=device))
    assert (tuple(out.shape), tuple(h.shape), tuple(c.shape)) == ((2, 7, 8), (4, 2, 4), (4, 2, 4))
    out, h = nn.GRU(3, 4, device=device)(wg.randn(7, 3, device=device))
    assert (tuple(out.shape), tuple(h.shape)) == ((7, 4), (1, 4))
    assert len(lstm.all_weights) == 4 and lstm.all_weights[1][0] is lstm.weight_ih_l0_reverse
    lstm.flatten_parameters()   # PyTorch programs call it; a no-op here
