"""Corners of torch's API that PyTorch programs lean on: where(condition) alone, zero gradients of
piecewise-constant ops (and floor_divide's missing one), div_ with rounding_mode, integer tensors as
Python indices (__index__), average pooling of integer tensors and its divisors; and names programs
use (x.new_*, type_as, format(t, '.4f'), np.array(t), softmax's dtype, scatter_, randint_like,
forward hooks, pad_sequence); on both devices against torch."""
import numpy as np
import pytest
import torch

import webgrad as wg
from conftest import assert_close, check_op, integers, randn, rng, tag, wg_tensor
from torch_api import raises_like, same_error


# ---- where(condition): nonzero(condition, as_tuple=True) ----
@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 4), ()])
def test_where_with_a_condition_alone_is_nonzero_as_tuple(shape, device):
    values = integers(*shape, low=-2, high=3)
    for make in (lambda m, x: m.where(x > 0), lambda m, x: m.where(x)):
        ours = make(wg, wg_tensor(values, device))
        theirs = make(torch, torch.from_numpy(np.asarray(values, np.int64)))
        assert isinstance(ours, tuple) and len(ours) == len(theirs), tag(f"{len(ours)} vs {len(theirs)}")
        for o, t in zip(ours, theirs):
            assert o.device == device and o.tolist() == t.tolist(), tag(f"{o.tolist()} vs {t.tolist()}")


def test_where_three_arguments_and_the_method(device):
    c, a, b = randn(4, 5) > 0, randn(4, 5), randn(5)
    ours = wg_tensor(a, device).where(wg_tensor(c, device), wg_tensor(b, device))
    assert_close(ours, torch.from_numpy(a).where(torch.from_numpy(c), torch.from_numpy(b)))
    assert_close(wg.where(wg_tensor(c, device), wg_tensor(a, device), 2.5),
                 torch.where(torch.from_numpy(c), torch.from_numpy(a), 2.5))
    raises_like(lambda: wg.where(wg_tensor(c, device), wg_tensor(a, device)),
                lambda: torch.where(torch.from_numpy(c), torch.from_numpy(a)))


# ---- gradients of piecewise-constant ops ----
PIECEWISE = {"sign": lambda x: x.sign(), "floor": lambda x: x.floor(), "ceil": lambda x: x.ceil(),
             "round": lambda x: x.round(), "trunc": lambda x: x.trunc(),
             "div_floor": lambda x: x.div(1.5, rounding_mode="floor"),
             "div_trunc": lambda x: x.div(1.5, rounding_mode="trunc")}


@pytest.mark.parametrize("name", list(PIECEWISE))
def test_piecewise_constant_ops_have_zero_gradients_as_torch(name, device):
    """x.grad is a tensor of zeros (not None), even where the upstream gradient is not finite."""
    a, upstream = randn(3, 4), randn(3, 4)
    upstream[0, 0], upstream[1, 1] = np.inf, np.nan
    ours, theirs = wg_tensor(a, device, requires_grad=True), torch.tensor(a, requires_grad=True)
    w = wg_tensor(randn(3, 4), device, requires_grad=True)
    (PIECEWISE[name](ours) + w).backward(wg_tensor(upstream, device))
    (PIECEWISE[name](theirs) + torch.from_numpy(w.detach().numpy())).backward(torch.from_numpy(upstream))
    assert ours.grad is not None, tag(f"{name}: no gradient")
    assert_close(ours.grad, theirs.grad, what=f"{name}'s gradient")


@pytest.mark.parametrize("make", [lambda x: x // 2.0, lambda x: x.floor_divide(x.detach().abs() + 0.7),
                                  lambda x: x.clone().floor_divide_(2.0)], ids=["operator", "function", "in_place"])
def test_floor_divide_has_no_derivative_as_torch(make, device):
    a = randn(3)
    ours, theirs = make(wg_tensor(a, device, requires_grad=True)), make(torch.tensor(a, requires_grad=True))
    assert_close(ours.detach(), theirs.detach())
    raises_like(lambda: ours.sum().backward(), lambda: theirs.sum().backward())


