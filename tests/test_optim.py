"""webgrad.optim against torch.optim on CPU: several steps on random parameters and gradients, with
parameters and every state tensor compared; param groups, state_dict in torch's format both ways,
replayed (webgrad.jit) steps, and torch's errors."""
import numpy as np
import pytest
import torch

import webgrad as wg
from webgrad import nn, optim
from conftest import cross_entropy_step, randn, seed, tag

# `device` is conftest's fixture: every test runs on cpu and webgpu
SHAPES = [(7, 5), (5,), (3, 4, 2), (300,)]   # 300: more than one workgroup
CONFIGS = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, weight_decay=0.05)),
    ("SGD", dict(lr=0.05, momentum=0.9)),
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.8, nesterov=True)),
    ("SGD", dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.02)),
    ("SGD", dict(lr=0.05, maximize=True)),
    ("SGD", dict(lr=0.05, momentum=0.7, nesterov=True, weight_decay=0.02, maximize=True)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.02, betas=(0.8, 0.99), eps=0.05, weight_decay=0.1)),
    ("Adam", dict(lr=0.01, amsgrad=True)),
    ("Adam", dict(lr=0.01, amsgrad=True, weight_decay=0.05, maximize=True)),
    ("AdamW", dict(lr=0.01)),
    ("AdamW", dict(lr=0.03, betas=(0.5, 0.9), weight_decay=0.3)),
    ("AdamW", dict(lr=0.01, amsgrad=True, maximize=True)),
    ("RMSprop", dict()),
    ("RMSprop", dict(lr=0.005, alpha=0.9, eps=0.1, weight_decay=0.05)),
    ("RMSprop", dict(lr=0.01, momentum=0.8)),
    ("RMSprop", dict(lr=0.01, centered=True)),
    ("RMSprop", dict(lr=0.01, centered=True, momentum=0.5, weight_decay=0.1, maximize=True)),
    ("Adagrad", dict()),
    ("Adagrad", dict(lr=0.1, lr_decay=0.05, weight_decay=0.1)),
    ("Adagrad", dict(lr=0.05, initial_accumulator_value=0.3, eps=0.5, maximize=True)),
    ("Adadelta", dict()),
    ("Adadelta", dict(lr=0.5, rho=0.8, eps=1e-3, weight_decay=0.1)),
    ("Adadelta", dict(maximize=True)),
]
IDS = [f"{n}-{'-'.join(k) or 'defaults'}" for n, k in CONFIGS]
# one configuration per optimizer with its state in use, for the state_dict tests
RICH = {"SGD": dict(lr=0.05, momentum=0.9, dampening=0.2), "Adam": dict(lr=0.01, amsgrad=True),
        "AdamW": dict(lr=0.01, weight_decay=0.1), "RMSprop": dict(lr=0.01, centered=True, momentum=0.5),
        "Adagrad": dict(lr=0.05, lr_decay=0.01), "Adadelta": dict(rho=0.8)}
TORCH_ONLY_SETTINGS = {"foreach", "fused", "capturable", "differentiable"}


def _pair(device, shapes=SHAPES):
    values = [randn(*s) for s in shapes]
    return ([wg.tensor(v, device=device, requires_grad=True) for v in values],
            [torch.tensor(v, requires_grad=True) for v in values])


def _set_grads(ours, theirs, device):
    for p, t in zip(ours, theirs):
        g = randn(*p.shape)
        p.grad, t.grad = wg.tensor(g, device=device), torch.tensor(g)


def _assert_close(ours, theirs, what="parameter"):
    for i, (p, t) in enumerate(zip(ours, theirs)):
        expected = t.detach().numpy()
        # float32 rounding differs with the order of operations: an element that ends near 0 after
        # large steps keeps an error of a few ulps of the tensor's scale, not of its own value
        atol = 1e-6 * max(1.0, float(np.abs(expected).max(initial=0.0)))
        np.testing.assert_allclose(p.detach().numpy(), expected, rtol=1e-5, atol=atol, err_msg=tag(f"{what} {i}"))


def _assert_state_matches(opt, topt, ours, theirs):
    """Every parameter's state: the same names as torch's, tensors close, step counts equal."""
    for i, (p, t) in enumerate(zip(ours, theirs)):
        state, tstate = opt.state.get(p, {}), topt.state.get(t, {})
        assert set(state) == set(tstate), tag(f"parameter {i}: state {sorted(state)} vs torch's {sorted(tstate)}")
        for key, value in tstate.items():
            if key == "step":
                assert state[key] == float(value), tag(f"parameter {i}: step {state[key]} vs {float(value)}")
            else:
                _assert_close([state[key]], [value], f"parameter {i}'s {key}")


