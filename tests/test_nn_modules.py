"""webgrad.nn's Module machinery, containers, activations, channel dropout, init and utils against
PyTorch on CPU (names, signatures, reprs, errors, values and gradients), on both devices."""
import collections
import copy
import inspect
import math

import numpy as np
import pytest
import torch

import webgrad as wg
from webgrad import nn, optim
from webgrad.nn import init
from conftest import assert_close, check_op, randn, rng, tag, uniform


def _np(t):
    return t.detach().numpy()


def _torch_text(text):
    """A PyTorch message or repr as webgrad words it."""
    return text.replace("torch", "webgrad")


def _same_error(ours_fn, theirs_fn, exact=True):
    """Both raise the same exception type, with the same message (PyTorch's names swapped for
    ours; with exact=False PyTorch's message may go on after ours ends)."""
    with pytest.raises(Exception) as theirs:
        theirs_fn()
    with pytest.raises(type(theirs.value)) as ours:
        ours_fn()
    expected, got = _torch_text(str(theirs.value)), str(ours.value)
    assert (got == expected) if exact else expected.startswith(got.rstrip(".")), tag(f"{got!r} vs {expected!r}")


def _signature(fn):
    return [(p.name, p.default, p.kind) for p in inspect.signature(fn).parameters.values() if p.name != "self"]


# ---- Parameter ----
def test_parameter_is_a_tensor_subclass(device):
    values = randn(3, 2)
    p = nn.Parameter(wg.tensor(values, device=device))
    assert isinstance(p, nn.Parameter) and isinstance(p, wg.Tensor) and p.is_leaf and p.requires_grad
    np.testing.assert_array_equal(_np(p), values)
    assert not isinstance(p * 2, nn.Parameter) and not isinstance(p.detach(), nn.Parameter)   # as in torch
    frozen = nn.Parameter(wg.tensor(values, device=device), requires_grad=False)
    assert isinstance(frozen, nn.Parameter) and not frozen.requires_grad
    assert repr(p).startswith("Parameter containing:\ntensor(")
    assert repr(torch.nn.Parameter(torch.ones(1))).startswith("Parameter containing:\ntensor(")
    assert tuple(nn.Parameter().shape) == tuple(torch.nn.Parameter().shape) == (0,)
    with pytest.raises(RuntimeError):   # integer tensors cannot require grad, in torch too
        nn.Parameter(wg.tensor([1, 2], device=device))
    twin = copy.deepcopy(p)
    assert isinstance(twin, nn.Parameter) and twin.requires_grad and twin.device == device
    init.zeros_(p)
    np.testing.assert_array_equal(_np(twin), values)   # a deep copy owns its values


def test_attribute_registration_follows_torchs_rules(device):
    def build(nn_, make):
        m = nn_.Linear(2, 3)
        m.plain = make(2).requires_grad_()     # a tensor that is no Parameter is a plain attribute
        m.extra = nn_.Parameter(make(4))
        m.child = nn_.ReLU()
        m.bias = None                          # a parameter set to None stays registered, as None
        return m

    ours, theirs = build(nn, lambda *s: wg.ones(*s, device=device)), build(torch.nn, torch.ones)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()] == ["weight",
                                                                                                    "extra"]
    assert list(ours._parameters) == list(theirs._parameters) and ours.bias is None
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert repr(ours) == repr(theirs)
    for action in [lambda m, t: setattr(m, "weight", t(2, 2)),             # a tensor onto a parameter's name
                   lambda m, t: setattr(m, "child", 3),                      # a non-module onto a child's name
                   lambda m, t: m.register_parameter("p", t(2)),
                   lambda m, t: m.register_parameter("a.b", None),
                   lambda m, t: m.register_parameter("in_features", None),
                   lambda m, t: m.add_module("x", 3),
                   lambda m, t: m.add_module("a.b", None),
                   lambda m, t: m.add_module("", None),
                   lambda m, t: m.add_module("weight", None),
                   lambda m, t: m.register_buffer("b", [1]),
                   lambda m, t: m.register_buffer("weight", t(1)),
                   lambda m, t: m.foo,
                   lambda m, t: m.train("yes"),
                   lambda m, t: m.load_state_dict([1]),
                   lambda m, t: m.to(t(1).int().dtype if isinstance(t(1), torch.Tensor) else wg.int32),
                   lambda m, t: m.get_submodule("child.x")]:
        _same_error(lambda: action(ours, lambda *s: wg.ones(*s, device=device)), lambda: action(theirs, torch.ones))
    del ours.extra, theirs.extra
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["weight"]
    assert ours.get_submodule("child") is ours.child and ours.get_submodule("") is ours


