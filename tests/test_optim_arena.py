"""The optimizers' flat arenas (webgrad/optim/arena.py): a param group's parameters updated by one
dispatch, with the results of updating each alone, bit for bit; groups past what one dispatch binds;
gradients where backward or the user left them; parameters changed under the optimizer; replayed
steps; steps gated by an overflow check (GradScaler's); and clip_grad_norm_ over many gradients at
once. torch.optim on CPU is the oracle."""
import math

import numpy as np
import pytest
import torch

import webgrad as wg
from webgrad import nn, optim
from webgrad.nn import functional as F
from webgrad.optim.fused import FusedUpdate
from conftest import randn, rng, seed, tag
from test_optim import RICH, _assert_close, _assert_state_matches, _pair, _set_grads, _steps


def _dispatches(monkeypatch, fn):
    """How many kernels fn() queues on the webgpu device."""
    runtime, count = wg.get_backend("webgpu").runtime, []
    real = runtime.dispatch
    monkeypatch.setattr(runtime, "dispatch", lambda *args, **kwargs: (count.append(1), real(*args, **kwargs)))
    fn()
    monkeypatch.setattr(runtime, "dispatch", real)
    return len(count)


@pytest.mark.parametrize("name", list(RICH))
def test_one_dispatch_per_group_and_results_equal_per_parameter_updates(monkeypatch, name):
    """A group's parameters are updated by one dispatch, with the results, bit for bit, of each
    parameter updated alone (each in a group of its own: a dispatch each)."""
    shapes = [(7, 5), (5,), (3, 4, 2), (300,), (1,), (2, 3)]
    values = [randn(*s) for s in shapes]
    together = [wg.tensor(v, device="webgpu", requires_grad=True) for v in values]
    alone = [wg.tensor(v, device="webgpu", requires_grad=True) for v in values]
    opt = getattr(optim, name)(together, **RICH[name])
    single = getattr(optim, name)([{"params": [p]} for p in alone], **RICH[name])
    for step in range(4):
        for p, q in zip(together, alone):
            p.grad = q.grad = wg.tensor(randn(*p.shape), device="webgpu")
        if step:   # the first step makes the arena (a copy per parameter, once)
            assert _dispatches(monkeypatch, opt.step) == 1
            assert _dispatches(monkeypatch, single.step) == len(shapes)
        else:
            opt.step()
            single.step()
        for i, (p, q) in enumerate(zip(together, alone)):
            np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy(), err_msg=tag(f"parameter {i}"))
            for key, value in opt.state[p].items():
                other = single.state[q][key]
                assert value == other if key == "step" else np.array_equal(value.numpy(), other.numpy()), tag(key)


def test_more_parameters_than_one_dispatch_binds(device, monkeypatch):
    """Past the gradients one dispatch binds (and its parameter block holds), the group takes more
    dispatches, whose step count still advances once a step, replayed steps too."""
    shapes = [(3, 2)] * 20 + [(5,)] * 25
    ours, theirs = _pair(device, shapes)
    opt, topt = optim.Adam(ours, lr=0.01), torch.optim.Adam(theirs, lr=0.01)
    _steps(opt, topt, ours, theirs, device, 3)
    _assert_close(ours, theirs)
    _assert_state_matches(opt, topt, ours, theirs)
    if device == "webgpu":
        _set_grads(ours, theirs, device)
        assert 1 < _dispatches(monkeypatch, opt.step) < len(shapes) // 2
        topt.step()
        _assert_close(ours, theirs)


@pytest.mark.parametrize("scale", [None, 4.0])
def test_gradients_sharing_a_buffer_and_strided_ones(device, scale):
    """Gradients that are views of one tensor (read where they lie, at their offsets), a transposed
    one, and a parameter's own values as its gradient (which the update overwrites). Scaled ones,
    given inv_grad_scale (GradScaler's step), are left unscaled where they lie, the transposed too."""
    ours, theirs = _pair(device)
    opt, topt = optim.SGD(ours, lr=0.1, momentum=0.9), torch.optim.SGD(theirs, lr=0.1, momentum=0.9)
    for _ in range(3):
        flat = randn(sum(p.numel() for p in ours) + 3)
        at, flat_ours, flat_theirs = 3, wg.tensor(flat * (scale or 1), device=device), torch.tensor(flat)
        for p, t in zip(ours, theirs):
            n = p.numel()
            p.grad, t.grad = flat_ours[at:at + n].view(p.shape), flat_theirs[at:at + n].view(t.shape)
            at += n
        ours[0].grad, theirs[0].grad = ours[0].grad.T.contiguous().T, theirs[0].grad.T.contiguous().T
        if scale is None:
            ours[1].grad, theirs[1].grad = ours[1].detach(), theirs[1].detach().clone()
        else:
            opt.found_inf, opt.inv_grad_scale = wg.tensor(0.0, device=device), wg.tensor(1 / scale, device=device)
        opt.step()
        opt.__dict__.pop("found_inf", None)
        opt.__dict__.pop("inv_grad_scale", None)
        topt.step()
        _assert_close(ours, theirs)
        if scale is not None:
            _assert_close([p.grad for p in ours], [t.grad for t in theirs], "unscaled gradient")


