"""A GPU's one-pass reduction of elements in runs of whole vec4s (kernels/reduce.py's "runs" form,
shaders/reduce.wgsl's runs): a convolution's bias gradient, (N, C, H, W) summed to C, in one dispatch
where it took two; the same results as torch's, its views included, and maps in its store under wg.jit."""
import numpy as np
import pytest
import torch

import webgrad as wg
from webgrad.backends.webgpu.kernels import reduce
from conftest import check_op, dispatched_kernels, distinct, randn, rng, to_numpy
from test_fusion import CALLS, _inputs, check_fusion


def _planes():
    """(N, C, H, W) with H * W a multiple of 4: planes of more vec4s than a workgroup's threads (a thread
    takes a few of each), or of fewer (a thread takes one, several planes at a time); N * H * W enough
    that a thread's loads take a whole round (RUN_LOADS of them) and some more, so both loops run."""
    c = int(rng().integers(2, 6))
    if rng().integers(2):
        return int(rng().integers(9, 12)), c, 30, 4 * int(rng().integers(8, 10))   # 240 or 270 vec4s
    return int(rng().integers(150, 200)), c, 7, 4 * int(rng().integers(1, 3))     # 7 or 14


@pytest.fixture
def gpu_plan(monkeypatch):
    monkeypatch.setattr(wg.get_backend("webgpu"), "is_software", False)


@pytest.mark.parametrize("op", ["sum", "mean", "amax", "amin"])
def test_a_bias_gradients_sum_is_one_pass(op, gpu_plan, monkeypatch):
    shape = _planes()
    x = randn(*shape) if op in ("sum", "mean") else distinct(*shape)
    kernels = dispatched_kernels(monkeypatch)
    check_op(lambda t: getattr(t, op)((0, 2, 3)), x, device="webgpu", grad=False, atol=1e-4)
    runtime = wg.get_backend("webgpu").runtime
    runs = {p for key, p in runtime._pipelines.items() if key[:2] == ("reduce", reduce.SUM.name if op in
                                                                           ("sum", "mean") else op[1:])
            and key[5:6] == ("runs",)}
    assert runs & set(kernels), "the runs form took no pass"


def test_views_and_layouts_of_the_runs_form(gpu_plan):
    """Whole vec4s only: a view at a whole vec4 (a batch's tail) takes the runs form; a plane of another
    width, a view starting mid-vec4 or planes transposed (no runs) take two passes; all give torch's sums."""
    n, c, h, w = _planes()
    x = wg.tensor(randn(n, c, h, w), device="webgpu")
    cases = [(x, True), (x[1:], True), (wg.tensor(randn(n, c, h, w + 1), device="webgpu"), False),
             (wg.tensor(randn(n * c * h * w + 1), device="webgpu")[1:].reshape(n, c, h, w), False),
             (x.transpose(2, 3), False)]
    for t, runs in cases:
        assert reduce._in_runs(reduce.SUM, t._view, (1,), (0, 2, 3), t.numel() // c) == runs, (t.shape, runs)
        expected = torch.from_numpy(to_numpy(t)).double().sum((0, 2, 3)).numpy()
        np.testing.assert_allclose(to_numpy(t.sum((0, 2, 3))), expected, rtol=1e-4, atol=1e-4)


def test_a_conv_bias_gradient_is_torchs(gpu_plan):
    n, c, h, w = _planes()
    check_op(lambda x, weight, bias: wg.nn.functional.conv2d(x, weight, bias, padding=1),
             randn(n, 2, h, w), randn(c, 2, 3, 3), randn(c), device="webgpu",
             torch_fn=lambda x, weight, bias: torch.nn.functional.conv2d(x, weight, bias, padding=1),
             atol=1e-3, rtol=1e-3, fd=False)


def test_a_runs_sums_store_takes_the_maps_after_it(gpu_plan):
    def fn(x):
        return (x.sum((0, 2, 3)) * 0.5).tanh()
    make = _inputs(_planes())
    fused = check_fusion(lambda: fn, make, saved=2)   # * 0.5 and tanh into the one pass's store
    x = torch.from_numpy(to_numpy(make(CALLS - 1)[0])).double()
    np.testing.assert_allclose(fused[-1][0], (x.sum((0, 2, 3)) * 0.5).tanh().numpy(), rtol=1e-5, atol=1e-5)
