"""Shared fixtures and oracles for webgrad's tests.

Every test gets a fresh random seed (from os.urandom, or WEBGRAD_TEST_SEED to replay one); the
seed is printed with any failure and is part of every assertion message below, so a failing
random case can be reproduced with `WEBGRAD_TEST_SEED=<seed> pytest -k <test id>`.

The op oracles:
    check_op(fn, *inputs, device=...)    runs fn on webgrad tensors (the given device, and cpu as
                                         the reference for webgpu) and on torch tensors; compares
                                         outputs and gradients, and (on cpu) finite differences
    finite_difference_check(fn, *inputs) float64 central differences on the cpu device
Inputs are NumPy arrays; floating ones get requires_grad, integer/bool ones are indices/masks.
"""
import importlib
import importlib.util
import math
import os
import sys
import types

import numpy as np
import pytest

try:
    import webgrad  # noqa: F401
except ImportError:  # running without PYTHONPATH=py / an installed package
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))

import webgrad as wg
from webgrad.backends.webgpu.runtime import Runtime

import runtime_fakes

DEVICES = ("cpu", "webgpu")
# Tests choose their matmul tiles (or the prior table's); a GPU's tuner would replace them with its own.
os.environ.setdefault("WEBGRAD_MATMUL_TUNING", "0")
ATOL = RTOL = 1e-4          # float32 results against torch / cpu
FD_ATOL, FD_RTOL = 1e-6, 1e-5  # float64 analytic vs central-difference gradients


# ---- the per-test seed ----
class _Seed:
    value = None
    rng = None


def _draw_seed():
    env = os.environ.get("WEBGRAD_TEST_SEED")
    return int(env) if env else int.from_bytes(os.urandom(4), "little")


@pytest.fixture(autouse=True)
def _fresh_seed(request):
    _Seed.value = _draw_seed()
    _Seed.rng = np.random.default_rng(_Seed.value)
    request.node.user_properties.append(("webgrad_seed", _Seed.value))
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        seed = dict(item.user_properties).get("webgrad_seed")
        if seed is not None:
            report.sections.append(("webgrad seed", f"WEBGRAD_TEST_SEED={seed} reproduces {item.nodeid}"))


def seed():
    """This test's seed (also usable for wg.manual_seed)."""
    return _Seed.value


def rng():
    """This test's NumPy generator."""
    if _Seed.rng is None:  # called outside a test (e.g. at import): still fresh and reported
        _Seed.value = _draw_seed()
        _Seed.rng = np.random.default_rng(_Seed.value)
    return _Seed.rng


def tag(what=""):
    """Context for an assertion message: what failed and the seed that reproduces it."""
    return f"{what} [WEBGRAD_TEST_SEED={_Seed.value}]"


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


# ---- random inputs ----
def randn(*shape, dtype=np.float32):
    return np.asarray(rng().standard_normal(shape), dtype=dtype)


def uniform(*shape, low=-1.0, high=1.0, dtype=np.float32):
    return np.asarray(rng().uniform(low, high, shape), dtype=dtype)


def nonzero(*shape, margin=0.1, dtype=np.float32):
    """Normal values pushed at least `margin` away from 0 (for abs, relu, division, ...)."""
    x = rng().standard_normal(shape)
    return np.asarray(np.sign(x + (x == 0)) * (np.abs(x) + margin), dtype=dtype)


def positive(*shape, low=0.2, high=3.0, dtype=np.float32):
    return np.asarray(rng().uniform(low, high, shape), dtype=dtype)


def distinct(*shape, dtype=np.float32):
    """Values with no ties anywhere and gaps >= 0.05 (for max/min/argmax gradients)."""
    n = math.prod(shape)
    return ((rng().permutation(n) - n / 2) * 0.05 + rng().uniform(0, 0.01, n)).reshape(shape).astype(dtype)


def integers(*shape, low=0, high=10):
    return np.asarray(rng().integers(low, high, shape), dtype=np.int32)


def random_shape(min_ndim=1, max_ndim=4, max_size=7):
    ndim = int(rng().integers(min_ndim, max_ndim + 1))
    return tuple(int(s) for s in rng().integers(1, max_size + 1, ndim))


def broadcast_partner(shape):
    """A random shape that broadcasts with `shape`: some leading dims dropped, some dims set to 1."""
    drop = int(rng().integers(0, len(shape) + 1))
    return tuple(1 if rng().random() < 0.4 else s for s in shape[drop:])