def _steps(opt, topt, ours, theirs, device, count):
    for _ in range(count):
        _set_grads(ours, theirs, device)
        opt.step()
        topt.step()


@pytest.mark.parametrize("name,kwargs", CONFIGS, ids=IDS)
def test_steps_match_torch(device, name, kwargs):
    ours, theirs = _pair(device)
    opt, topt = getattr(optim, name)(ours, **kwargs), getattr(torch.optim, name)(theirs, **kwargs)
    for _ in range(8):
        _steps(opt, topt, ours, theirs, device, 1)
        _assert_close(ours, theirs)
    _assert_state_matches(opt, topt, ours, theirs)


# per-group settings, different from the defaults given to the constructor
GROUPS = {
    "SGD": (dict(lr=0.1), dict(lr=0.05, momentum=0.5, nesterov=True, weight_decay=0.1), dict(momentum=0.9)),
    "Adam": (dict(lr=0.01), dict(lr=0.03, betas=(0.7, 0.95), amsgrad=True, weight_decay=0.1), dict()),
    "AdamW": (dict(), dict(lr=0.02, weight_decay=0.2, maximize=True), dict(lr=0.01)),
    "RMSprop": (dict(), dict(centered=True, momentum=0.3, alpha=0.8), dict(lr=0.02)),
    "Adagrad": (dict(lr=0.05), dict(lr_decay=0.1, initial_accumulator_value=0.2), dict()),
    "Adadelta": (dict(), dict(lr=0.3, rho=0.5, weight_decay=0.05), dict(lr=0.5)),
}


@pytest.mark.parametrize("name", list(GROUPS))
def test_param_groups_match_torch(device, name):
    first, second, defaults = GROUPS[name]
    ours, theirs = _pair(device)
    groups = lambda ps: [{"params": ps[:2], **first}, {"params": ps[2:], **second}]  # noqa: E731
    opt, topt = getattr(optim, name)(groups(ours), **defaults), getattr(torch.optim, name)(groups(theirs), **defaults)
    for group, tgroup in zip(opt.param_groups, topt.param_groups):
        for key, value in group.items():
            assert key == "params" or value == tgroup[key], tag(f"group setting {key}: {value} vs {tgroup[key]}")
        assert set(tgroup) - set(group) <= TORCH_ONLY_SETTINGS, tag(f"missing settings {set(tgroup) - set(group)}")
    _steps(opt, topt, ours, theirs, device, 5)
    _assert_close(ours, theirs)
    _assert_state_matches(opt, topt, ours, theirs)


@pytest.mark.parametrize("name", ["SGD", "Adam", "RMSprop", "Adadelta"])
def test_add_param_group_after_steps(device, name):
    ours, theirs = _pair(device)
    first, second, defaults = GROUPS[name]
    opt = getattr(optim, name)([{"params": ours[:1], **first}], **defaults)
    topt = getattr(torch.optim, name)([{"params": theirs[:1], **first}], **defaults)
    _steps(opt, topt, ours[:1], theirs[:1], device, 2)
    group = {"params": ours[1:], **second}
    opt.add_param_group(group)
    topt.add_param_group({"params": theirs[1:], **second})
    assert opt.param_groups[1] is group   # the dict itself, its defaults filled in, as torch
    _steps(opt, topt, ours, theirs, device, 3)
    _assert_close(ours, theirs)
    _assert_state_matches(opt, topt, ours, theirs)


def test_float64_parameters_update_in_float64_on_cpu():
    values = [randn(*s, dtype=np.float64) for s in SHAPES[:2]]
    ours = [wg.tensor(v, dtype=wg.float64, device="cpu", requires_grad=True) for v in values]
    theirs = [torch.tensor(v, requires_grad=True) for v in values]
    opt, topt = optim.Adam(ours, lr=0.01, amsgrad=True), torch.optim.Adam(theirs, lr=0.01, amsgrad=True)
    for _ in range(4):
        for p, t in zip(ours, theirs):
            g = randn(*p.shape, dtype=np.float64)
            p.grad, t.grad = wg.tensor(g, dtype=wg.float64, device="cpu"), torch.tensor(g)
        opt.step()
        topt.step()
    for p, t in zip(ours, theirs):
        assert p.dtype is wg.float64 and opt.state[p]["exp_avg"].dtype is wg.float64
        np.testing.assert_allclose(p.detach().numpy(), t.detach().numpy(), rtol=1e-13, err_msg=tag())


