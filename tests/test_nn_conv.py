"""webgrad.nn's convolution, pooling, dropout and batch-norm layers, module buffers and the MNIST
models, against PyTorch on both devices (the ops themselves are tested in test_ops_conv.py)."""
import math

import numpy as np
import pytest
import torch

import webgrad as wg
from webgrad import nn, optim
from webgrad.nn import functional as F
from webgrad.ops import conv as conv_ops, padding as padding_ops
from conftest import assert_close, distinct, finite_difference_check, randn, seed

# `device` is conftest's fixture: every test runs on cpu and webgpu


def _np(t):
    return t.detach().numpy()


def _copy_weights(ours, theirs):
    """Give our module theirs' parameters and buffers (through load_state_dict)."""
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})


def _forward_backward(ours, theirs, x_np, device):
    """Outputs, input gradients and parameter gradients of sum(out * g) for both modules."""
    x, tx = wg.tensor(x_np, device=device, requires_grad=True), torch.tensor(x_np, requires_grad=True)
    y, ty = ours(x), theirs(tx)
    g = randn(*ty.shape)
    (y * wg.tensor(g, device=device)).sum().backward()
    (ty * torch.tensor(g)).sum().backward()
    return (y, ty), (x.grad, tx.grad), [(p.grad, tp.grad, n) for (n, p), tp in
                                        zip(ours.named_parameters(), theirs.parameters())]


def _assert_same(ours, theirs, x_np, device, atol=1e-4):
    (y, ty), (gx, tgx), grads = _forward_backward(ours, theirs, x_np, device)
    assert y.device == device and tuple(y.shape) == tuple(ty.shape)
    assert_close(y, ty, atol=atol, what="output")
    assert_close(gx, tgx, atol=atol, what="input gradient")
    for g, tg, name in grads:
        assert_close(g, tg, atol=atol, rtol=1e-4, what=f"gradient of {name}")


# ---- Conv2d ----
@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel lengths")
@pytest.mark.parametrize("args,kwargs,shape", [
    ((3, 4, 3), {}, (2, 3, 9, 8)),
    ((2, 5, (3, 2)), {"stride": 2, "padding": 1}, (3, 2, 10, 7)),
    ((3, 2, 3), {"stride": (2, 1), "padding": (0, 2), "dilation": 2, "bias": False}, (2, 3, 11, 9)),
    ((1, 3, 5), {"padding": 2}, (4, 1, 8, 8)),
    ((2, 3, 4), {"padding": "same"}, (2, 2, 7, 6)),
    ((2, 3, (3, 2)), {"padding": "same", "dilation": 2}, (1, 2, 9, 9)),
    ((2, 3, 3), {"padding": "valid"}, (2, 2, 5, 6)),
], ids=["plain", "strided-padded", "dilated-nobias", "5x5", "same-even", "same-dilated", "valid"])
def test_conv2d_matches_torch(args, kwargs, shape, device):
    ours, theirs = nn.Conv2d(*args, **kwargs, device=device), torch.nn.Conv2d(*args, **kwargs)
    assert repr(ours) == repr(theirs)
    assert [(n, tuple(p.shape)) for n, p in ours.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in theirs.named_parameters()]
    _copy_weights(ours, theirs)
    _assert_same(ours, theirs, randn(*shape), device)


def test_conv2d_default_init_matches_torch_bounds(device):
    # 64 biases: the largest of n uniform draws falls under 0.8 * bound with chance 0.8**n (6e-7 here)
    conv = nn.Conv2d(8, 64, (3, 5), device=device)
    bound = 1 / math.sqrt(8 * 3 * 5)   # kaiming_uniform_(a=sqrt(5)): U(-1/sqrt(fan_in), +), bias alike
    for p in (conv.weight, conv.bias):
        v = _np(p)
        assert p.is_leaf and p.requires_grad and p.device == device
        assert np.abs(v).max() <= bound and np.abs(v).max() > 0.8 * bound
    assert _np(conv.weight).std() == pytest.approx(bound / math.sqrt(3), rel=0.05)
    wg.manual_seed(seed())
    other = nn.Conv2d(8, 16, (3, 5), device="cpu" if device == "webgpu" else "webgpu")
    wg.manual_seed(seed())
    again = nn.Conv2d(8, 16, (3, 5), device=device)   # the same seed gives the same weights on either device
    np.testing.assert_allclose(_np(again.weight), _np(other.weight), atol=1e-6)