def _build(nn_, ones):
    """The same network built from torch.nn or webgrad.nn: containers of every kind, a module
    under two names, a tied weight, buffers persistent and not, None entries."""
    class Net(nn_.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn_.Sequential(nn_.Linear(3, 4), nn_.Tanh(), nn_.Linear(4, 4))
            self.blocks = nn_.ModuleList([nn_.Linear(4, 4), nn_.Linear(4, 4), nn_.GELU()])
            self.heads = nn_.ModuleDict({"b": nn_.Linear(4, 2), "a": nn_.Linear(4, 1)})
            self.scales = nn_.ParameterList([nn_.Parameter(ones(4)), ones(2)])
            self.extra = nn_.ParameterDict({"z": nn_.Parameter(ones(1)), "y": ones(3)})
            self.blocks[1].weight = self.encoder[2].weight
            self.shared = self.encoder[0]
            self.register_buffer("steps", ones(1))
            self.register_buffer("scratch", ones(2), persistent=False)
            self.register_buffer("nothing", None)
            self.register_parameter("missing", None)
            self.add_module("absent", None)

        def forward(self, x):
            h = self.encoder(x)
            for block in self.blocks:
                h = block(h)
            return self.heads["a"](h) * self.scales[0].sum() + self.extra["z"]

    return Net()


def test_traversal_and_state_dict_match_torch(device):
    ours, theirs = _build(nn, wg.ones).to(device), _build(torch.nn, torch.ones)

    def names(pairs):
        return [n for n, _ in pairs]

    for view in [lambda m: names(m.named_parameters()), lambda m: names(m.named_parameters("net", recurse=False)),
                 lambda m: names(m.named_parameters(prefix="p", remove_duplicate=False)),
                 lambda m: names(m.encoder.named_parameters(recurse=False)),
                 lambda m: names(m.named_buffers()), lambda m: names(m.named_buffers(recurse=False)),
                 lambda m: names(m.named_modules()), lambda m: names(m.named_modules(prefix="top")),
                 lambda m: names(m.named_modules(remove_duplicate=False)), lambda m: names(m.named_children()),
                 lambda m: [type(c).__name__ for c in m.children()],
                 lambda m: [type(c).__name__ for c in m.modules()],
                 lambda m: len(list(m.modules(remove_duplicate=False))),
                 lambda m: [tuple(p.shape) for p in m.parameters()], lambda m: len(list(m.buffers())),
                 lambda m: [(k, tuple(v.shape)) for k, v in m.state_dict().items()],
                 lambda m: list(m.state_dict(prefix="model.")),
                 lambda m: type(m.get_submodule("heads.a")).__name__]:
        assert view(ours) == view(theirs), tag(f"{view(ours)} != {view(theirs)}")
    kept = ours.state_dict(keep_vars=True)
    assert kept["encoder.0.weight"] is ours.encoder[0].weight and not ours.state_dict()["steps"].requires_grad
    assert repr(ours).replace(" (webgpu)", "") == _torch_text(repr(theirs))

    # values cross over both ways by name; a forward then agrees
    theirs.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in ours.state_dict().items()})
    init.normal_(ours.encoder[0].weight)
    ours.load_state_dict(theirs.state_dict())
    x = randn(5, 3)
    assert_close(ours(wg.tensor(x, device=device)), theirs(torch.tensor(x)), what="forward after loading")

    # missing and unexpected keys, reported as torch reports them
    partial = {k: v for k, v in theirs.state_dict().items() if k not in ("steps", "blocks.0.bias")}
    partial["spare"] = torch.zeros(1)
    result, expected = ours.load_state_dict(partial, strict=False), theirs.load_state_dict(partial, strict=False)
    assert (result.missing_keys, result.unexpected_keys) == (expected.missing_keys, expected.unexpected_keys)
    assert repr(ours.load_state_dict(theirs.state_dict())) == repr(theirs.load_state_dict(theirs.state_dict()))
    _same_error(lambda: ours.load_state_dict(partial), lambda: theirs.load_state_dict(partial))


def test_apply_modes_and_grads_match_torch(device):
    ours, theirs = _build(nn, wg.ones).to(device), _build(torch.nn, torch.ones)
    visits = {"ours": [], "theirs": []}
    assert ours.apply(lambda m: visits["ours"].append(type(m).__name__)) is ours
    theirs.apply(lambda m: visits["theirs"].append(type(m).__name__))
    assert visits["ours"] == visits["theirs"]
    ours.apply(lambda m: init.constant_(m.bias, 0.5) if isinstance(m, nn.Linear) else None)
    assert all((_np(m.bias) == 0.5).all() for m in ours.modules() if isinstance(m, nn.Linear))

    assert ours.eval() is ours and not any(m.training for m in ours.modules())
    ours.blocks.train()
    theirs.eval().blocks.train()
    assert [m.training for m in ours.modules()] == [m.training for m in theirs.modules()]
    assert ours.requires_grad_(False) is ours and not any(p.requires_grad for p in ours.parameters())
    ours.requires_grad_()
    ours(wg.randn(2, 3, device=device)).sum().backward()
    assert all(p.grad is not None for p in ours.encoder.parameters())
    ours.zero_grad(set_to_none=False)
    assert all(not _np(p.grad).any() for p in ours.parameters() if p.grad is not None)
    ours.zero_grad()
    assert all(p.grad is None for p in ours.parameters())