def test_param_groups_closure_and_strided_grads(device):
    ours, theirs = _pair(device)
    groups = lambda ps: [{"params": ps[:1]}, {"params": ps[1:], "lr": 0.5, "momentum": 0.5}]  # noqa: E731
    opt, topt = optim.SGD(groups(ours), lr=0.1, momentum=0.9), torch.optim.SGD(groups(theirs), lr=0.1, momentum=0.9)
    assert [g["lr"] for g in opt.param_groups] == [g["lr"] for g in topt.param_groups] == [0.1, 0.5]
    for step in range(3):
        _set_grads(ours, theirs, device)
        ours[0].grad = ours[0].grad.T.contiguous().T          # a transposed (non-contiguous) gradient
        assert not ours[0].grad.is_contiguous()
        opt.param_groups[1]["lr"] = topt.param_groups[1]["lr"] = 0.5 / (step + 1)   # schedulers edit groups
        assert opt.step(lambda: "loss") == "loss"
        topt.step()
        _assert_close(ours, theirs)


def test_named_parameters_become_param_names(device):
    model, tmodel = nn.Linear(3, 2).to(device), torch.nn.Linear(3, 2)
    opt, topt = optim.Adam(model.named_parameters()), torch.optim.Adam(tmodel.named_parameters())
    assert opt.param_groups[0]["param_names"] == topt.param_groups[0]["param_names"] == ["weight", "bias"]
    assert opt.state_dict()["param_groups"][0]["param_names"] == ["weight", "bias"]


def test_zero_grad(device):
    p = wg.randn(3, device=device, requires_grad=True)
    opt = optim.AdamW([p])
    assert opt.defaults["weight_decay"] == torch.optim.AdamW([torch.zeros(1, requires_grad=True)]).defaults[
        "weight_decay"]
    p.grad = wg.ones(3, device=device)
    opt.zero_grad(set_to_none=False)
    assert p.grad.tolist() == [0.0, 0.0, 0.0]
    opt.zero_grad()
    assert p.grad is None


# ---- state_dict ----
def _torch_state_dict(sd):
    """A webgrad optimizer state_dict as torch tensors (what a checkpoint carries between the two)."""
    return {"state": {k: {n: torch.from_numpy(v.numpy().copy()) if isinstance(v, wg.Tensor) else v
                          for n, v in s.items()} for k, s in sd["state"].items()},
            "param_groups": [dict(g) for g in sd["param_groups"]]}


def _webgrad_state_dict(sd, device):
    return {"state": {k: {n: wg.tensor(v.numpy(), device=device) if isinstance(v, torch.Tensor) else v
                          for n, v in s.items()} for k, s in sd["state"].items()},
            "param_groups": [dict(g) for g in sd["param_groups"]]}


def _groups(ps):
    return [{"params": ps[:1]}, {"params": ps[1:], "lr": 0.02}]


@pytest.mark.parametrize("name", list(RICH))
def test_state_dict_is_torchs_format(device, name):
    ours, theirs = _pair(device)
    opt = getattr(optim, name)(_groups(ours), **RICH[name])
    topt = getattr(torch.optim, name)(_groups(theirs), **RICH[name])
    _steps(opt, topt, ours, theirs, device, 3)
    sd, tsd = opt.state_dict(), topt.state_dict()
    assert set(sd) == {"state", "param_groups"}
    for group, tgroup in zip(sd["param_groups"], tsd["param_groups"]):
        assert group["params"] == tgroup["params"]
        assert {k: v for k, v in tgroup.items() if k not in TORCH_ONLY_SETTINGS} == group
    assert list(sd["state"]) == list(tsd["state"]) == list(range(len(SHAPES)))
    for key, tstate in tsd["state"].items():
        state = sd["state"][key]
        assert set(state) == set(tstate)
        for n, value in tstate.items():
            assert isinstance(state[n], wg.Tensor) and state[n].shape == value.shape
            assert state[n].dtype is wg.float32, tag(f"{n} is {state[n].dtype}")
            # float32 rounding of a state's terms is of the size of the state's largest values
            # (centered RMSprop's grad / sqrt(v - mean**2)), not of each element's own
            scale = max(1.0, float(np.abs(value.numpy()).max()))
            np.testing.assert_allclose(state[n].numpy(), value.numpy(), rtol=1e-5, atol=1e-6 * scale, err_msg=tag(n))