def test_conv2d_float64_finite_differences():
    conv = nn.Conv2d(2, 3, 3, stride=2, padding=1, dtype=wg.float64, device="cpu")
    w, b = _np(conv.weight), _np(conv.bias)
    finite_difference_check(lambda x, w, b: F.conv2d(x, w, b, 2, 1), randn(2, 2, 5, 6, dtype=np.float64), w, b)


def test_conv2d_errors():
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.Conv2d(4, 3, 3, groups=2)
    with pytest.raises(NotImplementedError, match="padding_mode"):
        nn.Conv2d(1, 1, 3, padding_mode="reflect")
    with pytest.raises(ValueError, match="Invalid padding string"):
        nn.Conv2d(1, 1, 3, padding="full")
    with pytest.raises(ValueError, match="strided"):
        nn.Conv2d(1, 1, 3, stride=2, padding="same")
    with pytest.raises(RuntimeError, match="to have 3 channels, but got 2"):
        nn.Conv2d(3, 2, 3)(wg.zeros(1, 2, 5, 5))


# ---- pooling ----
@pytest.mark.parametrize("kwargs,shape", [
    ({"kernel_size": 2}, (2, 3, 8, 8)),
    ({"kernel_size": 3, "stride": 2, "padding": 1}, (2, 2, 9, 7)),
    ({"kernel_size": (2, 3), "stride": (1, 2)}, (1, 3, 6, 9)),
    ({"kernel_size": 2, "stride": 1, "dilation": 2}, (2, 1, 7, 7)),
], ids=["2x2", "padded", "rect", "dilated"])
def test_max_pool2d_matches_torch(kwargs, shape, device):
    ours, theirs = nn.MaxPool2d(**kwargs), torch.nn.MaxPool2d(**kwargs)
    assert repr(ours) == repr(theirs)
    _assert_same(ours, theirs, distinct(*shape), device)   # no ties: torch sends a tie's gradient to one input


def test_max_pool2d_return_indices(device):
    """MaxPool2d(return_indices=True) and F.max_pool2d's positional ceil_mode, return_indices give
    (values, indices) as torch does; the indices are int32 (torch: int64, which webgrad has not)."""
    kwargs = {"kernel_size": 3, "stride": 2, "padding": 1}
    ours, theirs = nn.MaxPool2d(**kwargs, return_indices=True), torch.nn.MaxPool2d(**kwargs, return_indices=True)
    assert repr(ours) == repr(theirs)
    x = distinct(2, 3, 9, 8)
    want, want_at = theirs(torch.from_numpy(x))
    for values, at in (ours(wg.tensor(x, device=device)),
                       F.max_pool2d(wg.tensor(x, device=device), 3, 2, 1, 1, False, True)):
        assert at.dtype is wg.int32 and at.device == device
        assert_close(values, want, what="values")
        assert_close(at, want_at, what="indices")


@pytest.mark.parametrize("kwargs,shape", [
    ({"kernel_size": 2}, (2, 3, 8, 8)),
    ({"kernel_size": 3, "stride": 2, "padding": 1}, (2, 2, 9, 7)),
    ({"kernel_size": (2, 3), "stride": (1, 2)}, (1, 3, 6, 9)),
], ids=["2x2", "padded", "rect"])
def test_avg_pool2d_matches_torch(kwargs, shape, device):
    ours, theirs = nn.AvgPool2d(**kwargs), torch.nn.AvgPool2d(**kwargs)
    assert repr(ours) == repr(theirs)
    _assert_same(ours, theirs, randn(*shape), device)


def test_pool_errors():
    with pytest.raises(ValueError, match="pad should be at most half"):
        nn.MaxPool2d(2, padding=2)


