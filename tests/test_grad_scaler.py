"""GradScaler against torch.amp.GradScaler("cpu") step for step (scale, clean-step count,
parameters, optimizer state and step counts, state_dict), its misuse errors as torch's, the whole
AMP step under wg.jit against the eager one, and autocast + GradScaler training against float32
torch training."""
import numpy as np
import pytest
import torch
from conftest import randn, tag

import webgrad as wg

def _scaled_step(lib, scaler, param, optimizer, c, device=None):
    optimizer.zero_grad()
    weights = torch.tensor(c) if lib is torch else wg.tensor(c, device=device)
    scaler.scale((param * weights).sum()).backward()
    result = scaler.step(optimizer)
    scaler.update()
    return result


def _pair(device, **settings):
    init = randn(5)
    p, tp = wg.tensor(init, device=device, requires_grad=True), torch.tensor(init, requires_grad=True)
    return (p, wg.optim.SGD([p], lr=0.1), wg.amp.GradScaler(device, **settings),
            tp, torch.optim.SGD([tp], lr=0.1), torch.amp.GradScaler("cpu", **settings))


def test_grad_scaler_matches_torch_step_for_step(device):
    """Skips the steps whose gradient holds inf or NaN and halves the scale, doubles it after
    growth_interval clean steps: scale, step count and parameters as torch's at every step."""
    p, opt, scaler, tp, topt, tscaler = _pair(device, init_scale=2.0**8, growth_interval=3)
    overflows = {2: np.inf, 5: np.nan, 6: -np.inf}
    for step in range(11):
        c = randn(5)
        if step in overflows:
            c[1] = overflows[step]
        before, scale = p.detach().cpu().numpy().copy(), scaler.get_scale()
        _scaled_step(wg, scaler, p, opt, c, device)
        _scaled_step(torch, tscaler, tp, topt, c)
        assert scaler.state_dict() == tscaler.state_dict(), tag(f"step {step}")
        np.testing.assert_allclose(p.detach().cpu().numpy(), tp.detach().numpy(), rtol=1e-6, atol=1e-6,
                                   err_msg=tag(f"step {step}"))
        if step in overflows:
            np.testing.assert_array_equal(p.detach().cpu().numpy(), before)
            assert scaler.get_scale() == scale / 2
    assert scaler.get_scale() == 2.0**8 / 8 * 2 and scaler._get_growth_tracker() == 1   # 3 backoffs, 1 growth


def test_grad_scaler_state_dict_round_trip(device):
    p, opt, scaler, tp, topt, tscaler = _pair(device, init_scale=2.0**5, growth_interval=2)
    overflow = randn(5)
    overflow[3] = np.inf
    for c in (randn(5), overflow, randn(5), randn(5), randn(5)):
        _scaled_step(wg, scaler, p, opt, c, device)
    state = scaler.state_dict()
    assert state == {"scale": 2.0**5, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2,
                     "_growth_tracker": 1}
    tscaler.load_state_dict(state)   # torch reads webgrad's, and webgrad reads it back
    restored = wg.amp.GradScaler(device)
    restored.load_state_dict(tscaler.state_dict())
    assert restored.state_dict() == state
    c = randn(5)
    _scaled_step(wg, restored, p, opt, c, device)
    _scaled_step(torch, tscaler, tp, topt, c)
    assert restored.state_dict() == tscaler.state_dict() and restored.get_scale() == 2.0**6
    assert wg.amp.GradScaler(device, enabled=False).state_dict() == {}
    with pytest.raises(RuntimeError, match="state dict is empty"):
        wg.amp.GradScaler(device).load_state_dict({})


def test_grad_scaler_unscale_clip_and_misuse(device):
    p, opt, scaler, *_ = _pair(device, init_scale=2.0**10)
    c = randn(5)
    with pytest.raises(AssertionError, match="did not use scaler.scale"):
        scaler.step(opt)
    scaler.scale((p * wg.tensor(c, device=device)).sum()).backward()
    np.testing.assert_allclose(p.grad.cpu().numpy(), c * 2.0**10, rtol=1e-6, err_msg=tag("scaled grad"))
    scaler.unscale_(opt)   # as before clipping: the gradients are the true ones
    np.testing.assert_allclose(p.grad.cpu().numpy(), c, rtol=1e-6, err_msg=tag("unscaled grad"))
    wg.nn.utils.clip_grad_norm_([p], 0.5)
    with pytest.raises(RuntimeError, match="already been called on this optimizer"):
        scaler.unscale_(opt)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        scaler.step(opt)
    scaler.update(new_scale=4.0)
    assert scaler.get_scale() == 4.0
    with pytest.raises(AssertionError, match="growth factor"):
        wg.amp.GradScaler(device, growth_factor=1.0)
    half = wg.tensor(c, device=device).half().requires_grad_()
    half_opt = wg.optim.SGD([half], lr=0.1)
    scaler.scale(half.float().sum()).backward()
    with pytest.raises(ValueError, match="unscale FP16 gradients"):
        scaler.unscale_(half_opt)
    off = wg.amp.GradScaler(device, enabled=False)
    loss = (p * 2).sum()
    assert off.scale(loss) is loss and off.get_scale() == 1.0