@pytest.mark.parametrize("name", list(RICH))
def test_state_dict_round_trip_continues_exactly(device, name):
    ours, _ = _pair(device)
    opt = getattr(optim, name)(_groups(ours), **RICH[name])
    for _ in range(3):
        for p in ours:
            p.grad = wg.tensor(randn(*p.shape), device=device)
        opt.step()
    copies = [p.detach().clone().requires_grad_() for p in ours]
    other = getattr(optim, name)([{"params": copies[:1]}, {"params": copies[1:]}], lr=0.5)
    other.load_state_dict(opt.state_dict())
    assert [g["lr"] for g in other.param_groups] == [g["lr"] for g in opt.param_groups]
    for _ in range(3):
        for p, c in zip(ours, copies):
            p.grad = c.grad = wg.tensor(randn(*p.shape), device=device)
        opt.step()
        other.step()
    for p, c in zip(ours, copies):
        np.testing.assert_array_equal(c.detach().numpy(), p.detach().numpy(), err_msg=tag(name))
        for key, value in opt.state[p].items():
            got = other.state[c][key]
            assert got == value if key == "step" else np.array_equal(got.numpy(), value.numpy()), tag(key)


@pytest.mark.parametrize("name", list(RICH))
def test_loads_torch_state_dict_and_torch_loads_ours(device, name):
    _, theirs = _pair(device)
    topt = getattr(torch.optim, name)(_groups(theirs), **RICH[name])
    for _ in range(3):
        for t in theirs:
            t.grad = torch.tensor(randn(*t.shape))
        topt.step()
    # torch's state (step tensors and all) into a webgrad optimizer over the same values
    ours = [wg.tensor(t.detach().numpy(), device=device, requires_grad=True) for t in theirs]
    opt = getattr(optim, name)(_groups(ours))
    opt.load_state_dict(_webgrad_state_dict(topt.state_dict(), device))
    _steps(opt, topt, ours, theirs, device, 3)
    _assert_close(ours, theirs)
    _assert_state_matches(opt, topt, ours, theirs)
    # and back: webgrad's state into a fresh torch optimizer
    theirs2 = [torch.tensor(p.detach().numpy(), requires_grad=True) for p in ours]
    topt2 = getattr(torch.optim, name)(_groups(theirs2))
    topt2.load_state_dict(_torch_state_dict(opt.state_dict()))
    _steps(opt, topt2, ours, theirs2, device, 3)
    _assert_close(ours, theirs2)
    _assert_state_matches(opt, topt2, ours, theirs2)


def test_load_state_dict_takes_step_numbers_and_checks_groups(device):
    p = wg.tensor(randn(4), device=device, requires_grad=True)
    opt = optim.Adam([p])
    state = {"step": 5, "exp_avg": wg.tensor(randn(4)), "exp_avg_sq": wg.tensor(np.abs(randn(4)))}
    opt.load_state_dict({"state": {0: state}, "param_groups": [{**opt.state_dict()["param_groups"][0], "lr": 0.5}]})
    assert opt.state[p]["step"] == 5.0 and opt.state[p]["exp_avg"].device == device
    assert opt.param_groups[0]["lr"] == 0.5 and opt.param_groups[0]["params"] == [p]
    with pytest.raises(ValueError, match="different number of parameter groups"):
        opt.load_state_dict({"state": {}, "param_groups": []})
    with pytest.raises(ValueError, match="doesn't match the size"):
        opt.load_state_dict({"state": {}, "param_groups": [{"params": [0, 1]}]})
    with pytest.raises(ValueError, match="shape"):
        opt.load_state_dict({"state": {0: {**state, "exp_avg": wg.zeros(3)}}, "param_groups": [{"params": [0]}]})


# ---- replays ----
def _train(name, kwargs, jitted, model_seed, schedule):
    """Losses and final weights of a few steps, with an lr scheduler stepping between them."""
    wg.manual_seed(model_seed)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3)).to("webgpu")
    opt = getattr(optim, name)(model.parameters(), **kwargs)
    scheduler = schedule(opt)
    calls = []
    step = cross_entropy_step(model, opt, calls)
    run = wg.jit(step) if jitted else step
    losses = []
    rng = np.random.default_rng(model_seed)
    for _ in range(7):
        x = wg.tensor(rng.standard_normal((8, 6)).astype(np.float32), device="webgpu")
        y = wg.tensor(rng.integers(0, 3, 8).astype(np.int32), device="webgpu")
        losses.append(run(x, y).item())
        scheduler.step()
    return np.array(losses), {k: v.detach().numpy() for k, v in model.state_dict().items()}, len(calls)


REPLAYED = [
    ("RMSprop", dict(lr=0.01, centered=True, momentum=0.5), lambda o: optim.lr_scheduler.StepLR(o, 2, 0.5)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.1), lambda o: optim.lr_scheduler.ExponentialLR(o, 0.8)),
    ("Adadelta", dict(weight_decay=0.01), lambda o: optim.lr_scheduler.CosineAnnealingLR(o, 5)),
    ("Adam", dict(lr=0.01, amsgrad=True), lambda o: optim.lr_scheduler.OneCycleLR(o, 0.05, total_steps=10)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.1), lambda o: optim.lr_scheduler.LinearLR(o, 0.2, total_iters=4)),
]


