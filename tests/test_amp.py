"""autocast against PyTorch (GradScaler: test_grad_scaler.py).

Oracles: on the cpu device, torch's CPU autocast run side by side (its dtypes and values); on the
webgpu device, which follows CUDA's lists, torch's own CUDA policy as its installed header
(ATen/autocast_mode.h) and dispatch table state it, applied to the inputs and run by torch on the
CPU."""
import pathlib
import re

import numpy as np
import pytest
import torch
from conftest import randn, rng, tag, uniform
from runtime_fakes import FakeDriver

import webgrad as wg
from webgrad.amp import autocast_mode
from webgrad.backends.webgpu.backend import WebGPUBackend

HALF_RTOL, HALF_ATOL = 2e-2, 2e-2   # a float16 result, its inputs rounded to float16 too
_CPU_AUTOCAST = {"dtype": torch.float16}


# ---- torch's CUDA policy, from torch itself ----
def _header_lists():
    """op name -> policy, from the autocast op lists in torch's installed ATen/autocast_mode.h."""
    text = (pathlib.Path(torch.__file__).parent / "include/ATen/autocast_mode.h").read_text()
    policies = {}
    for macro, policy in (("AT_FORALL_LOWER_PRECISION_FP", "lower"), ("AT_FORALL_FP32", "fp32"),
                          ("AT_FORALL_FP32_SET_OPT_DTYPE", "fp32"), ("AT_FORALL_PROMOTE", "promote"),
                          ("AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE", "fp32")):   # norm: fp32_append_dtype
        lines = text[text.index(f"#define {macro}(_)"):].split("\n")
        end = next(i for i, line in enumerate(lines) if not line.rstrip().endswith("\\"))
        for name in re.findall(r"^\s*_\((?:ADD_NS\()?(\w+)", "\n".join(lines[:end + 1]), re.M):
            policies[name] = policy
    return policies


CUDA_LISTS = _header_lists()
TORCH_NAMES = {"vector_norm": "linalg_vector_norm", "matrix_norm": "linalg_matrix_norm",
               "cross_entropy": "cross_entropy_loss"}
# composite in torch (no autocast kernel of its own on some device): its ops' policy applies
COMPOSITES = {"cross_entropy_loss": ("log_softmax", "nll_loss"), "einsum": ("bmm",)}


def _autocast_kernel(torch_name, key):
    """Whether torch registers an autocast kernel (not a fallthrough) for the op under key."""
    table = torch._C._dispatch_dump_table(f"aten::{torch_name}")
    line = next((line for line in table.splitlines() if line.startswith(f"{key}:")), "")
    return bool(line) and "fallthrough" not in line


def _autocast_acts(torch_name, key):
    """Whether autocast under key changes the op: a kernel of its own, or one of its parts'."""
    return _autocast_kernel(torch_name, key) or any(_autocast_kernel(part, key)
                                                    for part in COMPOSITES.get(torch_name, ()))


def cuda_policy(name):
    """torch's CUDA autocast policy of the op webgrad names `name`: 'lower', 'fp32', 'promote',
    'banned' (a kernel that is on no list: it raises), or None."""
    torch_name = TORCH_NAMES.get(name, name)
    if torch_name in CUDA_LISTS:
        return CUDA_LISTS[torch_name]
    if _autocast_kernel(torch_name, "AutocastCUDA"):
        return "banned"
    parts = {cuda_policy(part) for part in COMPOSITES.get(torch_name, ())}
    assert len(parts) <= 1, parts
    return parts.pop() if parts else None


def test_policy_table_is_torchs():
    for name, (gpu, cpu) in autocast_mode._POLICIES.items():
        assert gpu == cuda_policy(name), tag(f"{name}: webgpu policy {gpu}, torch's CUDA {cuda_policy(name)}")
        torch_name = TORCH_NAMES.get(name, name)
        assert (cpu is not None) == _autocast_acts(torch_name, "AutocastCPU"), tag(f"{name}: cpu policy {cpu}")


