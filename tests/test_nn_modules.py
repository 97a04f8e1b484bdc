"""webgrad.nn's Module machinery (Parameter, attribute registration, traversal, state_dict, apply,
modes), its containers, weight tying and moves between devices, against PyTorch on CPU (names, reprs,
errors, values and gradients), on both devices. Activations and channel dropout:
test_nn_activations.py; init and nn.utils: test_nn_init_utils.py."""
import collections
import copy

import numpy as np
import pytest
import torch

import webgrad as wg
from webgrad import nn, optim
from webgrad.nn import init
from conftest import assert_close, randn, tag, to_numpy
from torch_api import same_error, torch_text


# ---- Parameter ----
def test_parameter_is_a_tensor_subclass(device):
    values = randn(3, 2)
    p = nn.Parameter(wg.tensor(values, device=device))
    assert isinstance(p, nn.Parameter) and isinstance(p, wg.Tensor) and p.is_leaf and p.requires_grad
    np.testing.assert_array_equal(to_numpy(p), values)
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
    np.testing.assert_array_equal(to_numpy(twin), values)   # a deep copy owns its values


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
        same_error(lambda: action(ours, lambda *s: wg.ones(*s, device=device)), lambda: action(theirs, torch.ones))
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
    assert repr(ours).replace(" (webgpu)", "") == torch_text(repr(theirs))

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
    same_error(lambda: ours.load_state_dict(partial), lambda: theirs.load_state_dict(partial))


def test_apply_modes_and_grads_match_torch(device):
    ours, theirs = _build(nn, wg.ones).to(device), _build(torch.nn, torch.ones)
    visits = {"ours": [], "theirs": []}
    assert ours.apply(lambda m: visits["ours"].append(type(m).__name__)) is ours
    theirs.apply(lambda m: visits["theirs"].append(type(m).__name__))
    assert visits["ours"] == visits["theirs"]
    ours.apply(lambda m: init.constant_(m.bias, 0.5) if isinstance(m, nn.Linear) else None)
    assert all((to_numpy(m.bias) == 0.5).all() for m in ours.modules() if isinstance(m, nn.Linear))

    assert ours.eval() is ours and not any(m.training for m in ours.modules())
    ours.blocks.train()
    theirs.eval().blocks.train()
    assert [m.training for m in ours.modules()] == [m.training for m in theirs.modules()]
    assert ours.requires_grad_(False) is ours and not any(p.requires_grad for p in ours.parameters())
    ours.requires_grad_()
    ours(wg.randn(2, 3, device=device)).sum().backward()
    assert all(p.grad is not None for p in ours.encoder.parameters())
    ours.zero_grad(set_to_none=False)
    assert all(not to_numpy(p.grad).any() for p in ours.parameters() if p.grad is not None)
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
        same_error(lambda: ours[len(ours)], lambda: theirs[len(theirs)])
        same_error(lambda: ours.extend(3), lambda: theirs.extend(3)) if kind == "ModuleList" else None
        same_error(lambda: ours(1), lambda: theirs(1)) if kind == "ModuleList" else None
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
        same_error(lambda: bad(ours), lambda: bad(theirs), exact=False)
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
    assert repr(ours).replace(" (webgpu)", "") == torch_text(repr(theirs))
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
        same_error(lambda: bad(ours, lambda *s: wg.ones(*s, device=device)), lambda: bad(theirs, torch.ones),
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
    before = [to_numpy(p).copy() for p in params]
    opt.zero_grad()
    model(wg.randn(5, 3, device=other)).sum().backward()
    grads = [to_numpy(p.grad) for p in params]
    opt.step()
    for p, b, g in zip(params, before, grads):
        assert_close(p, b - 0.5 * g, 1e-6, 1e-6, "a step after .to() moves the live parameters")
    assert model.cpu() is model and all(t.device == "cpu" for t in model.state_dict().values())
    model.double()
    assert all(p.dtype is wg.float64 for p in params) and model[1].num_batches_tracked.dtype is wg.int32
    assert model.float() is model and all(p.dtype is wg.float32 for p in params)
    with pytest.raises(TypeError, match="only accepts floating point"):
        model.to(wg.int32)