# ---- containers ----
def _linears(nn_, *sizes):
    """Linear layers that print differently (in_features i), so a repr shows which went where."""
    return [nn_.Linear(i, 1) for i in sizes]


def test_module_list_and_sequential_edits_match_torch(device):
    for kind in ("ModuleList", "Sequential"):
        def make(nn_):
            return getattr(nn_, kind)(_linears(nn_, 1, 2, 3)) if kind == "ModuleList" else nn_.Sequential(
                *_linears(nn_, 1, 2, 3))

        ours, theirs = make(nn), make(torch.nn)
        edits = [lambda c, nn_: c.append(nn_.Linear(4, 1)),
                 lambda c, nn_: c.extend(_linears(nn_, 5, 5, 5)),
                 lambda c, nn_: c.insert(1, nn_.Linear(6, 1)),
                 lambda c, nn_: c.__setitem__(-1, nn_.ReLU()),
                 lambda c, nn_: c.__delitem__(0),
                 lambda c, nn_: c.__delitem__(slice(None, None, 3)),
                 lambda c, nn_: c.pop(1),
                 lambda c, nn_: c.__iadd__(_linears(nn_, 7) if kind == "ModuleList" else nn_.Sequential(
                     nn_.Linear(7, 1)))]
        for edit in edits:
            edit(ours, nn)
            edit(theirs, torch.nn)
            assert repr(ours) == repr(theirs), tag(f"{kind}:\n{ours}\n!=\n{theirs}")
            assert len(ours) == len(theirs) and [type(m).__name__ for m in ours] == [type(m).__name__ for m in theirs]
        for view in [lambda c: repr(c[1:3]), lambda c: repr(c[::-1]), lambda c: repr(c[-2]),
                     lambda c: repr(c + c), lambda c: list(c.state_dict())]:
            assert view(ours) == view(theirs), tag(kind)
        _same_error(lambda: ours[len(ours)], lambda: theirs[len(theirs)])
        _same_error(lambda: ours.extend(3), lambda: theirs.extend(3)) if kind == "ModuleList" else None
        _same_error(lambda: ours(1), lambda: theirs(1)) if kind == "ModuleList" else None
    named = nn.Sequential(collections.OrderedDict([("first", nn.Linear(2, 3)), ("act", nn.ReLU())]))
    torch_named = torch.nn.Sequential(collections.OrderedDict([("first", torch.nn.Linear(2, 3)),
                                                               ("act", torch.nn.ReLU())]))
    assert repr(named[1:]) == repr(torch_named[1:]) and isinstance(named[0], nn.Linear)


def test_module_dict_matches_torch(device):
    ours, theirs = nn.ModuleDict({"b": nn.Linear(1, 1), "a": nn.ReLU()}), torch.nn.ModuleDict(
        {"b": torch.nn.Linear(1, 1), "a": torch.nn.ReLU()})
    edits = [lambda d, nn_: d.update([("c", nn_.Tanh()), ("b", nn_.Linear(2, 1))]),
             lambda d, nn_: d.update({"z": nn_.Linear(3, 1)}),
             lambda d, nn_: d.__setitem__("y", nn_.GELU()),
             lambda d, nn_: d.pop("a"),
             lambda d, nn_: d.__delitem__("c")]
    for edit in edits:
        edit(ours, nn)
        edit(theirs, torch.nn)
        assert repr(ours) == repr(theirs)
        assert list(ours) == list(theirs) == list(ours.keys()) and len(ours) == len(theirs)
        assert [type(m).__name__ for m in ours.values()] == [type(m).__name__ for m in theirs.values()]
        assert [k for k, _ in ours.items()] == [k for k, _ in theirs.items()]
    assert "z" in ours and "a" not in ours and list(ours.state_dict()) == list(theirs.state_dict())
    for bad in [lambda d: d.update(3), lambda d: d.update([("k", nn.ReLU(), 1)]), lambda d: d["nope"],
                lambda d: d(1)]:
        _same_error(lambda: bad(ours), lambda: bad(theirs), exact=False)
    ours.clear()
    assert len(ours) == 0 and list(ours.parameters()) == []