def test_parameters_changed_under_the_optimizer_behave_as_torch(device):
    """New values (`.data =`, also of another shape where no state depends on it), a parameter
    without a gradient for some steps (it falls behind in step count), requires_grad turned off
    and on, and a group's lr changed: the arena follows, as torch's tensors do."""
    ours, theirs = _pair(device)
    opt, topt = optim.Adam(ours, lr=0.01, weight_decay=0.1), torch.optim.Adam(theirs, lr=0.01, weight_decay=0.1)
    _steps(opt, topt, ours, theirs, device, 2)
    new = randn(*ours[0].shape)
    ours[0].data, theirs[0].data = wg.tensor(new, device=device), torch.tensor(new)
    for p, t in zip(ours[2:3], theirs[2:3]):
        p.requires_grad_(False)
        t.requires_grad_(False)
    for _ in range(2):
        _set_grads(ours, theirs, device)
        ours[2].grad = theirs[2].grad = None
        opt.step()
        topt.step()
    _assert_close(ours, theirs)
    ours[2].requires_grad_(True)
    theirs[2].requires_grad_(True)
    opt.param_groups[0]["lr"] = topt.param_groups[0]["lr"] = 0.03
    _steps(opt, topt, ours, theirs, device, 2)
    _assert_close(ours, theirs)
    _assert_state_matches(opt, topt, ours, theirs)
    sgd, tsgd = optim.SGD(ours[1:2], lr=0.1), torch.optim.SGD(theirs[1:2], lr=0.1)
    wider = randn(9)
    ours[1].data, theirs[1].data = wg.tensor(wider, device=device), torch.tensor(wider)
    _steps(sgd, tsgd, ours[1:2], theirs[1:2], device, 2)
    _assert_close(ours[1:2], theirs[1:2])


def test_replayed_steps_with_groups_and_a_missing_gradient(monkeypatch):
    """nanoGPT's decay and no-decay groups, one parameter left without a gradient: the replayed
    steps equal eager ones bit for bit, one update dispatch per group."""
    def train(jitted):
        wg.manual_seed(seed() % 1000)
        model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3), nn.Linear(3, 3)).to("webgpu")
        params = list(model.parameters())
        opt = optim.AdamW([{"params": [p for p in params if p.ndim == 2], "weight_decay": 0.1},
                           {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0}], lr=0.01)

        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(model[2](model[1](model[0](x))), y)   # model[3] gets no gradient
            loss.backward()
            opt.step()
            return loss
        run = wg.jit(step) if jitted else step
        rng = np.random.default_rng(seed())
        losses = []
        for _ in range(5):
            x = wg.tensor(rng.standard_normal((8, 6)).astype(np.float32), device="webgpu")
            y = wg.tensor(rng.integers(0, 3, 8).astype(np.int32), device="webgpu")
            losses.append(run(x, y).item())
        return losses, [p.detach().numpy() for p in params], run
    eager_losses, eager_params, _ = train(False)
    losses, params, run = train(True)
    np.testing.assert_array_equal(losses, eager_losses)
    for got, expected in zip(params, eager_params):
        np.testing.assert_array_equal(got, expected)
    (program,) = run._programs.values()
    runtime = wg.get_backend("webgpu").runtime
    updates = {pipeline for key, pipeline in runtime._pipelines.items() if key[0] == "optim"}
    assert sum(pipeline in updates for pipeline, _, _ in program.recording.dispatches) == 2


def test_clip_grad_norm_over_many_gradients(device):
    """More gradients than one dispatch binds, some sharing a buffer, one strided: the norm and the
    clipped gradients are torch's."""
    shapes = [(3, 2)] * 30 + [(7,)] * 12 + [(40, 3)]
    for norm_type in (2.0, math.inf, 1.5):
        ours, theirs = _pair(device, shapes)
        _set_grads(ours, theirs, device)
        flat = randn(12 * 7)
        shared_ours, shared_theirs = wg.tensor(flat, device=device), torch.tensor(flat)
        for k in range(12):
            ours[30 + k].grad, theirs[30 + k].grad = shared_ours[7 * k:7 * k + 7], shared_theirs[7 * k:7 * k + 7]
        ours[-1].grad = ours[-1].grad.T.contiguous().T
        total = nn.utils.clip_grad_norm_(ours, 0.5, norm_type)
        expected = torch.nn.utils.clip_grad_norm_(theirs, 0.5, norm_type)
        np.testing.assert_allclose(total.item(), expected.item(), rtol=1e-5, err_msg=tag(f"norm {norm_type}"))
        _assert_close([p.grad for p in ours], [t.grad for t in theirs], f"clipped gradient ({norm_type})")