def _webgrad_has(name):
    name = name.removeprefix("linalg_")
    return any(callable(getattr(where, name, None)) for where in (wg, wg.nn.functional, wg.Tensor, wg.linalg))


def test_every_listed_op_webgrad_has_is_in_the_table():
    """An op added to webgrad that torch autocasts must join _POLICIES (or name the op it runs as)."""
    cast = {TORCH_NAMES.get(name, name) for name in autocast_mode._POLICIES} | {"mm"}   # Tensor.mm is matmul
    missing = [name for name in CUDA_LISTS if _webgrad_has(name) and name not in cast]
    assert not missing, tag(f"ops torch autocasts that webgrad has but does not cast: {missing}")


# ---- the ops: (name, fn(lib, *tensors), inputs(): NumPy arrays; float16 ones become float16 tensors) ----
def _h(*shape):
    return randn(*shape).astype(np.float16)


def _labels(n, classes):
    return rng().integers(0, classes, n)


def _cases():
    x, h = randn, _h

    def positive(*shape):
        return uniform(*shape, low=0.5, high=2.0).astype(np.float16)

    def unit(*shape):
        return uniform(*shape, low=-0.8, high=0.8).astype(np.float16)

    def log_probs(n, c):
        return torch.log_softmax(torch.tensor(randn(n, c)), -1).numpy().astype(np.float16)

    return [
        ("matmul", lambda L, a, b: a @ b, lambda: [x(3, 5), x(5, 4)]),
        ("linear", lambda L, a, w, b: _f(L).linear(a, w, b), lambda: [x(3, 5), x(4, 5), x(4)]),
        ("conv2d", lambda L, a, w, b: _f(L).conv2d(a, w, b, padding=1), lambda: [x(2, 3, 5, 5), x(4, 3, 3, 3), x(4)]),
        ("scaled_dot_product_attention", lambda L, q, k, v: _f(L).scaled_dot_product_attention(q, k, v),
         lambda: [x(2, 4, 8), x(2, 4, 8), x(2, 4, 8)]),
        ("einsum", lambda L, a, b: L.einsum("ij,jk->ik", a, b), lambda: [x(3, 5), x(5, 4)]),
        ("exp", lambda L, a: a.exp(), lambda: [h(3, 4)]),
        ("log", lambda L, a: L.log(a), lambda: [positive(3, 4)]),
        ("pow", lambda L, a: a ** 2, lambda: [h(3, 4)]),
        ("expm1", lambda L, a: a.expm1(), lambda: [h(3, 4)]),
        ("log1p", lambda L, a: a.log1p(), lambda: [positive(3, 4)]),
        ("log2", lambda L, a: a.log2(), lambda: [positive(3, 4)]),
        ("rsqrt", lambda L, a: a.rsqrt(), lambda: [positive(3, 4)]),
        ("reciprocal", lambda L, a: a.reciprocal(), lambda: [positive(3, 4)]),
        ("tan", lambda L, a: a.tan(), lambda: [unit(3, 4)]),
        ("asin", lambda L, a: a.asin(), lambda: [unit(3, 4)]),
        ("softplus", lambda L, a: _f(L).softplus(a), lambda: [h(3, 4)]),
        ("layer_norm", lambda L, a: _f(L).layer_norm(a, (5,)), lambda: [h(3, 5)]),
        ("rms_norm", lambda L, a: _f(L).rms_norm(a, (5,)), lambda: [h(3, 5)]),
        ("softmax", lambda L, a: a.softmax(-1), lambda: [h(3, 5)]),
        ("log_softmax", lambda L, a: _f(L).log_softmax(a, -1), lambda: [h(3, 5)]),
        ("logsumexp", lambda L, a: a.logsumexp(-1), lambda: [h(3, 5)]),
        ("sum", lambda L, a: a.sum(0), lambda: [h(3, 5)]),
        ("prod", lambda L, a: a.prod(), lambda: [unit(2, 3)]),
        ("cumsum", lambda L, a: a.cumsum(1), lambda: [h(3, 5)]),
        ("norm", lambda L, a: a.norm(), lambda: [h(3, 5)]),
        ("vector_norm", lambda L, a: L.linalg.vector_norm(a), lambda: [h(3, 5)]),
        ("matrix_norm", lambda L, a: L.linalg.matrix_norm(a, 1), lambda: [h(3, 5)]),
        ("cross_entropy", lambda L, a, t: _f(L).cross_entropy(a, t), lambda: [h(4, 5), _labels(4, 5)]),
        ("nll_loss", lambda L, a, t: _f(L).nll_loss(a, t), lambda: [log_probs(4, 5), _labels(4, 5)]),
        ("mse_loss", lambda L, a, b: _f(L).mse_loss(a, b), lambda: [h(3, 4), h(3, 4)]),
        ("l1_loss", lambda L, a, b: _f(L).l1_loss(a, b), lambda: [h(3, 4), h(3, 4)]),
        ("smooth_l1_loss", lambda L, a, b: _f(L).smooth_l1_loss(a, b), lambda: [h(3, 4), h(3, 4)]),
        ("huber_loss", lambda L, a, b: _f(L).huber_loss(a, b), lambda: [h(3, 4), h(3, 4)]),
        ("kl_div", lambda L, a, b: _f(L).kl_div(a, b, reduction="batchmean"), lambda: [log_probs(3, 4), positive(3, 4)]),
        ("binary_cross_entropy_with_logits", lambda L, a, b: _f(L).binary_cross_entropy_with_logits(a, b),
         lambda: [h(3, 4), uniform(3, 4, low=0.0, high=1.0).astype(np.float16)]),
        ("binary_cross_entropy", lambda L, a, b: _f(L).binary_cross_entropy(a.sigmoid(), b),
         lambda: [randn(3, 4), uniform(3, 4, low=0.0, high=1.0).astype(np.float16)]),
        ("scatter_add", lambda L, a, i, s: a.scatter_add(1, i, s), lambda: [h(2, 4), rng().integers(0, 4, (2, 3)), h(2, 3)]),
        # on no list: they run as called, in their inputs' type (the ops they are made of are not cast)
        ("mean", lambda L, a: a.mean(), lambda: [h(3, 5)]),
        ("var", lambda L, a: a.var(1), lambda: [h(3, 5)]),
        ("std", lambda L, a: a.std(), lambda: [h(3, 5)]),
        ("mish", lambda L, a: _f(L).mish(a), lambda: [h(3, 5)]),
        ("batch_norm", lambda L, a: _f(L).batch_norm(a, None, None, training=True), lambda: [h(4, 3)]),
        ("gelu", lambda L, a: _f(L).gelu(a), lambda: [h(3, 5)]),
        ("tanh", lambda L, a: a.tanh(), lambda: [h(3, 5)]),
        ("relu", lambda L, a: a.relu(), lambda: [h(3, 5)]),
        ("add", lambda L, a, b: a + b, lambda: [h(3, 5), x(3, 5)]),
        ("mul", lambda L, a, b: a * b, lambda: [h(3, 5), h(3, 5)]),
        ("amax", lambda L, a: a.amax(0), lambda: [h(3, 5)]),
    ]