def test_parameter_list_and_dict_match_torch(device):
    def make(nn_, ones):
        plist = nn_.ParameterList([nn_.Parameter(ones(2)), ones(3, 2)])
        plist.append(ones(1)).extend([nn_.Parameter(ones(4)), ones(5)])
        pdict = nn_.ParameterDict({"w": ones(2), "b": nn_.Parameter(ones(1))})
        pdict.update([("c", ones(3)), ("a", ones(2, 2))])
        pdict["d"] = ones(1)
        pdict.setdefault("e", ones(6))
        return nn_.ModuleDict({"list": plist, "dict": pdict})

    ours, theirs = make(nn, lambda *s: wg.ones(*s, device=device)), make(torch.nn, torch.ones)
    assert repr(ours).replace(" (webgpu)", "") == _torch_text(repr(theirs))
    assert [(n, tuple(p.shape)) for n, p in ours.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in theirs.named_parameters()]
    plist, pdict = ours["list"], ours["dict"]
    assert all(isinstance(p, nn.Parameter) for p in plist) and all(isinstance(p, nn.Parameter) for p in
                                                                   pdict.values())
    assert len(plist) == 5 and tuple(plist[-4].shape) == (3, 2) and [tuple(p.shape) for p in plist[1:4:2]] == [
        (3, 2), (4,)]
    assert list(pdict.keys()) == list(theirs["dict"].keys()) and "c" in pdict and pdict.get("zz") is None
    popped = pdict.pop("c")
    assert tuple(popped.shape) == (3,) and "c" not in pdict and "dict.c" not in ours.state_dict()
    key, _ = pdict.popitem()
    assert key == "e" and list(pdict) == ["b", "w", "a", "d"]
    merged = pdict | {"f": wg.ones(1, device=device)}
    assert list(merged) == ["b", "w", "a", "d", "f"] and list(pdict.copy()) == list(pdict)
    assert list(pdict.fromkeys(["p", "q"])) == ["p", "q"]
    for bad in [lambda m, t: m["list"][9], lambda m, t: m["list"].extend(t(2)), lambda m, t: m["list"](t(1)),
                lambda m, t: m["dict"](t(1)), lambda m, t: m["dict"].__setitem__(1, t(1)),
                lambda m, t: m["dict"]["nope"]]:
        _same_error(lambda: bad(ours, lambda *s: wg.ones(*s, device=device)), lambda: bad(theirs, torch.ones),
                    exact=False)


# ---- weight tying, devices ----
def test_tied_weight_trains_once_like_torch(device):
    def make(nn_):
        first, second = nn_.Linear(4, 4), nn_.Linear(4, 4)
        second.weight = first.weight
        return nn_.Sequential(first, nn_.Tanh(), second)

    ours, theirs = make(nn), make(torch.nn)
    ours.to(device)
    theirs.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in ours.state_dict().items()})
    assert list(ours.state_dict()) == list(theirs.state_dict()) and ours[2].weight is ours[0].weight
    assert len(list(ours.parameters())) == len(list(theirs.parameters())) == 3
    ours_opt = optim.SGD(ours.parameters(), lr=0.1, momentum=0.9)
    theirs_opt = torch.optim.SGD(theirs.parameters(), lr=0.1, momentum=0.9)
    for _ in range(3):
        x = randn(6, 4)
        for model, opt, make_t in [(ours, ours_opt, lambda a: wg.tensor(a, device=device)),
                                   (theirs, theirs_opt, torch.tensor)]:
            opt.zero_grad()
            (model(make_t(x)) ** 2).mean().backward()
            opt.step()
    for (name, p), t in zip(ours.named_parameters(), theirs.parameters()):
        assert_close(p, t, 1e-5, 1e-5, f"{name} after 3 steps")


def test_to_moves_everything_and_keeps_the_parameter_objects(device):
    other = "webgpu" if device == "cpu" else "cpu"
    model = nn.Sequential(nn.Linear(3, 4, device=device), nn.BatchNorm1d(4, device=device))
    model.register_buffer("scratch", wg.ones(2, device=device), persistent=False)
    params = list(model.parameters())
    opt = optim.SGD(params, lr=0.5)   # made before the move, as PyTorch allows
    model(wg.randn(5, 3, device=device)).sum().backward()
    assert model.to(other) is model and all(a is b for a, b in zip(params, model.parameters()))
    assert all(p.device == other and p.grad.device == other and isinstance(p, nn.Parameter) for p in params)
    assert all(b.device == other for b in model.buffers()) and model[1].num_batches_tracked.dtype is wg.int32
    before = [_np(p).copy() for p in params]
    opt.zero_grad()
    model(wg.randn(5, 3, device=other)).sum().backward()
    grads = [_np(p.grad) for p in params]
    opt.step()
    for p, b, g in zip(params, before, grads):
        assert_close(p, b - 0.5 * g, 1e-6, 1e-6, "a step after .to() moves the live parameters")
    assert model.cpu() is model and all(t.device == "cpu" for t in model.state_dict().values())
    model.double()
    assert all(p.dtype is wg.float64 for p in params) and model[1].num_batches_tracked.dtype is wg.int32
    assert model.float() is model and all(p.dtype is wg.float32 for p in params)
    with pytest.raises(TypeError, match="only accepts floating point"):
        model.to(wg.int32)