# ---- div_(other, rounding_mode=...) ----
@pytest.mark.parametrize("rounding_mode", [None, "trunc", "floor"])
def test_div_in_place_with_rounding_mode(rounding_mode, device):
    a, b = 4 * randn(3, 4), randn(4) + np.where(rng().random(4) < 0.5, -2.0, 2.0).astype(np.float32)
    ours, theirs = wg_tensor(a, device), torch.from_numpy(a.copy())
    assert ours.div_(wg_tensor(b, device), rounding_mode=rounding_mode) is ours, tag("a new tensor")
    assert_close(ours, theirs.div_(torch.from_numpy(b), rounding_mode=rounding_mode))
    ints, divisor = integers(5, low=-20, high=20), int(rng().integers(2, 5)) * (-1) ** int(rng().integers(2))
    if rounding_mode is None:   # a float quotient does not fit an int tensor
        raises_like(lambda: wg_tensor(ints, device).div_(divisor),
                    lambda: torch.from_numpy(ints.astype(np.int64)).div_(divisor))
        return
    ours = wg_tensor(ints, device).div_(divisor, rounding_mode=rounding_mode)
    theirs = torch.from_numpy(ints.astype(np.int64)).div_(divisor, rounding_mode=rounding_mode)
    assert ours.dtype is wg.int32 and ours.tolist() == theirs.tolist(), tag(f"{ours.tolist()} vs {theirs.tolist()}")


def test_div_in_place_gradient_and_errors(device):
    a, b = randn(5), randn(5) + 3.0
    leaf, theirs_leaf = wg_tensor(a, device, requires_grad=True), torch.tensor(a, requires_grad=True)
    for mode in ("floor", None):
        ours, theirs = leaf * 2, theirs_leaf * 2
        ours.div_(wg_tensor(b, device), rounding_mode=mode).sum().backward()
        theirs.div_(torch.from_numpy(b), rounding_mode=mode).sum().backward()
        assert_close(leaf.grad, theirs_leaf.grad, what=f"rounding_mode={mode}")
    same_error(lambda: wg_tensor(a, device).div_(2, rounding_mode="round"),
               lambda: torch.from_numpy(a).div_(2, rounding_mode="round"))
    x = wg_tensor(a, device)
    x /= wg_tensor(b, device)
    assert_close(x, torch.from_numpy(a) / torch.from_numpy(b), what="/=")


# ---- integer tensors as Python indices ----
def test_integer_tensor_as_slice_bound_and_index(device):
    values = integers(6, low=0, high=8)
    x, ours, theirs = randn(10), wg_tensor(values, device), torch.from_numpy(values.astype(np.int64))
    data = list(range(20))
    for make in (lambda t, v: v[:t.max() + 1], lambda t, v: v[t.min():t.max() + 1:2], lambda t, v: v[t[2]],
                 lambda t, v: v[t.reshape(2, 3)[1, 1]]):
        assert_close(make(ours, wg_tensor(x, device)), make(theirs, torch.from_numpy(x)))
        assert make(ours, data) == make(theirs, data), tag()
    assert list(range(ours.max())) == list(range(theirs.max())), tag()
    assert [0, 1, 2][wg.tensor([2], device=device)] == 2 and "abc"[wg.tensor(True, device=device)] == "b", tag()
    assert hex(ours[0]) == hex(theirs[0]), tag()


@pytest.mark.parametrize("bad", [[1.0], [1, 2], []], ids=["float", "two_elements", "empty"])
def test_only_one_element_integer_tensors_are_indices(bad, device):
    ours, theirs = wg.tensor(bad, device=device), torch.tensor(bad)
    same_error(lambda: [1, 2, 3][ours], lambda: [1, 2, 3][theirs])
    raises_like(lambda: range(ours), lambda: range(theirs))


# ---- average pooling of integer tensors ----
@pytest.mark.parametrize("dtype", ["uint8", "bool"])
def test_average_pooling_of_bytes_and_bools_raises_as_torch(dtype, device):
    x = integers(2, 3, 4, 4, low=0, high=2 if dtype == "bool" else 256)
    ours, theirs = wg_tensor(x, device).to(getattr(wg, dtype)), torch.from_numpy(x).to(getattr(torch, dtype))
    F, tF = wg.nn.functional, torch.nn.functional
    same_error(lambda: F.avg_pool2d(ours, 2), lambda: tF.avg_pool2d(theirs, 2))
    same_error(lambda: F.avg_pool1d(ours[0], 2), lambda: tF.avg_pool1d(theirs[0], 2))
    same_error(lambda: wg.nn.AvgPool2d(3, 1, 1)(ours), lambda: torch.nn.AvgPool2d(3, 1, 1)(theirs))
    for size in (3, 1, (2, 1)):
        same_error(lambda: F.adaptive_avg_pool2d(ours, size), lambda: tF.adaptive_avg_pool2d(theirs, size))
    same_error(lambda: F.adaptive_avg_pool1d(ours[0], 1), lambda: tF.adaptive_avg_pool1d(theirs[0], 1))