def _f(lib):
    return lib.nn.functional


def _torch_inputs(arrays):
    return [torch.tensor(a, dtype=torch.int64) if a.dtype.kind in "iu" else torch.tensor(a) for a in arrays]


def _webgrad_inputs(arrays, device):
    tensors = [wg.tensor(a.astype(np.int64) if a.dtype.kind in "iu" else a.astype(np.float32), device=device)
               for a in arrays]
    return [t.half() if a.dtype == np.float16 else t for t, a in zip(tensors, arrays)]


def _check(got, expected, what):
    assert str(got.dtype).split(".")[-1] == str(expected.dtype).split(".")[-1], \
        tag(f"{what}: {got.dtype}, torch {expected.dtype}")
    tolerance = (HALF_RTOL, HALF_ATOL) if expected.dtype == torch.float16 else (1e-3, 1e-3)
    np.testing.assert_allclose(got.detach().float().cpu().numpy(), expected.detach().float().numpy(),
                               rtol=tolerance[0], atol=tolerance[1], err_msg=tag(what))


CASES = {name: (fn, inputs) for name, fn, inputs in _cases()}   # inputs drawn in the test, by its seed


@pytest.mark.parametrize("name", list(CASES))
def test_cpu_ops_as_torch_cpu_autocast(name):
    """The cpu device follows torch's CPU lists: dtypes and values as torch.autocast('cpu', float16)."""
    fn, inputs = CASES[name]
    arrays = inputs()
    with torch.autocast("cpu", **_CPU_AUTOCAST):
        expected = fn(torch, *_torch_inputs(arrays))
    with wg.autocast("cpu", dtype=wg.float16):
        got = fn(wg, *_webgrad_inputs(arrays, "cpu"))
    _check(got, expected, name)