# ---- activations and reshaping modules ----
ACTIVATIONS = [  # (ours, torch's, input range)
    (lambda: nn.SiLU(), lambda: torch.nn.SiLU(), (-4, 4)),
    (lambda: nn.ELU(), lambda: torch.nn.ELU(), (-4, 4)),
    (lambda: nn.ELU(alpha=0.5), lambda: torch.nn.ELU(alpha=0.5), (-4, 4)),
    (lambda: nn.Softplus(), lambda: torch.nn.Softplus(), (-30, 30)),
    (lambda: nn.Softplus(beta=2, threshold=3), lambda: torch.nn.Softplus(beta=2, threshold=3), (-4, 4)),
    (lambda: nn.Mish(), lambda: torch.nn.Mish(), (-4, 4)),
    (lambda: nn.Hardtanh(), lambda: torch.nn.Hardtanh(), (-3, 3)),
    (lambda: nn.Hardtanh(-0.5, 2.0), lambda: torch.nn.Hardtanh(-0.5, 2.0), (-3, 3)),
    (lambda: nn.ReLU6(), lambda: torch.nn.ReLU6(), (-3, 9)),
    (lambda: nn.GELU("tanh"), lambda: torch.nn.GELU("tanh"), (-4, 4)),
    (lambda: nn.LeakyReLU(0.2), lambda: torch.nn.LeakyReLU(0.2), (-3, 3)),
    (lambda: nn.Softmax(1), lambda: torch.nn.Softmax(1), (-3, 3)),
    (lambda: nn.LogSoftmax(dim=-1), lambda: torch.nn.LogSoftmax(dim=-1), (-3, 3)),
    (lambda: nn.Unflatten(1, (2, 3)), lambda: torch.nn.Unflatten(1, (2, 3)), (-1, 1)),
    (lambda: nn.Unflatten(-1, (-1, 2)), lambda: torch.nn.Unflatten(-1, (-1, 2)), (-1, 1)),
]


@pytest.mark.parametrize("ours,theirs,span", ACTIVATIONS, ids=[repr(t()) for _, t, _ in ACTIVATIONS])
def test_activation_modules_match_torch(device, ours, theirs, span):
    module, reference = ours(), theirs()
    assert repr(module) == repr(reference)
    x = uniform(4, 6, 2, low=span[0], high=span[1])
    check_op(lambda t: module(t), x, device=device, torch_fn=lambda t: reference(t))


def test_activation_reprs_and_implicit_softmax_dim(device):
    ours = nn.Sequential(nn.ReLU(inplace=True), nn.SiLU(inplace=True), nn.ELU(0.5, inplace=True),
                         nn.LeakyReLU(0.1, True), nn.Hardtanh(inplace=True), nn.ReLU6(True), nn.Mish(),
                         nn.Softplus(2, 10), nn.Softmax(), nn.LogSoftmax(), nn.GELU(), nn.Identity(7),
                         nn.Unflatten(1, [2, 2]), nn.Dropout1d(0.2), nn.Dropout2d(), nn.Dropout3d(0.1))
    theirs = torch.nn.Sequential(torch.nn.ReLU(inplace=True), torch.nn.SiLU(inplace=True),
                                 torch.nn.ELU(0.5, inplace=True), torch.nn.LeakyReLU(0.1, True),
                                 torch.nn.Hardtanh(inplace=True), torch.nn.ReLU6(True), torch.nn.Mish(),
                                 torch.nn.Softplus(2, 10), torch.nn.Softmax(), torch.nn.LogSoftmax(),
                                 torch.nn.GELU(), torch.nn.Identity(7), torch.nn.Unflatten(1, [2, 2]),
                                 torch.nn.Dropout1d(0.2), torch.nn.Dropout2d(), torch.nn.Dropout3d(0.1))
    assert repr(ours) == repr(theirs) == repr(nn.torch_equivalent(ours))
    x = wg.tensor(randn(3, 4), device=device)
    assert_close(ours[0](x), torch.relu(torch.tensor(x.numpy())), what="inplace=True gives the same values")
    for shape in [(5,), (3, 4), (2, 3, 4)]:
        x = randn(*shape)
        for module, reference in [(nn.Softmax(), torch.nn.Softmax()), (nn.LogSoftmax(), torch.nn.LogSoftmax())]:
            with pytest.warns(UserWarning, match="Implicit dimension choice"):
                got = module(wg.tensor(x, device=device))
            with pytest.warns(UserWarning):
                expected = reference(torch.tensor(x))
            assert_close(got, expected, what=f"{module} on {shape}")
    _same_error(lambda: nn.GELU("fast")(wg.zeros(1, device=device)), lambda: torch.nn.GELU("fast")(torch.zeros(1)))
    _same_error(lambda: nn.Unflatten(1, (2, 4))(wg.zeros(3, 6, device=device)),
                lambda: torch.nn.Unflatten(1, (2, 4))(torch.zeros(3, 6)))
    _same_error(lambda: nn.Hardtanh(2, 1), lambda: torch.nn.Hardtanh(2, 1))


