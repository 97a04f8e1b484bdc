"""GradScaler against torch.amp.GradScaler("cpu") step for step (scale, clean-step count,
parameters, state_dict), its misuse errors as torch's, and autocast + GradScaler training against
float32 torch training."""
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
