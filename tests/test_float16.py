"""float16 tensors on both devices against PyTorch's CPU half results (the oracle), matmul's f32
accumulation against float32 products, gradients, save/load through torch, and the refusal where
the webgpu device lacks shader-f16."""
import numpy as np
import pytest
import torch
from conftest import randn, tag
from runtime_fakes import FakeDriver

import webgrad as wg
from webgrad.backends.webgpu.backend import WebGPUBackend

# float16 has an 11-bit significand: one rounding is 2^-11 relative; a few roundings apart is close
HALF_RTOL, HALF_ATOL = 4e-3, 4e-3


def half(a, device, requires_grad=False):
    return wg.tensor(a, device=device).half().requires_grad_(requires_grad)


def assert_half_close(actual, expected, what, rtol=HALF_RTOL, atol=HALF_ATOL):
    assert actual.dtype is wg.float16, tag(f"{what}: dtype {actual.dtype}")
    got = actual.detach().float().cpu().numpy()
    np.testing.assert_allclose(got, expected.detach().float().numpy(), rtol=rtol, atol=atol, err_msg=tag(what))


def test_creation_host_reads_and_printing(device):
    values = [1.5, -2.25, 70000.0, -1e9, 3.14159, 1e-6]   # past float16's range: inf, as torch rounds
    x = wg.tensor(values, dtype=wg.float16, device=device)
    expected = torch.tensor(values, dtype=torch.float16)
    assert x.tolist() == expected.tolist()
    assert x[4].item() == expected[4].item()
    assert x.numpy().dtype == np.float16 and x.element_size() == 2
    np.testing.assert_array_equal(x.numpy(), expected.numpy())
    assert "dtype=webgrad.float16" in repr(x)
    a = randn(3, 5).astype(np.float16)
    assert wg.tensor(a, device=device).dtype is wg.float16   # a NumPy float16 array stays float16
    np.testing.assert_array_equal(wg.tensor(a, device=device).numpy(), a)
    odd = wg.tensor(a[0, :3], device=device)   # 3 elements: 6 bytes in a 4-byte-padded buffer
    np.testing.assert_array_equal(odd[1:].numpy(), a[0, 1:3])


def test_casts_and_promotion(device):
    a = randn(4, 6) * 10
    x = half(a, device)
    assert_half_close(x, torch.tensor(a).half(), "half()")
    np.testing.assert_array_equal(x.float().numpy(), torch.tensor(a).half().float().numpy())
    np.testing.assert_array_equal(x.to(wg.int32).numpy(), torch.tensor(a).half().int().numpy())
    np.testing.assert_array_equal(x.to("float32").numpy(), torch.tensor(a).half().float().numpy())
    assert (x + wg.tensor(a, device=device)).dtype is wg.float32
    assert (x + 1.5).dtype is wg.float16 and (2 * x).dtype is wg.float16
    assert (wg.tensor([1, 2], device=device) + wg.tensor([0.5, 1.5], device=device).half()).dtype is wg.float16
    assert wg.zeros(3, dtype=wg.half, device=device).dtype is wg.float16
    r = wg.randn(4, 8, dtype=wg.float16, device=device)
    assert r.dtype is wg.float16 and 0.2 < float(r.float().std()) < 3


@pytest.mark.parametrize("name", ["add", "mul", "div", "exp", "tanh", "sigmoid", "gelu", "pow", "maximum"])
def test_elementwise_against_torch_half(device, name):
    a, b = randn(5, 7), randn(5, 7)
    fns = {"add": lambda m, x, y: x + y, "mul": lambda m, x, y: x * y, "div": lambda m, x, y: x / (y.abs() + 1),
           "exp": lambda m, x, y: x.exp(), "tanh": lambda m, x, y: x.tanh(), "sigmoid": lambda m, x, y: x.sigmoid(),
           "gelu": lambda m, x, y: m.nn.functional.gelu(x), "pow": lambda m, x, y: x.abs() ** 1.5,
           "maximum": lambda m, x, y: m.maximum(x, y)}
    got = fns[name](wg, half(a, device), half(b, device))
    assert_half_close(got, fns[name](torch, torch.tensor(a).half(), torch.tensor(b).half()), name)


