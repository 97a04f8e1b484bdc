"""F.layer_norm / F.rms_norm and nn.LayerNorm / nn.RMSNorm against torch (values and gradients of the
input, weight and bias), float64 finite differences on cpu, and the fused kernels' dispatch counts."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import webgrad as wg
import webgrad.nn.functional as F
from conftest import assert_close, check_op, dispatched_kernels, randn, rng, tag, to_numpy, uniform, wg_tensor

# (input shape, normalized_shape): rows and row lengths that are not multiples of the kernels'
# 64 threads a row (4 on a software adapter), 32 columns a workgroup or 256 rows a chunk (300 rows take the chunks' reduction)
SHAPES = [((5, 37), (37,)), ((2, 3, 4, 5), (4, 5)), ((300, 3), (3,)), ((3, 1000), (1000,)), ((7,), (7,)),
          ((1, 1), (1,))]


@pytest.mark.parametrize("shape,normalized", SHAPES, ids=lambda v: "x".join(map(str, v)))
@pytest.mark.parametrize("affine", ["none", "weight", "weight+bias", "bias"])
def test_layer_norm(shape, normalized, affine, device):
    # a ramp across each normalized row keeps its variance away from 0: a row of 3 close values is
    # ill-conditioned (its gradient scales with 1/std), and float32 then differs from torch by ~1e-3
    ramp = 3 * np.linspace(-1, 1, int(np.prod(normalized))).reshape(normalized).astype(np.float32)
    inputs = [2 * randn(*shape) + 0.5 + ramp, randn(*normalized) if "weight" in affine else None,
              randn(*normalized) if "bias" in affine else None]
    given = [a for a in inputs if a is not None]

    def run(ns):
        def fn(*tensors):
            it = iter(tensors[1:])
            w, b = (next(it) if a is not None else None for a in inputs[1:])
            return ns.layer_norm(tensors[0], normalized, w, b, eps=1e-4)
        return fn
    check_op(run(F), *given, device=device, torch_fn=run(TF))


@pytest.mark.parametrize("row_threads", [1, 16, 64])
def test_layer_norm_at_other_row_threads(row_threads, monkeypatch):
    """The kernels' threads a row are chosen per adapter (a GPU's 64 here too): each computes torch's."""
    from webgrad.backends.webgpu.kernels import norm
    monkeypatch.setattr(norm, "SOFTWARE_NORM_ROW_THREADS", row_threads)
    monkeypatch.setattr(norm, "NORM_ROW_THREADS", row_threads)
    for shape, normalized in SHAPES[:4]:
        ramp = 3 * np.linspace(-1, 1, int(np.prod(normalized))).reshape(normalized).astype(np.float32)
        inputs = [2 * randn(*shape) + 0.5 + ramp, randn(*normalized), randn(*normalized)]
        check_op(lambda x, w, b: F.layer_norm(x, normalized, w, b, eps=1e-4), *inputs, device="webgpu",
                 torch_fn=lambda x, w, b: TF.layer_norm(x, normalized, w, b, eps=1e-4))


@pytest.mark.parametrize("shape,normalized", SHAPES, ids=lambda v: "x".join(map(str, v)))
@pytest.mark.parametrize("eps", [None, 1e-3])
@pytest.mark.parametrize("weighted", [False, True])
def test_rms_norm(shape, normalized, eps, weighted, device):
    inputs = [randn(*shape)] + ([randn(*normalized)] if weighted else [])
    check_op(lambda x, *w: F.rms_norm(x, normalized, *w, eps=eps), *inputs, device=device,
             torch_fn=lambda x, *w: TF.rms_norm(x, normalized, *w, eps=eps))


def test_norm_of_views(device):
    """Strided rows (a transpose), and a non-contiguous input whose trailing dims are copied."""
    check_op(lambda x, w: F.layer_norm(x.T, (6,), w), randn(6, 9), randn(6), device=device,
             torch_fn=lambda x, w: TF.layer_norm(x.T, (6,), w))
    check_op(lambda x: F.rms_norm(x.permute(2, 0, 1), (3, 4)), randn(3, 4, 5), device=device,
             torch_fn=lambda x: TF.rms_norm(x.permute(2, 0, 1), (3, 4)))


def test_layer_norm_is_stable_for_a_large_mean(device):
    """Two passes (mean, then squares about it): a large offset does not cancel the variance away."""
    x = (randn(4, 50) + 1000.0).astype(np.float32)
    check_op(lambda t: F.layer_norm(t, (50,)), x, device=device, torch_fn=lambda t: TF.layer_norm(t, (50,)),
             atol=2e-3, rtol=2e-3, fd=False)


def test_norm_errors():
    x = wg.zeros(2, 3, 4)
    with pytest.raises(RuntimeError, match="normalized_shape"):
        F.layer_norm(x, (3,))
    with pytest.raises(RuntimeError, match="weight"):
        F.layer_norm(x, (4,), wg.ones(3))
    with pytest.raises(RuntimeError, match="floating point"):
        F.rms_norm(wg.zeros(2, 3, dtype=wg.int32), (3,))


@pytest.mark.parametrize("cls,kwargs", [("LayerNorm", {}), ("LayerNorm", {"bias": False}),
                                        ("LayerNorm", {"elementwise_affine": False, "eps": 1e-3}),
                                        ("RMSNorm", {}), ("RMSNorm", {"eps": 1e-6}),
                                        ("RMSNorm", {"elementwise_affine": False})])
