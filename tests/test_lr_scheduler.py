"""webgrad.optim.lr_scheduler against torch.optim.lr_scheduler: the same learning rates (and cycled
momentums) float for float over many steps, from randomly drawn settings; the same state_dict;
torch's errors. That the lr reaches replayed steps is tested in test_optim.py."""
import math

import pytest
import torch

import webgrad as wg
from webgrad import optim
from webgrad.optim import lr_scheduler
from conftest import rng, tag

STEPS = 60


def _optimizers(name="SGD", lrs=(0.1, 0.03), **kwargs):
    """webgrad's and torch's optimizer over two param groups (schedulers only read and set the groups)."""
    def groups(zeros):
        return [{"params": [zeros(2, requires_grad=True)], "lr": lr} for lr in lrs]
    ours = getattr(optim, name)(groups(lambda *a, **k: wg.zeros(*a, device="cpu", **k)), **kwargs)
    return ours, getattr(torch.optim, name)(groups(torch.zeros), **kwargs)


def _uniform(low, high):
    return float(rng().uniform(low, high))


def _int(low, high):
    return int(rng().integers(low, high + 1))


class Decay:
    """A callable object: its attributes are part of LambdaLR's state_dict."""

    def __init__(self, rate):
        self.rate = rate

    def __call__(self, epoch):
        return self.rate ** epoch