def _cuda_cast(arrays, policy):
    """The inputs as CUDA autocast hands them to the op: floating ones cast by the policy."""
    tensors = _torch_inputs(arrays)
    floating = [t for t in tensors if t.is_floating_point()]
    if policy == "lower":
        target = torch.float16
    elif policy == "fp32":
        target = torch.float32
    elif policy == "promote":
        target = torch.float32 if any(t.dtype == torch.float32 for t in floating) else torch.float16
    else:
        return tensors
    return [t.to(target) if t.is_floating_point() else t for t in tensors]


def test_webgpu_ops_as_torch_cuda_autocast():
    """The webgpu device follows CUDA's lists: each op's result is torch's op on the inputs cast by
    torch's CUDA policy for it (read from torch), run on the CPU."""
    for name, (fn, inputs) in CASES.items():
        arrays = inputs()
        with wg.autocast("webgpu"):
            if cuda_policy(name) == "banned":
                with pytest.raises(RuntimeError, match=r"(?s)unsafe to autocast.*binary_cross_entropy_with_logits"):
                    fn(wg, *_webgrad_inputs(arrays, "webgpu"))
                continue
            got = fn(wg, *_webgrad_inputs(arrays, "webgpu"))
        _check(got, fn(torch, *_cuda_cast(arrays, cuda_policy(name))), name)


def test_webgpu_promote_and_explicit_dtype():
    a, src = _h(2, 4), randn(2, 3)
    index = rng().integers(0, 4, (2, 3))
    with wg.autocast("cuda"):   # torch programs' name for the GPU
        x, i, s = _webgrad_inputs([a, index, src], "webgpu")
        out = x.scatter_add(1, i, s)   # the promote list: the widest input type
        assert out.dtype is wg.float32, tag(f"scatter_add of float16 and float32: {out.dtype}")
        _check(out, torch.tensor(a).float().scatter_add(1, torch.tensor(index), torch.tensor(src)), "scatter_add")
        assert x.sum(dtype=wg.float16).dtype is wg.float16   # an explicit dtype= is kept, as torch's


# ---- the region ----
def test_region_nesting_decorator_and_state(device):
    a, b = (wg.tensor(randn(3, 3), device=device) for _ in range(2))
    kind = {"cpu": {"dtype": wg.float16}, "webgpu": {}}[device]
    assert (a @ b).dtype is wg.float32 and not wg.is_autocast_enabled(device)

    @wg.autocast(device, **kind)
    def product(x, y):
        return x @ y

    assert product(a, b).dtype is wg.float16 and (a @ b).dtype is wg.float32
    with wg.autocast(device, **kind):
        assert wg.is_autocast_enabled(device) and wg.get_autocast_dtype(device) is wg.float16
        with wg.autocast(device, enabled=False):
            assert (a @ b).dtype is wg.float32 and not wg.is_autocast_enabled(device)
        assert (a @ b).dtype is wg.float16
        other = "webgpu" if device == "cpu" else "cpu"
        c = wg.tensor(randn(3, 3), device=other)
        assert (c @ c).dtype is wg.float32   # another device's tensors are left alone
    assert not wg.is_autocast_enabled(device) and not autocast_mode._cache
    w = wg.tensor(randn(3, 3), device=device, requires_grad=True)
    with wg.autocast(device, cache_enabled=False, **kind):
        assert (a @ w).dtype is wg.float16 and not autocast_mode._cache
    with wg.autocast(device, **kind):
        with wg.no_grad():
            a @ w
        assert not autocast_mode._cache   # a cast made without a graph is not kept for uses with one
        a @ w
        assert len(autocast_mode._cache) == 1