@pytest.mark.parametrize("name,kwargs,schedule", REPLAYED, ids=[r[0] for r in REPLAYED])
def test_replayed_steps_match_eager_steps(name, kwargs, schedule):
    s = seed() % 1000
    eager_losses, eager_state, _ = _train(name, kwargs, False, s, schedule)
    losses, state, calls = _train(name, kwargs, True, s, schedule)
    assert calls == 2   # the other steps were replays, their lr and step counts refreshed by hyper()
    np.testing.assert_array_equal(losses, eager_losses)
    for key in eager_state:
        np.testing.assert_array_equal(state[key], eager_state[key], err_msg=key)


# ---- errors, as torch's ----
BAD = [
    ("SGD", dict(lr=-0.1), "Invalid learning rate"),
    ("SGD", dict(lr=0.1, momentum=-0.5), "Invalid momentum value"),
    ("SGD", dict(lr=0.1, weight_decay=-1), "Invalid weight_decay value"),
    ("SGD", dict(lr=0.1, nesterov=True), "Nesterov momentum requires a momentum and zero dampening"),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.1, nesterov=True), "Nesterov momentum requires"),
    ("Adam", dict(lr=-1), "Invalid learning rate"),
    ("Adam", dict(eps=-1e-8), "Invalid epsilon value"),
    ("Adam", dict(betas=(1.0, 0.999)), "Invalid beta parameter at index 0"),
    ("Adam", dict(betas=(0.9, -0.1)), "Invalid beta parameter at index 1"),
    ("AdamW", dict(weight_decay=-0.01), "Invalid weight_decay value"),
    ("RMSprop", dict(lr=-0.01), "Invalid learning rate"),
    ("RMSprop", dict(eps=-1.0), "Invalid epsilon value"),
    ("RMSprop", dict(momentum=-0.1), "Invalid momentum value"),
    ("RMSprop", dict(weight_decay=-0.1), "Invalid weight_decay value"),
    ("RMSprop", dict(alpha=-0.5), "Invalid alpha value"),
    ("Adagrad", dict(lr=-0.01), "Invalid learning rate"),
    ("Adagrad", dict(lr_decay=-0.1), "Invalid lr_decay value"),
    ("Adagrad", dict(weight_decay=-0.1), "Invalid weight_decay value"),
    ("Adagrad", dict(initial_accumulator_value=-1.0), "Invalid initial_accumulator_value value"),
    ("Adagrad", dict(eps=-1.0), "Invalid epsilon value"),
    ("Adadelta", dict(lr=-1.0), "Invalid learning rate"),
    ("Adadelta", dict(rho=1.5), "Invalid rho value"),
    ("Adadelta", dict(eps=-1.0), "Invalid epsilon value"),
    ("Adadelta", dict(weight_decay=-1.0), "Invalid weight_decay value"),
]


@pytest.mark.parametrize("name,kwargs,message", BAD, ids=[f"{n}-{m}" for n, _, m in BAD])
def test_bad_hyperparameters_raise_like_torch(device, name, kwargs, message):
    with pytest.raises(ValueError, match=message):
        getattr(optim, name)([wg.zeros(2, device=device, requires_grad=True)], **kwargs)
    with pytest.raises(ValueError, match=message):
        getattr(torch.optim, name)([torch.zeros(2, requires_grad=True)], **kwargs)


def test_bad_parameters(device):
    p = wg.zeros(2, device=device, requires_grad=True)
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.SGD([], lr=0.1)
    with pytest.raises(TypeError, match="iterable of Tensors"):
        optim.SGD(p, lr=0.1)
    with pytest.raises(ValueError, match="non-leaf"):
        optim.SGD([p * 2], lr=0.1)
    with pytest.raises(ValueError, match="more than one parameter group"):
        optim.SGD([{"params": [p]}, {"params": [p]}], lr=0.1)
    with pytest.raises(TypeError, match="can only optimize Tensors"):
        optim.Adam([p, 1.0])
    opt, topt = optim.Adam([p]), torch.optim.Adam([torch.zeros(2, requires_grad=True)])
    for bad, error in ([p], TypeError), ({"params": {p}}, TypeError):
        with pytest.raises(error):
            opt.add_param_group(bad)
        with pytest.raises(error):
            topt.add_param_group([torch.zeros(1)] if isinstance(bad, list) else {"params": {torch.zeros(1)}})