SETTINGS = {"Adam": dict(lr=0.05), "AdamW": dict(lr=0.05, weight_decay=0.1, amsgrad=True),
            "SGD": dict(lr=0.1, momentum=0.9, dampening=0.3)}


def _amp_mlp(optimizer="AdamW"):
    """An MLP (torch's initial weights, from its seed) with an optimizer and a GradScaler that
    halves its scale at an overflow and doubles it after two clean steps."""
    torch_model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    model = wg.nn.Sequential(wg.nn.Linear(8, 16), wg.nn.ReLU(), wg.nn.Linear(16, 4)).to("webgpu")
    model.load_state_dict({k: wg.tensor(v.numpy()) for k, v in torch_model.state_dict().items()})
    opt = getattr(wg.optim, optimizer)(model.parameters(), **SETTINGS.get(optimizer, SETTINGS["AdamW"]))
    return model, opt, wg.amp.GradScaler("webgpu", init_scale=2.0**8, growth_interval=2)


def test_jitted_amp_steps_match_eager():
    """The program the GradScaler.step error asks for: autocast forward and scaled backward under
    wg.jit, scaler.step and update after the call. Losses, scales and weights are the eager run's
    bit for bit, over steps that include an overflow (an inf in the data: that step is skipped)."""
    batches = [randn(16, 8) for _ in range(7)]
    batches[3][2, 5] = np.inf
    labels = wg.tensor((batches[0] @ randn(8, 4)).argmax(1), device="webgpu")
    runs = {}
    for jitted in (False, True):
        torch.manual_seed(0)
        model, opt, scaler = _amp_mlp()

        def forward_backward(x):
            opt.zero_grad()
            with wg.autocast("webgpu"):
                loss = wg.nn.functional.cross_entropy(model(x), labels)
            scaler.scale(loss).backward()
            return loss
        run = wg.jit(forward_backward) if jitted else forward_backward
        trace = []
        for x in batches:
            loss = run(wg.tensor(x, device="webgpu"))
            scaler.step(opt)
            scaler.update()
            trace.append((loss.item(), scaler.get_scale(), [p.detach().numpy().copy() for p in model.parameters()]))
        runs[jitted] = trace
    for step, ((loss, scale, weights), (jit_loss, jit_scale, jit_weights)) in enumerate(zip(runs[False], runs[True])):
        assert (jit_loss, jit_scale) == (loss, scale) or step == 3 and np.isnan(loss) and np.isnan(jit_loss), tag(
            f"step {step}: loss {jit_loss} vs eager {loss}, scale {jit_scale} vs {scale}")
        for got, expected in zip(jit_weights, weights):
            np.testing.assert_array_equal(got, expected, err_msg=tag(f"step {step}"))
    assert [scale for _, scale, _ in runs[True]] == [2.0**8, 2.0**9, 2.0**9, 2.0**8, 2.0**8, 2.0**9, 2.0**9]
    for before, after in zip(runs[True][2][2], runs[True][3][2]):   # the overflow's step left them
        np.testing.assert_array_equal(after, before)