def resolve_shape(spec):
    """A parametrized shape, or 'random' for a fresh one drawn from this test's seed."""
    return random_shape() if spec == "random" else spec


def resolve_pair(spec):
    if spec == "random":
        a = random_shape()
        b = broadcast_partner(a)
        return (a, b) if rng().random() < 0.5 else (b, a)
    return spec


# Shapes that exercise 0-d, size-1 dims and sizes that are not multiples of a workgroup.
UNARY_SHAPES = [(), (1,), (257,), (1000,), (3, 5, 7), (2, 1, 4), "random"]
BINARY_SHAPES = [((257,), (257,)), ((1000,), ()), ((3, 5, 7), (5, 1)), ((3, 1, 7), (1, 5, 1)),
                 ((), (4, 3)), ((2, 1, 3, 1), (4, 1, 5)), "random", "random"]


# ---- conversions ----
def wg_tensor(a, device, requires_grad=False, dtype=None):
    a = np.asarray(a)
    if dtype is None and a.dtype == np.float64:
        dtype = wg.float64
    t = wg.tensor(a, device=device, dtype=dtype)
    return t.requires_grad_() if requires_grad else t


def torch_tensor(a, requires_grad=False):
    import torch
    a = np.asarray(a)
    if a.dtype.kind in "iu" and a.dtype != np.uint8:
        a = a.astype(np.int64)  # torch's index type
    t = torch.from_numpy(a.copy())
    return t.requires_grad_() if requires_grad else t


def to_numpy(t):
    """A webgrad or torch tensor (or a number) as a NumPy array."""
    if hasattr(t, "detach"):
        t = t.detach()
    if hasattr(t, "cpu") and not isinstance(t, wg.Tensor):
        t = t.cpu()
    return np.asarray(t.numpy() if hasattr(t, "numpy") else t)


def _kind(t):
    if isinstance(t, wg.Tensor):
        return "f" if t.dtype.is_floating_point else ("b" if t.dtype is wg.bool else "i")
    if t.dtype.is_floating_point:
        return "f"
    return "b" if str(t.dtype) == "torch.bool" else "i"


def assert_close(actual, expected, atol=ATOL, rtol=RTOL, what=""):
    actual, expected = to_numpy(actual), to_numpy(expected)
    assert actual.shape == expected.shape, tag(f"{what}: shape {actual.shape} != expected {expected.shape}")
    if expected.dtype.kind in "biu" and actual.dtype.kind in "biu":
        np.testing.assert_array_equal(actual, expected, err_msg=tag(what))
    else:
        np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64), atol=atol, rtol=rtol,
                                   err_msg=tag(what))