# name -> (optimizer settings, make(module, optimizer, drawn) -> scheduler, draw() -> settings)
SCHEDULES = {
    "StepLR": (dict(), lambda m, o, d: m.StepLR(o, **d), lambda: dict(step_size=_int(1, 7), gamma=_uniform(0.1, 0.9))),
    "MultiStepLR": (dict(), lambda m, o, d: m.MultiStepLR(o, **d),
                    lambda: dict(milestones=sorted([_int(1, 50) for _ in range(4)] + [20, 20]),
                                 gamma=_uniform(0.2, 0.9))),
    "ConstantLR": (dict(), lambda m, o, d: m.ConstantLR(o, **d),
                   lambda: dict(factor=_uniform(0.05, 1.0), total_iters=_int(1, 30))),
    "LinearLR": (dict(), lambda m, o, d: m.LinearLR(o, **d),
                 lambda: dict(start_factor=_uniform(0.05, 1.0), end_factor=_uniform(0.0, 1.0),
                              total_iters=_int(1, 40))),
    "ExponentialLR": (dict(), lambda m, o, d: m.ExponentialLR(o, **d), lambda: dict(gamma=_uniform(0.8, 0.99))),
    "PolynomialLR": (dict(), lambda m, o, d: m.PolynomialLR(o, **d),
                     lambda: dict(total_iters=_int(5, 50), power=_uniform(0.5, 3.0))),
    "CosineAnnealingLR": (dict(), lambda m, o, d: m.CosineAnnealingLR(o, **d),
                          lambda: dict(T_max=_int(3, 20), eta_min=_uniform(0.0, 0.01))),
    "CosineAnnealingWarmRestarts": (dict(), lambda m, o, d: m.CosineAnnealingWarmRestarts(o, **d),
                                    lambda: dict(T_0=_int(2, 9), T_mult=_int(1, 3), eta_min=_uniform(0.0, 0.01))),
    "LambdaLR": (dict(), lambda m, o, d: m.LambdaLR(o, [lambda e: 1 / (1 + d["k"] * e), Decay(d["rate"])]),
                 lambda: dict(k=_uniform(0.01, 0.5), rate=_uniform(0.9, 0.99))),
    "MultiplicativeLR": (dict(), lambda m, o, d: m.MultiplicativeLR(o, lambda e: d["rate"] if e % 3 else 1.0),
                         lambda: dict(rate=_uniform(0.8, 0.99))),
    "SequentialLR": (dict(), lambda m, o, d: m.SequentialLR(
        o, [m.LinearLR(o, d["start"], total_iters=d["warmup"]), m.ExponentialLR(o, d["gamma"]),
            m.CosineAnnealingLR(o, T_max=d["t_max"])], milestones=[d["warmup"], d["warmup"] + d["t_max"]]),
        lambda: dict(start=_uniform(0.05, 0.9), warmup=_int(1, 10), gamma=_uniform(0.8, 0.99), t_max=_int(5, 20))),
    "ChainedScheduler": (dict(), lambda m, o, d: m.ChainedScheduler(
        [m.ConstantLR(o, d["factor"], total_iters=d["iters"]), m.ExponentialLR(o, d["gamma"])]),
        lambda: dict(factor=_uniform(0.1, 1.0), iters=_int(1, 20), gamma=_uniform(0.8, 0.99))),
    "OneCycleLR-SGD": (dict(momentum=0.9), lambda m, o, d: m.OneCycleLR(o, total_steps=STEPS + 1, **d),
                       lambda: dict(max_lr=[_uniform(0.1, 1.0), _uniform(0.1, 1.0)], pct_start=_uniform(0.1, 0.5),
                                    anneal_strategy=["cos", "linear"][_int(0, 1)], three_phase=bool(_int(0, 1)))),
    "OneCycleLR-Adam": (dict(), lambda m, o, d: m.OneCycleLR(o, epochs=3, steps_per_epoch=STEPS // 3 + 1, **d),
                        lambda: dict(max_lr=_uniform(0.001, 0.1), div_factor=_uniform(5, 50),
                                     final_div_factor=_uniform(10, 1e4))),
    "CyclicLR": (dict(momentum=0.9), lambda m, o, d: m.CyclicLR(o, **d),
                 lambda: dict(base_lr=_uniform(0.001, 0.01), max_lr=_uniform(0.05, 0.5), step_size_up=_int(2, 9),
                              step_size_down=_int(2, 9), mode=["triangular", "triangular2", "exp_range"][_int(0, 2)],
                              gamma=_uniform(0.9, 0.99))),
}
OPTIMIZER_OF = {"OneCycleLR-Adam": "Adam"}


def _pair(name):
    settings, make, draw = SCHEDULES[name]
    drawn = draw()
    opt, topt = _optimizers(OPTIMIZER_OF.get(name, "SGD"), **settings)
    return opt, topt, make(lr_scheduler, opt, drawn), make(torch.optim.lr_scheduler, topt, drawn), drawn


def _assert_same_groups(opt, topt, what):
    for group, tgroup in zip(opt.param_groups, topt.param_groups):
        for key in ("lr", "momentum", "betas"):
            if key in tgroup:
                assert group[key] == tgroup[key], tag(f"{what}: {key} {group[key]!r} vs torch's {tgroup[key]!r}")


def _assert_same_state(sched, tsched):
    """The same state_dict, the optimizer's own settings aside (a scheduler holds no tensors)."""
    state, tstate = sched.state_dict(), tsched.state_dict()
    assert state.keys() == tstate.keys(), tag(f"{sorted(state)} vs torch's {sorted(tstate)}")
    for key in tstate:
        assert state[key] == tstate[key], tag(f"state_dict[{key!r}]: {state[key]!r} vs {tstate[key]!r}")


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_lr_sequence_and_state_match_torch(name):
    opt, topt, sched, tsched, drawn = _pair(name)
    _assert_same_groups(opt, topt, f"{name}{drawn} at construction")
    for step in range(STEPS):
        opt.step()
        topt.step()
        sched.step()
        tsched.step()
        assert sched.get_last_lr() == tsched.get_last_lr(), tag(f"{name}{drawn} step {step}")
        _assert_same_groups(opt, topt, f"{name}{drawn} step {step}")
    _assert_same_state(sched, tsched)


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_loads_torchs_state_dict_and_continues(name):
    _, topt, _, tsched, drawn = _pair(name)
    for _ in range(_int(1, STEPS // 2)):
        topt.step()
        tsched.step()
    opt, _ = _optimizers(OPTIMIZER_OF.get(name, "SGD"), **SCHEDULES[name][0])
    sched = SCHEDULES[name][1](lr_scheduler, opt, drawn)
    for group, tgroup in zip(opt.param_groups, topt.param_groups):   # what loading the optimizer would restore
        group.update({k: v for k, v in tgroup.items() if k != "params"})
    sched.load_state_dict(tsched.state_dict())
    for step in range(STEPS // 2 - 1):
        topt.step()
        sched.step()
        tsched.step()
        assert sched.get_last_lr() == tsched.get_last_lr(), tag(f"{name}{drawn} step {step} after loading")
        _assert_same_groups(opt, topt, f"{name} step {step} after loading")


@pytest.mark.parametrize("name,settings", [
    ("StepLR", dict(step_size=3, gamma=0.5)), ("MultiStepLR", dict(milestones=[2, 5, 5, 9], gamma=0.3)),
    ("ExponentialLR", dict(gamma=0.9)), ("CosineAnnealingLR", dict(T_max=7, eta_min=0.001)),
    ("LinearLR", dict(start_factor=0.2, total_iters=6)), ("ConstantLR", dict(factor=0.5, total_iters=4)),
    ("PolynomialLR", dict(total_iters=8, power=2.0))])
def test_step_with_epoch_uses_the_closed_form(name, settings):
    opt, topt = _optimizers()
    sched = getattr(lr_scheduler, name)(opt, **settings)
    tsched = getattr(torch.optim.lr_scheduler, name)(topt, **settings)
    for epoch in [int(e) for e in rng().integers(0, 15, 10)]:
        with pytest.warns(UserWarning, match="epoch parameter"):
            sched.step(epoch)
        with pytest.warns(UserWarning):
            tsched.step(epoch)
        assert sched.get_last_lr() == tsched.get_last_lr(), tag(f"{name} at epoch {epoch}")


def test_warm_restarts_step_to_fractional_epochs():
    opt, topt = _optimizers()
    sched = lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=3, T_mult=2, eta_min=0.001)
    tsched = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(topt, T_0=3, T_mult=2, eta_min=0.001)
    for epoch in sorted(float(e) for e in rng().uniform(0, 30, 25)):
        sched.step(epoch)
        tsched.step(epoch)
        assert sched.get_last_lr() == tsched.get_last_lr(), tag(f"epoch {epoch}")


@pytest.mark.parametrize("mode,threshold_mode", [("min", "rel"), ("min", "abs"), ("max", "rel"), ("max", "abs")])
def test_reduce_on_plateau_matches_torch(mode, threshold_mode):
    opt, topt = _optimizers()
    settings = dict(mode=mode, threshold_mode=threshold_mode, factor=_uniform(0.1, 0.9), patience=_int(0, 4),
                    threshold=_uniform(1e-4, 0.05), cooldown=_int(0, 3), min_lr=[0.001, _uniform(0.0, 0.01)])
    sched = lr_scheduler.ReduceLROnPlateau(opt, **settings)
    tsched = torch.optim.lr_scheduler.ReduceLROnPlateau(topt, **settings)
    metric = 1.0
    for step in range(STEPS * 2):
        # long plateaus with occasional improvements and relapses
        metric *= [1.0, 1.0, 1.0, 0.9, 1.08][_int(0, 4)]
        if step % 2:   # a 0-d (float32) tensor, as a loss would be
            sched.step(wg.tensor(metric, device="cpu"))
            tsched.step(torch.tensor(metric))
        else:
            sched.step(metric)
            tsched.step(metric)
        assert sched.get_last_lr() == tsched.get_last_lr(), tag(f"{settings} step {step}")
    assert opt.param_groups[0]["lr"] < 0.1   # the lr was reduced at least once
    _assert_same_state(sched, tsched)


def test_scheduler_sets_the_lr_the_optimizer_steps_with():
    """A schedule changes the update: SGD's step follows the scheduled lr."""
    p = wg.ones(3, device="cpu", requires_grad=True)
    opt = optim.SGD([p], lr=1.0)
    sched = lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    for lr in (1.0, 0.5, 0.25):
        p.grad = wg.ones(3, device="cpu")
        before = p.tolist()[0]
        opt.step()
        sched.step()
        assert math.isclose(before - p.tolist()[0], lr)


ERRORS = [
    (TypeError, lambda m, o: m.StepLR("not an optimizer", 3)),
    (ValueError, lambda m, o: m.ConstantLR(o, factor=1.5)),
    (ValueError, lambda m, o: m.LinearLR(o, start_factor=0.0)),
    (ValueError, lambda m, o: m.LinearLR(o, end_factor=2.0)),
    (ValueError, lambda m, o: m.LambdaLR(o, [lambda e: 1.0])),
    (TypeError, lambda m, o: m.MultiplicativeLR(o, 0.9)),
    (ValueError, lambda m, o: m.OneCycleLR(o, max_lr=0.1)),
    (ValueError, lambda m, o: m.OneCycleLR(o, max_lr=0.1, total_steps=0)),
    (ValueError, lambda m, o: m.OneCycleLR(o, max_lr=0.1, total_steps=10, pct_start=1.5)),
    (ValueError, lambda m, o: m.OneCycleLR(o, max_lr=0.1, total_steps=10, anneal_strategy="step")),
    (ValueError, lambda m, o: m.OneCycleLR(o, max_lr=[0.1], total_steps=10)),
    (ValueError, lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=0)),
    (ValueError, lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=0)),
    (ValueError, lambda m, o: m.ReduceLROnPlateau(o, factor=1.0)),
    (ValueError, lambda m, o: m.ReduceLROnPlateau(o, mode="avg")),
    (ValueError, lambda m, o: m.ReduceLROnPlateau(o, threshold_mode="pct")),
    (ValueError, lambda m, o: m.ReduceLROnPlateau(o, min_lr=[0.1])),
    (ValueError, lambda m, o: m.SequentialLR(o, [m.ExponentialLR(o, 0.9)], milestones=[3])),
    (ValueError, lambda m, o: m.SequentialLR(o, [m.ReduceLROnPlateau(o), m.ExponentialLR(o, 0.9)], milestones=[3])),
    (ValueError, lambda m, o: m.CyclicLR(o, 0.01, 0.1, mode="sine")),
    (KeyError, lambda m, o: m.StepLR(o, 3, last_epoch=5)),
]


@pytest.mark.parametrize("error,make", ERRORS, ids=[str(i) for i in range(len(ERRORS))])
def test_bad_arguments_raise_like_torch(error, make):
    opt, topt = _optimizers()
    with pytest.raises(error):
        make(lr_scheduler, opt)
    with pytest.raises(error):
        make(torch.optim.lr_scheduler, topt)


def test_errors_while_stepping_like_torch():
    opt, topt = _optimizers("Adagrad")
    for module, o in ((lr_scheduler, opt), (torch.optim.lr_scheduler, topt)):
        with pytest.raises(ValueError, match="momentum or beta1"):
            module.CyclicLR(o, 0.01, 0.1)
    opt, topt = _optimizers()
    scheds = [m.OneCycleLR(o, max_lr=0.1, total_steps=3)
              for m, o in ((lr_scheduler, opt), (torch.optim.lr_scheduler, topt))]
    for sched in scheds:
        for _ in range(3):
            sched.optimizer.step()
            sched.step()
        with pytest.raises(ValueError, match="Tried to step 4 times"):
            sched.step()