@pytest.mark.parametrize("name", list(SETTINGS))
def test_whole_amp_step_under_jit_matches_eager(name):
    """The natural program, autocast forward, scaled backward, scaler.step and update, all under
    wg.jit (nothing is read: the overflow check skips the step on the device): losses, scales,
    weights, optimizer state and step counts are the eager run's bit for bit, over steps that
    include an inf (in the recorded call) and a NaN (in a replay), which are skipped."""
    batches = [randn(16, 8) for _ in range(7)]
    batches[1][2, 5], batches[4][0, 1] = np.inf, np.nan
    labels = wg.tensor((batches[0] @ randn(8, 4)).argmax(1), device="webgpu")
    runs = {}
    for jitted in (False, True):
        torch.manual_seed(0)
        model, opt, scaler = _amp_mlp(name)

        def train(x):
            opt.zero_grad()
            with wg.autocast("webgpu"):
                loss = wg.nn.functional.cross_entropy(model(x), labels)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            return loss
        run = wg.jit(train) if jitted else train
        trace = []
        for x in batches:
            loss = run(wg.tensor(x, device="webgpu"))
            state = [[v.numpy().copy() for _, v in sorted(opt.state[p].items())] for p in model.parameters()]
            trace.append([loss.item(), scaler.get_scale(), [p.detach().numpy().copy() for p in model.parameters()],
                          state])
        runs[jitted] = trace
    for step, (eager, jit) in enumerate(zip(runs[False], runs[True])):
        np.testing.assert_array_equal(jit[:2], eager[:2], err_msg=tag(f"step {step}: loss and scale"))
        for got, expected in zip(jit[2] + sum(jit[3], []), eager[2] + sum(eager[3], [])):
            np.testing.assert_array_equal(got, expected, err_msg=tag(f"step {step}"))
    assert [scale for _, scale, _, _ in runs[True]] == [2.0**8, 2.0**7, 2.0**7, 2.0**8, 2.0**7, 2.0**7, 2.0**8]
    for skipped in (1, 4):   # the overflows' steps left weights and state (step counts too) as they were
        (_, _, weights, state), (_, _, kept_weights, kept_state) = runs[True][skipped - 1:skipped + 1]
        for before, after in zip(weights + sum(state, []), kept_weights + sum(kept_state, [])):
            np.testing.assert_array_equal(after, before, err_msg=tag(f"step {skipped}"))
    if name != "SGD":
        assert all(float(opt.state[p]["step"]) == 5 for p in model.parameters())


@pytest.mark.parametrize("clip", [False, True], ids=["folded", "unscale_clip"])
@pytest.mark.parametrize("name", list(SETTINGS))
def test_steps_skipped_on_the_device_match_torch(device, name, clip):
    """torch.amp.GradScaler with torch's fused optimizer on cpu, step for step: parameters, state,
    step counts and the gradients step leaves, with the first step and a later one overflowing
    (skipped: no state made, no count advanced, the gradients left scaled) and a parameter without a
    gradient at one step (it falls behind, as in torch). Either the update unscales the gradients as
    it reads them and leaves them unscaled (folded), or unscale_ does and clip_grad_norm_ reads them
    before step, as torch's do."""
    inits = [randn(5), randn(3)]
    ours = [wg.tensor(v, device=device, requires_grad=True) for v in inits]
    theirs = [torch.tensor(v, requires_grad=True) for v in inits]
    runs = [(wg, ours, getattr(wg.optim, name)(ours, **SETTINGS[name]),
             wg.amp.GradScaler(device, init_scale=2.0**8, growth_interval=2)),
            (torch, theirs, getattr(torch.optim, name)(theirs, fused=True, **SETTINGS[name]),
             torch.amp.GradScaler("cpu", init_scale=2.0**8, growth_interval=2))]
    # torch's fused SGD leaves its momentum buffer uninitialized behind a skipped first step
    overflows = {1 if name == "SGD" else 0: np.inf, 4: np.nan}
    for step in range(8):
        weights = [randn(5) * 4, randn(3) * 4]   # clipping to norm 1 changes them
        if step in overflows:
            weights[0][1] = overflows[step]
        stepping = 1 if step == 2 else 2   # at step 2 the second parameter gets no gradient
        for lib, params, opt, scaler in runs:
            opt.zero_grad()
            terms = [(p * lib.tensor(w, **({"device": device} if lib is wg else {}))).sum()
                     for p, w in zip(params[:stepping], weights)]
            scaler.scale(sum(terms[1:], terms[0])).backward()
            if clip:
                scaler.unscale_(opt)
                lib.nn.utils.clip_grad_norm_(params[:stepping], 1.0)
            scaler.step(opt)
            scaler.update()
        opt, topt = runs[0][2], runs[1][2]
        assert runs[0][3].state_dict() == runs[1][3].state_dict(), tag(f"step {step}")
        for k, (p, tp) in enumerate(zip(ours, theirs)):
            np.testing.assert_allclose(p.detach().cpu().numpy(), tp.detach().numpy(), rtol=1e-5, atol=1e-5,
                                       err_msg=tag(f"step {step}, parameter {k}"))
            assert (p.grad is None) == (tp.grad is None), tag(f"step {step}, parameter {k}")
            if tp.grad is not None:   # overflowed: NaN where torch's are (equal_nan)
                np.testing.assert_allclose(p.grad.cpu().numpy(), tp.grad.numpy(), rtol=1e-6, atol=1e-7,
                                           err_msg=tag(f"step {step}, parameter {k}: gradient after step"))
            theirs_state = topt.state.get(tp, {})
            for key, value in theirs_state.items():   # torch's fused kernel rounds in an order of its own
                got = opt.state[p][key]
                np.testing.assert_allclose(got.cpu().numpy(), value.numpy(), rtol=5e-5, atol=1e-6,
                                           err_msg=tag(f"step {step}, parameter {k}, {key}"))
            if not theirs_state and "step" in opt.state.get(p, {}):   # torch skipped every step so far
                assert float(opt.state[p]["step"]) == 0, tag(f"step {step}")