def test_gradients_reach_float32_weights_once(device):
    """A weight used twice in the region is cast once (torch's cache); its gradient is float32 and
    matches torch's CPU autocast within float16 tolerance, through a float16 + float32 residual sum
    whose float16 side gets its gradient in float16, as in torch."""
    xs, ws = randn(4, 6), randn(6, 6) * 0.3
    x, w = wg.tensor(xs, device=device), wg.tensor(ws, device=device, requires_grad=True)
    tx, tw = torch.tensor(xs), torch.tensor(ws, requires_grad=True)
    kind = {"cpu": {"dtype": wg.float16}, "webgpu": {}}[device]
    with wg.autocast(device, **kind):
        loss = ((x @ w).tanh() @ w + x).pow(2).mean()
        assert len(autocast_mode._cache) == 1
        loss.backward()   # backward inside the region runs as recorded
    with torch.autocast("cpu", **_CPU_AUTOCAST):
        tloss = ((tx @ tw).tanh() @ tw + tx).pow(2).mean()
    tloss.backward()
    assert w.grad.dtype is wg.float32
    np.testing.assert_allclose(w.grad.cpu().numpy(), tw.grad.numpy(), rtol=3e-2, atol=3e-3, err_msg=tag("w.grad"))


def test_bad_arguments():
    with pytest.raises(RuntimeError, match="no bfloat16"):
        wg.autocast("cpu")   # torch's cpu default
    with pytest.raises(RuntimeError, match="no bfloat16"):
        wg.autocast("webgpu", dtype=wg.bfloat16)
    with pytest.raises(RuntimeError, match="unsupported autocast device_type 'mps'"):
        wg.autocast("mps")
    with pytest.raises(ValueError, match="device_type"):
        wg.autocast(None)
    with pytest.warns(UserWarning, match="Disabling autocast"):
        region = wg.autocast("cpu", dtype=wg.float32)
    with region:
        assert not wg.is_autocast_enabled("cpu")
    with pytest.raises(TypeError, match="requires a callable"):
        wg.autocast("cpu", dtype=wg.float16)(3)


def test_refused_where_the_adapter_lacks_shader_f16(monkeypatch):
    from webgrad import backends
    monkeypatch.setitem(backends._backends, "webgpu", WebGPUBackend(FakeDriver()))
    with pytest.raises(TypeError, match="lacks the WebGPU feature shader-f16"):
        with wg.autocast("webgpu"):
            pass
    assert not wg.is_autocast_enabled("webgpu")


def test_torch_cuda_amp_spellings():
    """torch.cuda.amp.autocast / GradScaler (deprecated in torch, still in programs): the webgpu device's."""
    with pytest.warns(FutureWarning, match="torch.amp.autocast"):
        region = wg.cuda.amp.autocast()
    with pytest.warns(FutureWarning, match="torch.amp.GradScaler"):
        scaler = wg.cuda.amp.GradScaler(init_scale=8.0)
    a = wg.tensor(randn(2, 2), device="webgpu")
    with region:
        assert (a @ a).dtype is wg.float16 and wg.is_autocast_enabled("cuda")
    assert scaler.scale(a.sum()).item() == pytest.approx(8.0 * a.sum().item(), rel=1e-6)
    assert wg.autocast is wg.amp.autocast