# ---- channel dropout ----
@pytest.mark.parametrize("kind,shape", [("Dropout1d", (40, 16, 5)), ("Dropout1d", (32, 7)),
                                        ("Dropout2d", (24, 20, 3, 4)), ("Dropout3d", (20, 16, 2, 3, 2)),
                                        ("Dropout3d", (40, 2, 3, 2))])
def test_channel_dropout_zeroes_whole_channels(device, kind, shape):
    p = float(rng().uniform(0.2, 0.6))
    module = getattr(nn, kind)(p)
    batched = len(shape) == {"Dropout1d": 3, "Dropout2d": 4, "Dropout3d": 5}[kind]
    x_np, g_np = uniform(*shape, low=0.5, high=1.5), randn(*shape)
    x = wg.tensor(x_np, device=device, requires_grad=True)
    y = module(x)
    (y * wg.tensor(g_np, device=device)).sum().backward()
    channels = shape[:2] if batched else shape[:1]
    scale = _np(y) * (1 - p) / x_np          # 0 or 1 everywhere, the same across each channel
    per_channel = scale.reshape(*channels, -1)
    assert np.allclose(per_channel, per_channel[..., :1], atol=1e-5), tag("a channel was partly dropped")
    kept = per_channel[..., 0]
    assert np.all(np.isclose(kept, 0, atol=1e-5) | np.isclose(kept, 1, atol=1e-5)), tag(f"scales {np.unique(kept)}")
    dropped = float(np.isclose(kept, 0, atol=1e-5).mean())
    assert abs(dropped - p) < 4 * math.sqrt(p * (1 - p) / kept.size) + 0.02, tag(f"dropped {dropped} for p={p}")
    assert_close(x.grad, g_np * scale / (1 - p), 1e-5, 1e-5, "gradient: the same mask, scaled")
    np.testing.assert_array_equal(_np(module.eval()(x)), x_np)
    np.testing.assert_array_equal(_np(getattr(nn, kind)(0.0)(x)), x_np)
    assert not _np(getattr(nn, kind)(1.0)(x)).any()


def test_channel_dropout_errors_and_warnings_match_torch(device):
    F, TF = nn.functional, torch.nn.functional
    _same_error(lambda: F.dropout1d(wg.zeros(2, 2, 2, 2, device=device)), lambda: TF.dropout1d(torch.zeros(2, 2, 2, 2)))
    _same_error(lambda: nn.Dropout2d(1.5), lambda: torch.nn.Dropout2d(1.5))
    for fn, torch_fn in [(F.dropout2d, TF.dropout2d), (F.dropout3d, TF.dropout3d)]:
        for ndim in (2, 3):
            with pytest.warns(UserWarning) as ours:
                fn(wg.zeros(*(2,) * ndim, device=device))
            with pytest.warns(UserWarning) as theirs:
                torch_fn(torch.zeros(*(2,) * ndim))
            assert [str(w.message)[:60] for w in ours] == [str(w.message)[:60] for w in theirs], tag(f"{fn} {ndim}D")