def test_optimizer_with_its_own_step_is_read_and_refused_inside_jit():
    """An optimizer whose step is its own cannot skip it on the device: GradScaler reads the
    overflow check for it, as eager code may, and inside a recording says what to write instead."""
    class Logged(wg.optim.SGD):
        def step(self, closure=None):
            self.steps = getattr(self, "steps", 0) + 1
            return super().step(closure)
    model, _, scaler = _amp_mlp()
    opt = Logged(model.parameters(), lr=0.1)
    assert not opt._step_supports_amp_scaling and wg.optim.AdamW([wg.zeros(1)])._step_supports_amp_scaling
    x = wg.tensor(randn(4, 8), device="webgpu")

    @wg.jit
    def whole_step(x):
        opt.zero_grad()
        with wg.autocast("webgpu"):
            loss = model(x).sum()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss
    whole_step(x)   # the eager warm-up call reads
    assert opt.steps == 1
    with pytest.raises(RuntimeError, match=r"GradScaler.step\(optimizer\) reads .* jit the forward and "
                                           r"scaler.scale\(loss\).backward\(\)"):
        whole_step(x)


def test_loaded_step_count_reaches_replayed_amp_steps():
    """A state dict loaded between replays of the whole AMP step writes its step count into the
    device's gate: the next replays' bias corrections count on from it, as torch's Adam does; and
    torch loads the state dict that the gated steps leave (their step counts are tensors)."""
    init = randn(6)
    p, tp = wg.tensor(init, device="webgpu", requires_grad=True), torch.tensor(init, requires_grad=True)
    opt, topt = wg.optim.Adam([p], lr=0.05), torch.optim.Adam([tp], lr=0.05)
    scaler, tscaler = wg.amp.GradScaler("webgpu", init_scale=4.0), torch.amp.GradScaler("cpu", init_scale=4.0)

    @wg.jit
    def step(c):
        opt.zero_grad()
        scaler.scale((p * c).sum()).backward()
        scaler.step(opt)
        scaler.update()
        return c.sum()
    for _ in range(3):   # eager, recorded, replayed
        step(wg.tensor(randn(6), device="webgpu"))
    assert float(opt.state_dict()["state"][0]["step"]) == 3
    state = {"step": 10.0, "exp_avg": randn(6), "exp_avg_sq": randn(6) ** 2}
    with torch.no_grad():
        tp.copy_(torch.tensor(p.detach().numpy()))
    topt.load_state_dict({"state": {0: {k: torch.tensor(v) for k, v in state.items()}},
                          "param_groups": topt.state_dict()["param_groups"]})
    opt.load_state_dict({"state": {0: {k: wg.tensor(v, device="webgpu") for k, v in state.items()}},
                         "param_groups": opt.state_dict()["param_groups"]})
    before = tp.detach().numpy().copy()
    for _ in range(3):
        c = randn(6)
        step(wg.tensor(c, device="webgpu"))
        topt.zero_grad()
        tscaler.scale((tp * torch.tensor(c)).sum()).backward()
        tscaler.step(topt)
        tscaler.update()
    # The loaded moments are random, so m / sqrt(v) can be large (seed 1062769950: steps of ~0.3 at lr
    # 0.05): float32's rounding follows how far the weights moved, not their size.
    moved = np.abs(tp.detach().numpy() - before).max()
    np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=1e-5, atol=1e-6 + 2e-5 * moved,
                               err_msg=tag("weights"))
    saved = opt.state_dict()["state"][0]
    again = torch.tensor(p.detach().numpy(), requires_grad=True)
    topt_again = torch.optim.Adam([again], lr=0.05)
    topt_again.load_state_dict({"state": {0: {k: torch.from_numpy(v.numpy().copy()) for k, v in saved.items()}},
                                "param_groups": topt_again.state_dict()["param_groups"]})
    assert float(topt_again.state[again]["step"]) == float(topt.state[tp]["step"]) == 13
    np.testing.assert_allclose(topt_again.state[again]["exp_avg_sq"].numpy(), topt.state[tp]["exp_avg_sq"].numpy(),
                               rtol=1e-5, atol=1e-7, err_msg=tag("exp_avg_sq"))