def test_average_pooling_of_int_rounds_toward_zero_as_torchs_long(device):
    x = integers(2, 3, 5, 6, low=-50, high=50)
    ours, theirs = wg_tensor(x, device), torch.from_numpy(x.astype(np.int64))
    for make in (lambda F, t: F.avg_pool2d(t, 2), lambda F, t: F.avg_pool2d(t, 3, 2, 1),
                 lambda F, t: F.avg_pool1d(t[0], 3, 2)):
        out, expected = make(wg.nn.functional, ours), make(torch.nn.functional, theirs)
        assert out.dtype is wg.int32 and out.tolist() == expected.tolist(), tag(f"{out.tolist()} vs {expected.tolist()}")
    for size in (2, 1):   # torch's int64 adaptive pooling refuses, as for bytes
        raises_like(lambda: wg.nn.functional.adaptive_avg_pool2d(ours, size),
                    lambda: torch.nn.functional.adaptive_avg_pool2d(theirs, size))


# ---- names PyTorch programs use that webgrad lacked ----
def test_new_tensor_methods_take_dtype_and_device_from_the_tensor(device):
    a = randn(2, 3)
    ours, theirs = wg_tensor(a, device), torch.from_numpy(a)
    for make in (lambda x: x.new_zeros(2, 3), lambda x: x.new_ones((4,)), lambda x: x.new_full((2, 2), 3.5),
                 lambda x: x.new_tensor([1, 2]), lambda x: x.new_zeros(3, dtype=x.long().dtype),
                 lambda x: x.long().new_tensor([[1.7, -2.2]]), lambda x: x.new_empty(2, 5).fill_(2.0)):
        out, expected = make(ours), make(theirs)
        assert out.device == device and out.dtype.name == str(expected.dtype).replace("int64", "int32")[6:], tag()
        assert_close(out, expected)
    assert ours.new_zeros(2, requires_grad=True).requires_grad, tag()


def test_type_as_to_with_copy_and_dtype_queries(device):
    ints, floats = wg.tensor([1, -2], device=device), wg_tensor(randn(3), device)
    assert ints.type_as(floats).dtype is wg.float32 and ints.type_as(floats).tolist() == [1.0, -2.0], tag()
    assert floats.to(device, non_blocking=True) is floats and floats.to(device, copy=True) is not floats, tag()
    assert_close(floats.to(wg.float32, copy=True), floats.numpy())
    assert floats.is_floating_point() and not ints.is_floating_point() and not floats.is_cuda, tag()
    assert wg.numel(floats) == torch.numel(torch.zeros(3)) == 3, tag()


def test_tensor_from_a_list_of_arrays_numpy_scalars_and_one_element_tensors(device):
    a, i = randn(3, 4), integers(3, low=-5, high=5)
    assert_close(wg.tensor(list(a), device=device), torch.tensor(np.stack(list(a))))
    ours, theirs = wg.tensor([i[0], i[1]], device=device), torch.tensor([i[0], i[1]])
    assert ours.dtype is wg.int32 and ours.tolist() == theirs.tolist(), tag(f"{ours.dtype}")
    assert wg.tensor([np.float32(0.5), 2], device=device).tolist() == torch.tensor([np.float32(0.5), 2]).tolist()
    for values in ([wg.tensor(int(i[0])), wg.tensor(int(i[1]))], [wg.tensor(True), wg.tensor(False)]):
        ours, theirs = wg.tensor(values, device=device), torch.tensor([torch.tensor(v.item()) for v in values])
        assert ours.dtype.name == str(theirs.dtype)[6:].replace("int64", "int32"), tag(f"{ours.dtype}")
        assert ours.tolist() == theirs.tolist(), tag()
    raises_like(lambda: wg.tensor([wg.ones(2), wg.ones(2)]), lambda: torch.tensor([torch.ones(2), torch.ones(2)]))