def _outputs(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _grad_positions(inputs, grad):
    floating = [i for i, a in enumerate(inputs) if isinstance(a, np.ndarray) and a.dtype.kind == "f"]
    if grad is True:
        return floating
    if not grad:
        return []
    return [i for i in grad if i in floating]


def _run(fn, make, inputs, positions, upstream):
    """fn on converted inputs; returns (outputs, grads by position) with grads from sum(out * upstream)."""
    args = [make(a, i in positions) if isinstance(a, np.ndarray) else a for i, a in enumerate(inputs)]
    outs = _outputs(fn(*args))
    grads = {}
    if positions:
        total = None
        for o, g in zip(outs, upstream):
            if g is None:
                continue
            term = (o * make(g.astype(_np_float(o)), False)).sum()
            total = term if total is None else total + term
        if total is not None:
            total.backward()
        grads = {i: args[i].grad for i in positions}
    return outs, grads


def _np_float(t):
    return np.float64 if "64" in str(t.dtype) else np.float32


def check_op(fn, *inputs, device="cpu", torch_fn=None, np_fn=None, grad=True, atol=ATOL, rtol=RTOL,
             fd=True, fd_points=16):
    """Run fn(*tensors) on webgrad (device, plus cpu as a reference when device is webgpu) and on torch
    (torch_fn, default fn) with the same inputs; compare outputs, their dtype kinds and the gradients
    of sum(out * random upstream) with respect to every floating input (or the positions in `grad`).
    np_fn, when given, is a NumPy forward oracle. On cpu also checks the gradients against float64
    finite differences (unless fd=False). Returns the webgrad outputs on `device` as NumPy arrays."""
    inputs = [np.asarray(a) if isinstance(a, np.generic) else a for a in inputs]
    positions = _grad_positions(inputs, grad)
    import torch
    t_fn = torch_fn or fn
    t_args = [torch_tensor(a, i in positions) if isinstance(a, np.ndarray) else a for i, a in enumerate(inputs)]
    torch_outs = _outputs(t_fn(*t_args))
    upstream = [randn(*o.shape) if o.dtype.is_floating_point and o.requires_grad else None for o in torch_outs]
    if positions and any(g is not None for g in upstream):
        total = sum((o * torch.from_numpy(g)).sum() for o, g in zip(torch_outs, upstream) if g is not None)
        total.backward()
    torch_grads = {i: t_args[i].grad for i in positions}
    np_outs = _outputs(np_fn(*inputs)) if np_fn else None

    results = {}
    for dev in dict.fromkeys(("cpu", device)):
        outs, grads = _run(fn, lambda a, rg, dev=dev: wg_tensor(a, dev, rg), inputs, positions, upstream)
        assert len(outs) == len(torch_outs), tag(f"{dev}: {len(outs)} outputs, torch gives {len(torch_outs)}")
        for k, (o, t) in enumerate(zip(outs, torch_outs)):
            assert isinstance(o, wg.Tensor), tag(f"{dev}: output {k} is {type(o).__name__}, not a Tensor")
            assert o.device == dev, tag(f"output {k} is on {o.device}, expected {dev}")
            assert _kind(o) == _kind(t), tag(f"{dev}: output {k} dtype {o.dtype} vs torch {t.dtype}")
            assert tuple(o.shape) == tuple(t.shape), tag(f"{dev}: output {k} shape {tuple(o.shape)} vs torch "
                                                         f"{tuple(t.shape)}")
            assert_close(o, t, atol, rtol, f"{dev}: output {k} vs torch")
            if np_outs is not None:
                assert_close(o, np_outs[k], atol, rtol, f"{dev}: output {k} vs numpy")
            if o.dtype.is_floating_point is False:
                assert not o.requires_grad, tag(f"{dev}: non-float output {k} requires grad")
        for i in positions:
            g, tg = grads[i], torch_grads[i]
            if tg is None:
                assert g is None or not np.any(to_numpy(g)), tag(f"{dev}: input {i} has a gradient, torch has none")
                continue
            assert g is not None, tag(f"{dev}: input {i} got no gradient")
            assert g.device == dev and tuple(g.shape) == inputs[i].shape, tag(
                f"{dev}: grad {i} is {tuple(g.shape)} on {g.device}")
            assert_close(g, tg, atol, rtol, f"{dev}: gradient of input {i} vs torch")
        results[dev] = ([to_numpy(o) for o in outs], {i: to_numpy(g) if g is not None else None
                                                      for i, g in grads.items()})
    if device != "cpu":
        (cpu_outs, cpu_grads), (dev_outs, dev_grads) = results["cpu"], results[device]
        for k, (a, b) in enumerate(zip(dev_outs, cpu_outs)):
            assert_close(a, b, atol, rtol, f"{device} vs cpu: output {k}")
        for i in positions:
            if cpu_grads[i] is not None and dev_grads[i] is not None:
                assert_close(dev_grads[i], cpu_grads[i], atol, rtol, f"{device} vs cpu: gradient of input {i}")
    elif fd and positions:
        finite_difference_check(fn, *inputs, grad=grad, points=fd_points)
    return results[device][0]


def finite_difference_check(fn, *inputs, grad=True, eps=1e-5, atol=FD_ATOL, rtol=FD_RTOL, points=16):
    """Gradients of sum(fn(*inputs) * upstream) on the cpu device in float64 against central
    differences, at up to `points` randomly chosen coordinates of each floating input."""
    inputs = [np.asarray(a) if isinstance(a, np.generic) else a for a in inputs]
    inputs = [a.astype(np.float64) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a for a in inputs]
    positions = _grad_positions(inputs, grad)

    def make(a, rg):
        return wg_tensor(a, "cpu", rg)

    def scalar(values):
        with wg.no_grad():
            outs = _outputs(fn(*[make(a, False) if isinstance(a, np.ndarray) else a for a in values]))
        return sum(float(np.sum(to_numpy(o).astype(np.float64) * g)) for o, g in zip(outs, upstream) if g is not None)

    with wg.no_grad():
        probe = _outputs(fn(*[make(a, False) if isinstance(a, np.ndarray) else a for a in inputs]))
    upstream = [randn(*o.shape, dtype=np.float64) if o.dtype.is_floating_point else None for o in probe]
    _, grads = _run(fn, make, inputs, positions, upstream)
    for i in positions:
        x = inputs[i]
        analytic = np.zeros(x.shape) if grads[i] is None else to_numpy(grads[i])
        assert analytic.dtype == np.float64, tag(f"float64 input {i} got a {analytic.dtype} gradient")
        flat = list(range(x.size)) if x.size <= points else rng().choice(x.size, points, replace=False)
        for j in flat:
            index = np.unravel_index(j, x.shape)
            plus, minus = x.copy(), x.copy()
            plus[index] += eps
            minus[index] -= eps
            hi = scalar([plus if k == i else a for k, a in enumerate(inputs)])
            lo = scalar([minus if k == i else a for k, a in enumerate(inputs)])
            numeric = (hi - lo) / (2 * eps)
            assert abs(analytic[index] - numeric) <= atol + rtol * abs(numeric), tag(
                f"finite differences: d/d input{i}{[int(v) for v in index]} analytic {float(analytic[index])!r} "
                f"vs numeric {numeric!r}")


def dispatched_kernels(monkeypatch):
    """A list that gets the pipeline of each kernel the webgpu runtime queues from now on (for the
    rest of the test)."""
    runtime = wg.get_backend("webgpu").runtime
    kernels, dispatch = [], runtime.dispatch

    def counted(pipeline, *args, **kwargs):
        kernels.append(pipeline)
        return dispatch(pipeline, *args, **kwargs)
    monkeypatch.setattr(runtime, "dispatch", counted)
    return kernels


def cross_entropy_step(model, opt, calls):
    """A training step step(x, y) of model under opt with cross_entropy's loss, which appends to calls
    each time its Python runs (a wg.jit replay runs none)."""
    def step(x, y):
        calls.append(1)
        opt.zero_grad()
        loss = wg.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


# ---- the page's own Python (web/*.py), natively ----
@pytest.fixture
def page_module(monkeypatch):
    """load(name): web/<name>.py imported as the page's worker imports it (web/ on the path), with a
    stand-in for Pyodide's to_js that hands back the value itself (a frame stays an array)."""
    ffi = types.ModuleType("pyodide.ffi")
    ffi.to_js = lambda value: value
    pyodide = types.ModuleType("pyodide")
    pyodide.ffi = ffi
    monkeypatch.setitem(sys.modules, "pyodide", pyodide)
    monkeypatch.setitem(sys.modules, "pyodide.ffi", ffi)
    web = os.path.join(os.path.dirname(__file__), "..", "web")
    monkeypatch.syspath_prepend(web)

    def load(name):
        spec = importlib.util.spec_from_file_location(f"webgrad_page_{name}", os.path.join(web, f"{name}.py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    return load


# ---- runtimes over stand-in drivers (tests/runtime_fakes.py) ----
@pytest.fixture
def browser_driver(monkeypatch):
    """browser.py's BrowserDriver class, imported with stand-ins for Pyodide and the page's bridge
    module; bridge(fake_bridge) sets the bridge it talks to."""
    ffi = types.ModuleType("pyodide.ffi")
    ffi.JsException = type("JsException", (Exception,), {})
    ffi.run_sync = lambda value: value.settle() if isinstance(value, runtime_fakes._FakePromise) else value
    ffi.to_js = lambda value: value
    pyodide = types.ModuleType("pyodide")
    pyodide.ffi = ffi
    bridge_module = types.ModuleType("webgrad_bridge")
    for name, module in (("pyodide", pyodide), ("pyodide.ffi", ffi), ("webgrad_bridge", bridge_module)):
        monkeypatch.setitem(sys.modules, name, module)
    name = "webgrad.backends.webgpu.browser"
    monkeypatch.delitem(sys.modules, name, raising=False)
    module = importlib.import_module(name)

    def make(bridge):
        bridge_module.bridge = bridge
        return module.BrowserDriver()
    yield make
    sys.modules.pop(name, None)


@pytest.fixture(params=["fake", "browser"])
def fake_runtime(request):
    """make() -> (FakeDriver, a Runtime over it): directly, or through browser.py and FakeBridge."""
    def make():
        driver = runtime_fakes.FakeDriver()
        if request.param == "browser":
            return driver, Runtime(request.getfixturevalue("browser_driver")(runtime_fakes.FakeBridge(driver)))
        return driver, Runtime(driver)
    return make