def test_mlp_trains_as_in_float32(device):
    """autocast + GradScaler with float32 master weights follows float32 training's losses."""
    x = randn(32, 8)
    labels = (x @ randn(8, 4)).argmax(1)   # a rule the network can learn
    torch_model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    model = wg.nn.Sequential(wg.nn.Linear(8, 16), wg.nn.ReLU(), wg.nn.Linear(16, 4)).to(device)
    model.load_state_dict({k: wg.tensor(v.numpy()) for k, v in torch_model.state_dict().items()})
    torch_opt, opt = torch.optim.SGD(torch_model.parameters(), lr=0.5), wg.optim.SGD(model.parameters(), lr=0.5)
    scaler = wg.amp.GradScaler(device, init_scale=2.0**10)
    tx, ty = torch.tensor(x), torch.tensor(labels)
    wx, wy = wg.tensor(x, device=device), wg.tensor(labels, device=device)
    kind = {"cpu": {"dtype": wg.float16}, "webgpu": {}}[device]
    losses, expected = [], []
    for _ in range(25):
        torch_opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(torch_model(tx), ty)
        loss.backward()
        torch_opt.step()
        expected.append(loss.item())
        opt.zero_grad()
        with wg.autocast(device, **kind):
            logits = model(wx)
            loss = wg.nn.functional.cross_entropy(logits, wy)
        assert logits.dtype is wg.float16 and loss.dtype is wg.float32
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        losses.append(loss.item())
    assert all(p.dtype is wg.float32 and p.grad.dtype is wg.float32 for p in model.parameters())
    assert scaler.get_scale() == 2.0**10, "no step was skipped"
    np.testing.assert_allclose(losses, expected, rtol=2e-2, atol=5e-3, err_msg=tag("losses"))
    assert expected[-1] < 0.7 * expected[0], tag(f"float32 training learns: {expected[0]} -> {expected[-1]}")


def test_scaler_adds_a_few_dispatches_whatever_the_parameter_count():
    """A replayed step with scaler.scale(loss).backward(), scaler.step and update holds a few
    dispatches more than the float32 one (the overflow check, the gate, update()'s rule), the same few
    for 4 parameters and for 12: the update unscales each gradient as it reads it."""
    def added(layers):
        counts = []
        for scaled in (False, True):
            model = wg.nn.Sequential(*[wg.nn.Linear(6, 6) for _ in range(layers)]).to("webgpu")
            opt, scaler = wg.optim.Adam(model.parameters(), lr=0.01), wg.amp.GradScaler("webgpu")

            @wg.jit
            def step(x):
                opt.zero_grad()
                loss = model(x).square().mean()
                if scaled:
                    scaler.scale(loss).backward()
                    scaler.step(opt)
                    scaler.update()
                else:
                    loss.backward()
                    opt.step()
                return loss
            for _ in range(3):   # eager, recorded, replayed
                step(wg.tensor(randn(4, 6), device="webgpu"))
            counts.append(len(next(iter(step._programs.values())).recording.dispatches))
        return counts[1] - counts[0]
    few = added(2)
    assert few == added(6) and few <= 8, tag(f"the scaler adds {few} dispatches to 4 parameters' step")


def test_a_gradient_two_parameters_share_is_unscaled_once(device):
    """Two parameters holding one gradient tensor: step unscales it once, in place, then steps both
    (the update, which writes each gradient back unscaled, would unscale it twice)."""
    init, c = randn(2, 4), randn(4)
    a, b = (wg.tensor(v, device=device, requires_grad=True) for v in init)
    opt, scaler = wg.optim.SGD([a, b], lr=0.5), wg.amp.GradScaler(device, init_scale=2.0**6)
    scaler.scale(wg.zeros((), device=device))
    a.grad = b.grad = wg.tensor(c * 2.0**6, device=device)
    scaler.step(opt)
    np.testing.assert_array_equal(a.grad.cpu().numpy(), c, err_msg=tag("gradient"))
    for p, v in zip((a, b), init):
        np.testing.assert_allclose(p.detach().cpu().numpy(), v - np.float32(0.5) * c, rtol=1e-6, err_msg=tag("step"))