def test_norm_modules_against_torch(cls, kwargs, device):
    """torch's defaults, repr, state_dict names and init; with torch's (randomised) weights copied in,
    the same outputs and gradients."""
    normalized = (5, 6)
    ours, theirs = getattr(wg.nn, cls)(normalized, **kwargs).to(device), getattr(torch.nn, cls)(normalized, **kwargs)
    assert repr(ours) == repr(theirs), tag(f"{ours!r} vs {theirs!r}")
    assert list(ours.state_dict()) == list(theirs.state_dict()), tag("state_dict keys")
    for name, value in theirs.state_dict().items():
        assert_close(ours.state_dict()[name], value, what=f"initial {name}")
        with torch.no_grad():
            value.copy_(torch.from_numpy(randn(*value.shape)))
    ours.load_state_dict({name: wg_tensor(v.numpy(), device) for name, v in theirs.state_dict().items()})
    x, g = randn(3, 4, *normalized), randn(3, 4, *normalized)
    tx, wx = torch.tensor(x, requires_grad=True), wg_tensor(x, device, requires_grad=True)
    (theirs(tx) * torch.from_numpy(g)).sum().backward()
    out = ours(wx)
    (out * wg_tensor(g, device)).sum().backward()
    assert_close(out, theirs(tx), what="output")
    assert_close(wx.grad, tx.grad, what="input gradient")
    for name, p in theirs.named_parameters():
        assert_close(dict(ours.named_parameters())[name].grad, p.grad, what=f"{name} gradient")


@pytest.mark.parametrize("rows,expected", [(40, 2), (700, 3)])
@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
def test_norm_is_fused(op, rows, expected, monkeypatch):
    """One kernel forward; backward one for the input and one for the weight's and bias's column sums
    (plus a reduction of its chunks past 256 rows)."""
    x = wg_tensor(randn(rows, 48), "webgpu", requires_grad=True)
    w = wg_tensor(randn(48), "webgpu", requires_grad=True)
    args = (w, wg_tensor(randn(48), "webgpu", requires_grad=True)) if op == "layer_norm" else (w,)
    g = wg_tensor(randn(rows, 48), "webgpu")
    kernels = dispatched_kernels(monkeypatch)
    out = getattr(F, op)(x, (48,), *args)
    assert len(kernels) == 1, tag(f"forward took {len(kernels)} dispatches")
    out.backward(g)
    assert len(kernels) == 1 + expected, tag(f"backward took {len(kernels) - 1} dispatches, expected {expected}")
    assert np.all(np.isfinite(to_numpy(w.grad))), tag("weight gradient")


def test_norm_past_the_grid():
    """A workgroup per row: past 65535 rows the grid spills into y (shaders/common.wgsl's flat_id)."""
    rows = wg.get_backend("webgpu").runtime.limits["max_compute_workgroups_per_dimension"] + 7
    # rows spread at least 0.5 apart: among 65542 rows of three normal values some have almost no
    # variance, and their gradients (times 1 / std^2) keep no float32 precision against torch's
    x = (uniform(rows, 3, low=-0.25, high=0.25) + np.array([-1.0, 0.0, 1.0])).astype(np.float32)
    w, b = randn(3), randn(3)
    layer_norm, torch_layer_norm = (lambda x, w, b: F.layer_norm(x, (3,), w, b)), \
        (lambda x, w, b: TF.layer_norm(x, (3,), w, b))
    check_op(layer_norm, x, w, b, device="webgpu", torch_fn=torch_layer_norm, grad=[0])
    # w's and b's gradients are float32 sums over all the rows, in another order than torch's: they
    # agree to the rows' count times float32's epsilon (a sum of 65542 terms near 1 near 7 differed
    # by 0.0027), not to 1e-4
    check_op(layer_norm, x, w, b, device="webgpu", torch_fn=torch_layer_norm, grad=[1, 2], atol=rows * 2**-20)


@pytest.mark.parametrize("cols", [1, 37, 64, 65, 384, 512, 513])
@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
def test_a_gpus_short_rows_held_in_registers(op, cols, monkeypatch):
    """A GPU's rows of at most 64 x NORM_HELD values take the held entries (each thread's values loaded
    once, into registers), longer ones the loops: torch's values and gradients either way, and the
    loops' bits (the same sums in the same order)."""
    from webgrad.backends.webgpu.kernels import norm
    backend = wg.get_backend("webgpu")
    monkeypatch.setattr(backend, "is_software", False)   # a GPU's plan
    rows = int(rng().integers(3, 9))
    ramp = 3 * np.linspace(-1, 1, cols).astype(np.float32)
    inputs = [2 * randn(rows, cols) + 0.5 + ramp, randn(cols)] + ([randn(cols)] if op == "layer_norm" else [])
    kernels = dispatched_kernels(monkeypatch)

    def fn(ns):
        return lambda x, *affine: getattr(ns, op)(x, (cols,), *affine, eps=1e-4)
    check_op(fn(F), *inputs, device="webgpu", torch_fn=fn(TF))
    held = cols <= norm.NORM_ROW_THREADS * norm.NORM_HELD
    names = {backend.runtime.kernel_names[k][0] for k in kernels}
    assert ("norm.forward_held" in names, "norm.backward_input_held" in names) == (held, held), tag(f"kernels {names}")

    def run():
        tensors = [wg_tensor(a, "webgpu", requires_grad=True) for a in inputs]
        out = fn(F)(*tensors)
        out.backward(wg_tensor(inputs[0][::-1].copy(), "webgpu"))
        return [to_numpy(t) for t in (out, *(t.grad for t in tensors))]
    ours = run()
    monkeypatch.setattr(norm, "NORM_HELD", 0)   # the loops
    for what, a, b in zip(("output", "input gradient", "weight gradient", "bias gradient"), ours, run()):
        assert np.array_equal(a, b), tag(f"{what}: held and looped differ by {np.abs(a - b).max()}")