# ---- init ----
def test_signatures_match_torch():
    for name in ["uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_", "eye_", "xavier_uniform_",
                 "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "orthogonal_", "calculate_gain"]:
        assert _signature(getattr(init, name)) == _signature(getattr(torch.nn.init, name)), name
    for name in ["silu", "elu", "mish", "hardtanh", "relu6", "dropout1d", "dropout2d", "dropout3d"]:
        assert _signature(getattr(nn.functional, name)) == _signature(getattr(torch.nn.functional, name)), name
    for name in ["clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm",
                 "parameters_to_vector", "vector_to_parameters"]:
        assert _signature(getattr(nn.utils, name)) == _signature(getattr(torch.nn.utils, name)), name
    for owner, names in [("Module", ["named_parameters", "named_buffers", "named_modules", "parameters", "modules",
                                     "load_state_dict", "register_buffer", "register_parameter", "add_module",
                                     "zero_grad", "train", "apply", "requires_grad_", "to", "type"]),
                         ("ModuleList", ["__init__", "append", "extend", "insert", "pop"]),
                         ("ModuleDict", ["__init__", "update", "pop"]), ("ParameterList", ["__init__", "append"]),
                         ("ParameterDict", ["__init__", "update", "setdefault", "get", "fromkeys", "pop"])]:
        for name in names:
            assert _signature(getattr(getattr(nn, owner), name)) == \
                _signature(getattr(getattr(torch.nn, owner), name)), f"{owner}.{name}"
    for name in ["ELU", "Softplus", "ReLU6", "LeakyReLU", "SiLU", "Mish", "GELU", "Softmax", "LogSoftmax",
                 "Unflatten", "Dropout1d", "Dropout2d", "Dropout3d", "RNNCell", "LSTMCell", "GRUCell"]:
        assert _signature(getattr(nn, name).__init__) == _signature(getattr(torch.nn, name).__init__), name


def _fill(device, shape=(300, 200)):
    return nn.Parameter(wg.zeros(*shape, device=device))


def test_normal_inits_have_torchs_spread(device):
    t = _fill(device)   # fan_in 200, fan_out 300
    for fill, std in [(lambda: init.xavier_normal_(t, gain=2.0), 2.0 * math.sqrt(2 / 500)),
                      (lambda: init.kaiming_normal_(t, mode="fan_out", nonlinearity="relu"), math.sqrt(2 / 300)),
                      (lambda: init.kaiming_normal_(t, a=0.3), torch.nn.init.calculate_gain("leaky_relu", 0.3)
                       / math.sqrt(200))]:
        v = _np(fill())
        assert abs(v.mean()) < 0.03 * std and v.std() == pytest.approx(std, rel=0.02), tag(f"std {v.std()} vs {std}")
    with pytest.warns(UserWarning, match="zero-element tensors is a no-op"):
        init.kaiming_normal_(wg.zeros(0, 3, device=device))
    with pytest.raises(NotImplementedError, match="generator"):
        init.normal_(t, generator=torch.Generator())
    assert init.calculate_gain("conv_transpose2d") == torch.nn.init.calculate_gain("conv_transpose2d")
    _same_error(lambda: init.calculate_gain("leaky_relu", "x"), lambda: torch.nn.init.calculate_gain("leaky_relu",
                                                                                                      "x"))
    _same_error(lambda: init.kaiming_normal_(t, mode="fan_avg"), lambda: torch.nn.init.kaiming_normal_(
        torch.zeros(3, 2), mode="fan_avg"))


def test_trunc_normal_matches_torchs_distribution(device):
    mean, std = float(rng().uniform(-1, 1)), float(rng().uniform(0.5, 2))
    a, b = mean - float(rng().uniform(0.2, 2)) * std, mean + float(rng().uniform(0.2, 3)) * std
    ours = _np(init.trunc_normal_(_fill(device, (400, 500)), mean, std, a, b)).ravel().astype(np.float64)
    theirs = torch.nn.init.trunc_normal_(torch.empty(400, 500), mean, std, a, b).numpy().ravel()
    assert ours.min() >= a and ours.max() <= b
    grid = np.linspace(a, b, 101)
    cdf_gap = np.abs(np.searchsorted(np.sort(ours), grid) - np.searchsorted(np.sort(theirs), grid)).max() / ours.size
    assert cdf_gap < 0.01, tag(f"empirical CDFs differ by {cdf_gap}")   # two-sample KS; 1e-2 is ~7 sigma here
    # and against the closed form of the truncated normal's mean
    alpha, beta = (a - mean) / std, (b - mean) / std
    pdf = lambda z: math.exp(-z * z / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    cdf = lambda z: (1 + math.erf(z / math.sqrt(2))) / 2  # noqa: E731
    expected_mean = mean + std * (pdf(alpha) - pdf(beta)) / (cdf(beta) - cdf(alpha))
    assert ours.mean() == pytest.approx(expected_mean, abs=0.01 * std)


@pytest.mark.parametrize("shape", [(6, 4), (4, 6), (5, 2, 3), (7, 7)])
def test_orthogonal_is_the_q_of_torchs_qr(device, shape):
    gain = float(rng().uniform(0.5, 2))
    rows, cols = shape[0], math.prod(shape[1:])
    s = int(rng().integers(2 ** 31))
    wg.manual_seed(s)
    drawn = wg.randn(rows, cols, device=device).numpy().astype(np.float64)   # the draw orthogonal_ makes
    wg.manual_seed(s)
    t = init.orthogonal_(nn.Parameter(wg.zeros(*shape, device=device)), gain=gain)
    q = _np(t).reshape(rows, cols).astype(np.float64)
    # torch.nn.init.orthogonal_'s recipe on the same draw: QR of the tall one, signs from R's diagonal
    tall = drawn.T if rows < cols else drawn
    qr_q, qr_r = np.linalg.qr(tall)
    expected = qr_q * np.sign(np.diag(qr_r))
    expected = (expected.T if rows < cols else expected) * gain
    np.testing.assert_allclose(q, expected, atol=1e-4, err_msg=tag("orthogonal_ vs QR"))
    gram = q @ q.T if rows < cols else q.T @ q
    np.testing.assert_allclose(gram, gain ** 2 * np.eye(min(rows, cols)), atol=1e-4)
    _same_error(lambda: init.orthogonal_(wg.zeros(3, device=device)), lambda: torch.nn.init.orthogonal_(
        torch.zeros(3)))


def test_eye(device):
    t = init.eye_(nn.Parameter(wg.zeros(3, 5, device=device)))
    np.testing.assert_array_equal(_np(t), torch.nn.init.eye_(torch.zeros(3, 5)).numpy())
    assert t.requires_grad and t.is_leaf
    _same_error(lambda: init.eye_(wg.zeros(2, 2, 2, device=device)), lambda: torch.nn.init.eye_(torch.zeros(2, 2, 2)))


# ---- nn.utils ----
def _params_with_grads(device):
    shapes = [(3, 4), (5,), (2, 2, 2)]
    values = [randn(*s) for s in shapes]
    grads = [randn(*s) * float(rng().uniform(0.1, 3)) for s in shapes]
    ours = [nn.Parameter(wg.tensor(v, device=device)) for v in values]
    theirs = [torch.nn.Parameter(torch.tensor(v)) for v in values]
    for p, t, g in zip(ours, theirs, grads):
        p.grad, t.grad = wg.tensor(g, device=device), torch.tensor(g)
    return ours, theirs


@pytest.mark.parametrize("norm_type", [2.0, 1, math.inf, 0.5, 3, "inf"])
def test_clip_grad_norm_matches_torch(device, norm_type):
    for max_norm in (float(rng().uniform(0.05, 0.5)), 1e6):   # clipping, and not
        ours, theirs = _params_with_grads(device)
        extra = nn.Parameter(wg.ones(2, device=device))     # no grad: skipped, as in torch
        total = nn.utils.clip_grad_norm_(iter(ours + [extra]), max_norm, norm_type)
        expected = torch.nn.utils.clip_grad_norm_(theirs, max_norm, norm_type)
        assert isinstance(total, wg.Tensor) and total.device == device and total.shape == ()
        assert_close(total, expected, what=f"total norm {norm_type}")
        for k, (p, t) in enumerate(zip(ours, theirs)):
            assert_close(p.grad, t.grad, what=f"clipped gradient {k}")
        assert extra.grad is None
    one = nn.Parameter(wg.tensor(randn(4), device=device))
    one.grad = wg.tensor(randn(4) * 10, device=device)
    assert float(nn.utils.clip_grad_norm_(one, 1.0)) > 1 and float((one.grad * one.grad).sum()) == pytest.approx(
        1.0, rel=1e-4)
    assert float(nn.utils.clip_grad_norm_([], 1.0)) == float(torch.nn.utils.clip_grad_norm_([], 1.0)) == 0.0


def test_clipping_reads_nothing_back(device, monkeypatch):
    ours, _ = _params_with_grads(device)
    reads = []
    download = wg.Tensor._host_bytes
    monkeypatch.setattr(wg.Tensor, "_host_bytes", lambda self: reads.append(1) or download(self))
    total = nn.utils.clip_grad_norm_(ours, 0.1)
    nn.utils.clip_grad_value_(ours, 0.01)
    assert not reads, tag("clipping read values back to the host")
    assert float(total) > 0 and len(reads) == 1
    ours, theirs = _params_with_grads(device)
    ours[1].grad, theirs[1].grad = ours[1].grad * float("nan"), theirs[1].grad * float("nan")
    _same_error(lambda: nn.utils.clip_grad_norm_(ours, 1.0, error_if_nonfinite=True),
                lambda: torch.nn.utils.clip_grad_norm_(theirs, 1.0, error_if_nonfinite=True))


def test_clip_grad_value_and_vectors_match_torch(device):
    ours, theirs = _params_with_grads(device)
    clip = float(rng().uniform(0.1, 1))
    assert nn.utils.clip_grad_value_(ours, clip) is None and torch.nn.utils.clip_grad_value_(theirs, clip) is None
    for k, (p, t) in enumerate(zip(ours, theirs)):
        assert_close(p.grad, t.grad, what=f"clamped gradient {k}")
    vec = nn.utils.parameters_to_vector(ours)
    assert_close(vec, torch.nn.utils.parameters_to_vector(theirs), what="parameters_to_vector")
    new = randn(vec.shape[0])
    nn.utils.vector_to_parameters(wg.tensor(new, device=device), ours)
    torch.nn.utils.vector_to_parameters(torch.tensor(new), theirs)
    for k, (p, t) in enumerate(zip(ours, theirs)):
        assert_close(p, t, what=f"vector_to_parameters {k}")
        assert isinstance(p, nn.Parameter) and p.is_leaf
    _same_error(lambda: nn.utils.vector_to_parameters([1.0], ours),
                lambda: torch.nn.utils.vector_to_parameters([1.0], theirs))