# ---- Dropout ----
def test_dropout_train_and_eval(device):
    wg.manual_seed(seed())
    layer = nn.Dropout(0.3)
    assert repr(layer) == repr(torch.nn.Dropout(0.3))
    x = wg.tensor(randn(200, 50) + 5, device=device, requires_grad=True)   # no zeros of its own
    y = layer(x)
    kept = _np(y) != 0
    assert y.device == device
    assert kept.mean() == pytest.approx(0.7, abs=0.02)
    np.testing.assert_allclose(_np(y)[kept], _np(x)[kept] / 0.7, rtol=1e-6)
    g = randn(200, 50)
    (y * wg.tensor(g, device=device)).sum().backward()
    np.testing.assert_allclose(_np(x.grad), g * kept / 0.7, rtol=1e-6, atol=1e-7)

    # the mask comes from the seeded generator: the same seed gives the same mask on either device
    other = "cpu" if device == "webgpu" else "webgpu"
    wg.manual_seed(seed())
    same = layer(x.detach())
    wg.manual_seed(seed())
    there = layer(x.detach().to(other))
    np.testing.assert_array_equal(_np(same) != 0, kept)
    np.testing.assert_array_equal(_np(there) != 0, kept)

    assert layer.eval()(x) is x                       # eval: the identity
    assert F.dropout(x, 0.5, training=False) is x and F.dropout(x, 0.0) is x
    assert not _np(F.dropout(x, 1.0)).any()
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout(1.5)


# ---- BatchNorm ----
def _bn_pair(cls, tcls, device, **kwargs):
    ours, theirs = cls(6, device=device, **kwargs), tcls(6, **kwargs)
    with torch.no_grad():   # non-trivial affine parameters, the same in both
        if theirs.affine:
            theirs.weight.copy_(torch.tensor(randn(6) * 0.5 + 1))
            theirs.bias.copy_(torch.tensor(randn(6)))
    _copy_weights(ours, theirs)
    return ours, theirs


@pytest.mark.parametrize("kind,shape", [("1d", (8, 6)), ("1d", (4, 6, 5)), ("2d", (3, 6, 4, 5))],
                         ids=["1d-NC", "1d-NCL", "2d"])
@pytest.mark.parametrize("kwargs", [{}, {"momentum": 0.3, "eps": 1e-3}, {"momentum": None}, {"affine": False}],
                         ids=["default", "momentum-eps", "cumulative", "no-affine"])
def test_batch_norm_train_steps_running_stats_and_eval(kind, shape, kwargs, device):
    cls, tcls = (nn.BatchNorm1d, torch.nn.BatchNorm1d) if kind == "1d" else (nn.BatchNorm2d, torch.nn.BatchNorm2d)
    ours, theirs = _bn_pair(cls, tcls, device, **kwargs)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]
    opt = optim.SGD(ours.parameters(), lr=0.1) if ours.affine else None
    topt = torch.optim.SGD(theirs.parameters(), lr=0.1) if theirs.affine else None
    for step in range(3):   # train steps: batch statistics, gradients, running statistics
        x_np = randn(*shape) * (step + 1) + step
        _assert_same(ours, theirs, x_np, device)
        if opt:
            opt.step(), topt.step()
            ours.zero_grad(), theirs.zero_grad()
        assert_close(ours.running_mean, theirs.running_mean, what=f"running_mean after step {step}")
        assert_close(ours.running_var, theirs.running_var, what=f"running_var after step {step}")
        assert int(ours.num_batches_tracked.item()) == int(theirs.num_batches_tracked) == step + 1
        assert ours.running_mean.device == device and not ours.running_mean.requires_grad
    ours.eval(), theirs.eval()   # eval: the running statistics normalise; they stay as they are
    _assert_same(ours, theirs, randn(*shape) + 1, device)
    assert_close(ours.running_var, theirs.running_var, what="running_var after eval")
    assert int(ours.num_batches_tracked.item()) == 3


def test_batch_norm_without_running_stats(device):
    ours, theirs = _bn_pair(nn.BatchNorm2d, torch.nn.BatchNorm2d, device, track_running_stats=False)
    assert ours.running_mean is None and list(ours.state_dict()) == list(theirs.state_dict()) == ["weight", "bias"]
    x_np = randn(2, 6, 3, 3)
    _assert_same(ours, theirs, x_np, device)
    ours.eval(), theirs.eval()   # still the batch's statistics
    _assert_same(ours, theirs, x_np, device)


def test_batch_norm_float64_finite_differences():
    w, b = randn(3, dtype=np.float64) + 1, randn(3, dtype=np.float64)
    finite_difference_check(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
                            randn(4, 3, 2, 2, dtype=np.float64), w, b)