@pytest.mark.parametrize("name", list(RICH))
def test_gated_steps_are_skipped_on_the_device_as_torch_skips_them(device, name):
    """Given an overflow check (found_inf, as GradScaler.step hands it), each optimizer steps as
    torch's where it is zero and leaves parameters, state and step counts as they were where it is
    not (inf or NaN counts alike), past what one dispatch binds too; plain steps after it go on
    counting on the device. Given the gradients times a scale and its inverse (inv_grad_scale), the
    update unscales them as it reads them, and leaves them unscaled where it steps (scaled where not)."""
    ours, theirs = _pair(device, [(3, 2)] * 20 + [(5,)] * 25)
    opt, topt = getattr(optim, name)(ours, **RICH[name]), getattr(torch.optim, name)(theirs, **RICH[name])
    for found, scale in ((0.0, None), (1.0, 8.0), (0.0, 4.0), (float("nan"), None), (0.0, 0.5), (None, None)):
        _set_grads(ours, theirs, device)
        expected = [t.grad.numpy() * (scale if scale and found else 1) for t in theirs]
        if found is not None:
            opt.found_inf = wg.tensor(found, device=device)
        if scale is not None:
            opt.inv_grad_scale = wg.tensor(1 / scale, device=device)
            for p in ours:
                p.grad.mul_(scale)
        opt.step()
        opt.__dict__.pop("found_inf", None)
        opt.__dict__.pop("inv_grad_scale", None)
        if not found:
            topt.step()
        _assert_close(ours, theirs)
        for k, (p, grad) in enumerate(zip(ours, expected)):
            np.testing.assert_array_equal(p.grad.cpu().numpy(), grad, err_msg=tag(f"gradient {k} after step"))
        _assert_state_matches(opt, topt, ours, theirs)
    assert opt._step_supports_amp_scaling


@pytest.mark.parametrize("name", list(RICH))
def test_step_is_one_fused_call_per_group(device, monkeypatch, name):
    params = [wg.randn(4, 3, device=device, requires_grad=True) for _ in range(5)]
    for p in params[:2] + params[3:]:
        p.grad = wg.ones(4, 3, device=device)   # params[2] has none: it stays as it is
    backend, calls = params[0].backend, []
    real = backend.optimizer_step
    monkeypatch.setattr(backend, "optimizer_step",
                        lambda update, regions, states, segments, hyper: (
                            calls.append((update.kind, len(segments))), real(update, regions, states, segments, hyper)))
    before = params[2].tolist()
    opt = getattr(optim, name)([{"params": params[:3]}, {"params": params[3:], "lr": 0.5}], lr=0.1)
    opt.step()
    assert calls == [(opt.update.kind, 2)] * 2 and params[2].tolist() == before


def test_update_and_kernel_agree_by_name():
    """A FusedUpdate naming a hyperparameter its WGSL function does not take is refused."""
    class Mismatched(optim.Adam):
        update = FusedUpdate("adam", {**optim.Adam.update.hyper, "gamma": "f32"}, optim.Adam.update.states,
                             optim.Adam.update.numpy)

        def _hyper(self, group, state, fresh):
            return dict(super()._hyper(group, state, fresh), gamma=1.0)
    p = wg.zeros(3, device="webgpu", requires_grad=True)
    p.grad = wg.ones(3, device="webgpu")
    with pytest.raises(RuntimeError, match="fn adam takes"):
        Mismatched([p]).step()


@pytest.mark.parametrize("name", ["Adam", "SGD"])
def test_eager_steps_reuse_their_parameter_packing(monkeypatch, name):
    """An eager loop's later steps make no new packing function for the update's words (compiling one
    a step cost ~150 us of an eager MNIST step's host time); their results stay torch's."""
    from webgrad.backends.webgpu.kernels import params
    shapes = [tuple(int(v) for v in rng().integers(1, 9, size=2)) for _ in range(3)]
    values = [randn(*s) for s in shapes]
    ours = [wg.tensor(v, device="webgpu", requires_grad=True) for v in values]
    theirs = [torch.tensor(v, requires_grad=True) for v in values]
    opt, ref = getattr(optim, name)(ours, lr=0.01), getattr(torch.optim, name)(theirs, lr=0.01)
    made = []
    real = params.ParamBlock.scalar_packer
    monkeypatch.setattr(params.ParamBlock, "scalar_packer", lambda *a, **k: (made.append(1), real(*a, **k))[1])
    for step in range(3):
        grads = [randn(*s) for s in shapes]
        for p, q, g in zip(ours, theirs, grads):
            p.grad, q.grad = wg.tensor(g, device="webgpu"), torch.tensor(g)
        opt.step()
        ref.step()
        if step == 0:
            first = len(made)
    assert len(made) == first, tag(f"{len(made) - first} packers made after the first step")
    for p, q in zip(ours, theirs):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6, err_msg=tag(name))