def test_randint_like(device):
    x = wg.zeros(3, 40, device=device)
    for args in ((5,), (-3, 4)):
        out, expected = wg.randint_like(x, *args), torch.randint_like(torch.zeros(3, 40), *args)
        low, high = (0, args[0]) if len(args) == 1 else args
        assert out.shape == expected.shape and out.dtype is wg.float32 and out.device == device, tag()
        values = out.numpy()
        assert values.min() >= low and values.max() < high and np.all(values == np.round(values)), tag(f"{values}")


def test_scatter_in_place(device):
    x, src = randn(3, 5), randn(3, 2)
    index = np.stack([rng().permutation(5)[:2] for _ in range(3)])
    for name in ("scatter_", "scatter_add_"):
        ours, theirs = wg_tensor(x, device), torch.from_numpy(x.copy())
        same = getattr(ours, name)(1, wg_tensor(index, device), wg_tensor(src, device))
        getattr(theirs, name)(1, torch.from_numpy(index.astype(np.int64)), torch.from_numpy(src))
        assert same is ours, tag(name)
        assert_close(ours, theirs, what=name)
    ours = wg_tensor(x, device).scatter_(1, wg_tensor(index, device), 1.5)
    assert_close(ours, torch.from_numpy(x.copy()).scatter_(1, torch.from_numpy(index.astype(np.int64)), 1.5))


def test_flip_takes_dims_by_keyword(device):
    a = randn(2, 3, 4)
    for make in (lambda m, x: m.flip(x, dims=[2]), lambda m, x: x.flip(dims=(0, 2)), lambda m, x: m.flip(x, [1])):
        assert_close(make(wg, wg_tensor(a, device)), make(torch, torch.from_numpy(a)))


@pytest.mark.parametrize("options", [dict(count_include_pad=False), dict(divisor_override=3),
                                     dict(count_include_pad=False, divisor_override=5)], ids=str)
def test_average_pooling_divisors(options, device):
    x, ints = randn(2, 3, 7, 6), integers(1, 2, 5, 5, low=-40, high=40)
    check_op(lambda t: wg.nn.functional.avg_pool2d(t, 3, 2, 1, **options), x, device=device,
             torch_fn=lambda t: torch.nn.functional.avg_pool2d(t, 3, 2, 1, **options))
    module = wg.nn.AvgPool2d(3, 1, 1, **options)(wg_tensor(ints, device))
    expected = torch.nn.AvgPool2d(3, 1, 1, **options)(torch.from_numpy(ints.astype(np.int64)))
    assert module.tolist() == expected.tolist(), tag(f"{module.tolist()} vs {expected.tolist()}")
    if "divisor_override" not in options:
        assert_close(wg.nn.AvgPool1d(3, 2, 1, **options)(wg_tensor(x[0], device)),
                     torch.nn.AvgPool1d(3, 2, 1, **options)(torch.from_numpy(x[0])))
    same_error(lambda: wg.nn.functional.avg_pool2d(wg_tensor(x, device), 2, divisor_override=0),
               lambda: torch.nn.functional.avg_pool2d(torch.from_numpy(x), 2, divisor_override=0))


@pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")   # (torch's __array__)
def test_format_and_numpy_conversion_as_torch(device):
    a = randn(3)
    ours, theirs = wg_tensor(a, device), torch.from_numpy(a)
    for spec in (".4f", "", "8.2e", "+.1%"):
        assert format(ours[1], spec) == format(theirs[1], spec), tag(spec)
    assert f"{wg.tensor(7, device=device)}" == f"{torch.tensor(7)}", tag()
    raises_like(lambda: format(ours, ".2f"), lambda: format(theirs, ".2f"))
    np.testing.assert_array_equal(np.array(ours), np.array(theirs))
    assert np.asarray(wg.tensor([1, 2], device=device), dtype=np.float32).dtype == np.float32, tag()
    raises_like(lambda: np.array(wg_tensor(a, device, requires_grad=True)),
                lambda: np.array(torch.tensor(a, requires_grad=True)))


def test_softmax_with_dtype_and_implicit_dim(device):
    ints = integers(3, 5, low=-3, high=3)
    for make in (lambda m, x: m.softmax(x, 1, dtype=m.float32), lambda m, x: x.log_softmax(-1, dtype=m.float32),
                 lambda m, x: m.nn.functional.softmax(x, dim=0, dtype=m.float32),
                 lambda m, x: m.nn.functional.log_softmax(x, 1, dtype=m.float32)):
        assert_close(make(wg, wg_tensor(ints, device)), make(torch, torch.from_numpy(ints.astype(np.int64))))
    a = randn(3, 5)
    with pytest.warns(UserWarning, match="Implicit dimension"):
        ours = wg.nn.functional.softmax(wg_tensor(a, device))
    with pytest.warns(UserWarning, match="Implicit dimension"):
        assert_close(ours, torch.nn.functional.softmax(torch.from_numpy(a)))