def test_reductions_softmax_and_norms(device):
    a = randn(6, 33)
    x, t = half(a, device), torch.tensor(a).half()
    assert_half_close(x.sum(1), t.sum(1), "sum")
    assert_half_close(x.mean(), t.mean(), "mean")
    assert_half_close(x.amax(0), t.amax(0), "amax")
    np.testing.assert_array_equal(x.argmax(1).numpy(), t.argmax(1).numpy())
    assert_half_close(wg.nn.functional.softmax(x, 1), torch.softmax(t, 1), "softmax")
    assert_half_close(wg.nn.functional.log_softmax(x, 1), torch.log_softmax(t, 1), "log_softmax", rtol=1e-2, atol=1e-2)
    assert_half_close(wg.nn.functional.layer_norm(x, (33,)), torch.nn.functional.layer_norm(t, (33,)), "layer_norm",
                      rtol=1e-2, atol=1e-2)
    labels = np.arange(6) % 33
    loss = wg.nn.functional.cross_entropy(x, wg.tensor(labels, device=device))
    assert_half_close(loss, torch.nn.functional.cross_entropy(t.float(), torch.tensor(labels)), "cross_entropy")
    assert_half_close(x.cumsum(1), t.float().cumsum(1), "cumsum", rtol=1e-2, atol=1e-2)
    values, indices = x.sort(1)
    assert_half_close(values, t.sort(1).values, "sort")


def test_matmul_accumulates_in_float32(device):
    """K = 512 of operands near 1: f16 accumulation would be off by ~0.1 (running sums near 100 have
    a spacing of 1/16); f32 accumulation leaves the result's own rounding, 2^-11 relative."""
    k = 512
    a, b = np.abs(randn(8, k)) + 0.5, np.abs(randn(k, 16)) + 0.5
    x, y = half(a, device), half(b, device)
    exact = torch.tensor(a).half().float() @ torch.tensor(b).half().float()   # f16 inputs, f32 sums
    product = x @ y
    assert product.dtype is wg.float16
    error = np.abs(product.float().numpy() - exact.numpy()) / exact.numpy()
    assert error.max() < 2 ** -10, tag(f"relative error {error.max()}")
    linear = wg.nn.functional.linear(x, y.mT[:4], half(b[0, :4], device))   # with a bias in the store
    assert_half_close(linear, torch.nn.functional.linear(torch.tensor(a).half().float(),
                                                         torch.tensor(b).half().float().mT[:4],
                                                         torch.tensor(b[0, :4]).half().float()), "linear", rtol=2e-3)


def test_gradients_are_float16(device):
    a, w, c = randn(4, 3, 6, 6), randn(5, 3, 3, 3) * 0.3, randn(4, 10)
    x, weight, v = half(a, device, True), half(w, device, True), half(c, device, True)
    tx, tw, tv = (torch.tensor(z).half().float().requires_grad_() for z in (a, w, c))
    y = wg.nn.functional.conv2d(x, weight, padding=1, stride=2)
    loss = (y.relu().sum() + (v @ v.mT).tanh().sum()).float()
    loss.backward()
    ty = torch.nn.functional.conv2d(tx, tw, padding=1, stride=2)
    (ty.relu().sum() + (tv @ tv.mT).tanh().sum()).backward()
    assert y.dtype is wg.float16
    for got, expected, what in ((x.grad, tx.grad, "conv input"), (weight.grad, tw.grad, "conv weight"),
                                (v.grad, tv.grad, "matmul")):
        assert_half_close(got, expected, f"{what} grad", rtol=1e-2, atol=2e-2)


@pytest.mark.parametrize("name, settings", [("SGD", {"momentum": 0.9, "weight_decay": 0.01}), ("Adam", {}),
                                            ("AdamW", {"weight_decay": 0.1})])
def test_optimizers_and_clipping_update_float16_parameters(device, name, settings):
    """float16 parameters and state, updated in float32 and rounded as stored (torch's fused kernels'
    way; the oracle is torch's update in float32 of the same values, rounded to float16 each step)."""
    start, grads = randn(5, 7), [randn(5, 7) * 3 for _ in range(3)]
    p = half(start, device, True)
    tp = torch.tensor(start).half().float().requires_grad_()
    opt = getattr(wg.optim, name)([p], lr=0.01, **settings)
    topt = getattr(torch.optim, name)([tp], lr=0.01, **settings)
    for g in grads:
        p.grad = half(g, device)
        tp.grad = torch.tensor(g).half().float()
        norm = wg.nn.utils.clip_grad_norm_([p], 4.0)
        tnorm = torch.nn.utils.clip_grad_norm_([tp], 4.0)
        assert_half_close(norm, tnorm, f"{name}: total norm")
        assert_half_close(p.grad, tp.grad, f"{name}: clipped gradient")
        opt.step()
        topt.step()
        with torch.no_grad():
            tp.copy_(tp.half().float())
    assert_half_close(p, tp, f"{name}: parameters", rtol=2e-3, atol=1e-3)