def test_batch_norm_errors(device):
    bn = nn.BatchNorm2d(3, device=device)
    with pytest.raises(ValueError, match="expected 4D input"):
        bn(wg.zeros(2, 3, device=device))
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        nn.BatchNorm1d(3, device=device)(wg.zeros(1, 3, device=device))
    with pytest.raises(ValueError, match="expected 3 channels"):
        bn(wg.zeros(2, 4, 2, 2, device=device))


# ---- buffers in Module ----
def test_buffers_state_dict_load_and_to(device):
    ours = nn.Sequential(nn.Conv2d(1, 4, 3, device=device), nn.BatchNorm2d(4, device=device), nn.ReLU(),
                         nn.Flatten(), nn.Linear(4 * 4 * 4, 3, device=device), nn.BatchNorm1d(3, device=device))
    theirs = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                                 torch.nn.Flatten(), torch.nn.Linear(4 * 4 * 4, 3), torch.nn.BatchNorm1d(3))
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert len(list(ours.parameters())) == len(list(theirs.parameters())) == 8   # buffers are no parameters
    for _ in range(2):   # train torch's so its buffers hold something, then load them (num_batches_tracked: int64)
        theirs(torch.tensor(randn(5, 1, 6, 6)))
    theirs.eval()
    ours.load_state_dict(theirs.state_dict())
    assert ours.eval() is ours
    x = randn(5, 1, 6, 6)
    assert_close(ours(wg.tensor(x, device=device)), theirs(torch.tensor(x)), what="eval after loading torch's state")
    assert ours[1].num_batches_tracked.dtype is wg.int32 and int(ours[1].num_batches_tracked.item()) == 2

    other = "cpu" if device == "webgpu" else "webgpu"
    ours.to(other)
    assert all(t.device == other for t in ours.state_dict().values())
    assert_close(ours(wg.tensor(x, device=other)), theirs(torch.tensor(x)), what="after .to()")
    ours.to(device).to(wg.float32)   # a dtype cast leaves the counter int32
    assert ours[1].num_batches_tracked.dtype is wg.int32 and ours[1].running_mean.device == device

    m = nn.Module()
    m.register_buffer("kept", wg.ones(2, device=device))
    m.register_buffer("scratch", wg.zeros(2, device=device), persistent=False)
    m.register_buffer("empty", None)
    assert list(m.state_dict()) == ["kept"] and [n for n, _ in m.named_buffers()] == ["kept", "scratch"]
    m.kept = wg.full((2,), 3.0, device=device)   # reassigning keeps it a buffer
    assert "kept" in m._buffers and _np(m.state_dict()["kept"]).tolist() == [3.0, 3.0]
    del m.kept
    assert list(m.state_dict()) == []
    with pytest.raises(KeyError, match="already exists"):
        m.register_buffer("training", wg.zeros(1))
    with pytest.raises(TypeError, match="Tensor or None"):
        m.register_buffer("bad", [1, 2])


def test_functional_names_are_the_ops():
    assert F.conv2d is conv_ops.conv2d and F.max_pool2d is conv_ops.max_pool2d
    assert F.avg_pool2d is conv_ops.avg_pool2d and F.pad is padding_ops.pad   # (all modes; constant is conv_ops.pad)
    assert set(F.__all__) >= {"conv2d", "max_pool2d", "avg_pool2d", "pad", "dropout", "batch_norm"}


# ---- the MNIST models ----
def _torch_mnist_mlp():
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 128), torch.nn.ReLU(),
                               torch.nn.Linear(128, 10))


def _torch_mnist_cnn():
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(32 * 7 * 7, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_mnist_models_match_torch(name, device):
    ours = nn.MODELS[name](device=device)
    theirs = {"mlp": _torch_mnist_mlp, "cnn": _torch_mnist_cnn}[name]()
    assert repr(ours) == repr(theirs) == repr(nn.torch_equivalent(ours))
    assert [(k, tuple(v.shape)) for k, v in ours.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in theirs.state_dict().items()]
    _copy_weights(ours, theirs)
    _assert_same(ours, theirs, randn(3, 1, 28, 28), device, atol=2e-4)