def _hooked(nn, device, log):
    """A two-layer model whose hooks log what they see, double the first layer's input and replace
    the second's output; handles to remove some of them again."""
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)).to(device)
    handles = [model[0].register_forward_pre_hook(lambda m, args: (args[0] * 2,)),
               model[2].register_forward_hook(lambda m, args, out: out + 1.0),
               model[2].register_forward_hook(lambda m, args, out: log.append(("last", list(out.shape)))),
               model[2].register_forward_hook(lambda m, args, out: log.append(("first", list(args[0].shape))),
                                              prepend=True),
               model.register_forward_pre_hook(lambda m, args, kwargs: log.append(("kwargs", sorted(kwargs))),
                                               with_kwargs=True)]
    return model, handles


def test_forward_hooks_as_torch(device):
    a = randn(5, 3)
    ours_log, theirs_log = [], []
    ours, ours_handles = _hooked(wg.nn, device, ours_log)
    theirs, theirs_handles = _hooked(torch.nn, "cpu", theirs_log)
    with torch.no_grad():
        for p, q in zip(ours.parameters(), theirs.parameters()):
            q.copy_(torch.from_numpy(p.detach().numpy()))
    for step in range(3):
        ours_out = ours(wg_tensor(a, device))
        assert_close(ours_out, theirs(torch.from_numpy(a)), what=f"step {step}")
        assert ours_log == theirs_log, tag(f"{ours_log} vs {theirs_log}")
        ours_handles[step].remove()
        theirs_handles[step].remove()
    with ours[0].register_forward_hook(lambda m, args, out: -out), \
            theirs[0].register_forward_hook(lambda m, args, out: -out):
        assert_close(ours(wg_tensor(a, device)), theirs(torch.from_numpy(a)), what="in the with block")
    assert_close(ours(wg_tensor(a, device)), theirs(torch.from_numpy(a)), what="after the with block")


@pytest.mark.parametrize("options", [dict(), dict(batch_first=True, padding_value=-1.5),
                                     dict(padding_side="left")], ids=str)
def test_pad_sequence(options, device):
    from webgrad.nn.utils.rnn import pad_sequence
    lengths = rng().permutation([2, 5, 3])
    check_op(lambda *s: pad_sequence(s, **options), *[randn(n, 3) for n in lengths], device=device,
             torch_fn=lambda *s: torch.nn.utils.rnn.pad_sequence(s, **options))
    raises_like(lambda: pad_sequence([]), lambda: torch.nn.utils.rnn.pad_sequence([]))


def test_memory_formats_are_accepted_and_keep_the_values(device):
    a = randn(2, 3, 4, 5)
    ours, theirs = wg_tensor(a, device), torch.from_numpy(a)
    for fmt in ("channels_last", "contiguous_format", "preserve_format"):
        for make in (lambda m, x: x.to(memory_format=getattr(m, fmt)),
                     lambda m, x: x.contiguous(memory_format=getattr(m, fmt)) if fmt != "preserve_format" else x):
            assert_close(make(wg, ours), make(torch, theirs), what=fmt)
    assert repr(wg.channels_last) == "webgrad.channels_last" and isinstance(wg.channels_last, wg.memory_format), tag()
    conv = wg.nn.Conv2d(3, 2, 3).to(device).to(memory_format=wg.channels_last)
    assert conv(ours).shape == (2, 2, 2, 3), tag()


def test_torch_random_module_seeds_the_default_generator(device):
    from conftest import seed
    wg.random.manual_seed(seed())
    first = wg.rand(5, device=device).tolist()
    wg.manual_seed(seed())
    assert wg.rand(5, device=device).tolist() == first and wg.random.initial_seed() == seed(), tag()
    state = wg.random.get_rng_state()
    drawn = wg.randn(3, device=device).tolist()
    wg.random.set_rng_state(state)
    assert wg.randn(3, device=device).tolist() == drawn, tag()
    assert all(hasattr(torch.random, name) for name in wg.random.__all__), tag("a name torch.random lacks")