@pytest.mark.parametrize("suffix", [".safetensors", ".pt"])
def test_save_load_round_trip_through_torch(tmp_path, device, suffix):
    from safetensors.torch import load_file, save_file
    torch_load, torch_save = (load_file, save_file) if suffix == ".safetensors" else (torch.load, torch.save)
    model = wg.nn.Linear(6, 3).to(device)
    state = {k: v.half() for k, v in model.state_dict().items()}
    path = str(tmp_path / f"half{suffix}")
    wg.save(state, path)
    loaded = torch_load(path)
    for k, v in state.items():
        assert loaded[k].dtype is torch.float16
        np.testing.assert_array_equal(loaded[k].numpy(), v.numpy())
    back = {k: torch.tensor(randn(*v.shape)).half() for k, v in loaded.items()}
    back["specials"] = torch.tensor([np.inf, -np.inf, -0.0, 6e-8, 65504.0], dtype=torch.float16)
    torch_save(back, path)
    for k, v in wg.load(path, map_location=device).items():
        assert v.dtype is wg.float16 and v.device.type == device
        assert v.numpy().tobytes() == back[k].numpy().tobytes(), tag(k)


def test_jit_replays_float16_steps_as_eager(device):
    """Under wg.jit float16 maps stay unfused (each rounds its result to f16, as eager does) and a
    float16 product takes no epilogue: replays give eager's values exactly."""
    a, b = randn(8, 16), randn(16, 8)
    x, y = half(a, device), half(b, device)

    def step(x, y):
        z = (x @ y).relu() * 1.5 + 0.25
        return (z.exp() * 0.01 + x[:, :8].float()).sum(1)
    eager = step(x, y).numpy()
    replayed = wg.jit(step)
    for _ in range(3):   # eager, recorded, replayed
        out = replayed(x, y)
    np.testing.assert_array_equal(out.numpy(), eager)


@pytest.mark.parametrize("granted", [(), ("shader-f16",)])
def test_browser_driver_asks_for_shader_f16(browser_driver, granted):
    from runtime_fakes import FakeBridge
    fake = FakeDriver()
    fake.features = frozenset(granted + ("timestamp-query",))   # the profiler's, asked for too
    driver = browser_driver(FakeBridge(fake))
    assert driver.features == frozenset(granted + ("timestamp-query",))


def test_refused_where_the_adapter_lacks_shader_f16():
    backend = WebGPUBackend(FakeDriver())   # SwiftShader's way: no shader-f16
    with pytest.raises(TypeError, match="adapter 'fake' lacks the WebGPU feature shader-f16; use float32"):
        backend.upload(np.ones(4, np.float16).tobytes(), wg.float16)
    with pytest.raises(TypeError, match="shader-f16"):
        backend.empty(3, wg.float16)


def test_float32_kernels_do_not_enable_f16():
    """An adapter without shader-f16 refuses every kernel that enables it: only kernels with f16
    buffers may (a comment that names f16 must not)."""
    driver = FakeDriver()
    sources = []
    create = driver.create_pipeline
    driver.create_pipeline = lambda label, wgsl, *rest: (sources.append(wgsl), create(label, wgsl, *rest))[1]
    backend = WebGPUBackend(driver)
    n = 72   # a product past the small kernel's size: the tiled one (shaders/matmul.wgsl)
    x = wg.backends.base.flat(backend.upload(np.ones(n * n, np.float32).tobytes(), wg.float32), (n, n), wg.float32)
    backend.matmul(x, x)
    backend.reduce(wg.backends.base.SUM, x, (1,), wg.float32)
    backend.map(wg.backends.base.MUL, (x, x), (n, n), wg.float32, wg.float32)
    assert len(sources) >= 3 and not any("enable f16" in source for source in sources)
