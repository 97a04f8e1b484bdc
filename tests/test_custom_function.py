"""torch.autograd.Function's ctx style and nn.Module's full backward hooks: each test's program is
written once against `lib` (torch or webgrad), run on both with the same random inputs, and the
outputs, gradients and what backward and the hooks saw are compared."""
import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch

import webgrad as wg
from conftest import assert_close, finite_difference_check, randn, torch_tensor, wg_tensor


def _both(a, device, requires_grad=True):
    return wg_tensor(a, device, requires_grad=requires_grad), torch_tensor(a, requires_grad=requires_grad)


def _same_error(run):
    """run(lib) raises on webgrad what it raises on torch: the same type and message."""
    with pytest.raises(Exception) as expected:
        run(torch)
    with pytest.raises(expected.type) as got:
        run(wg)
    assert str(got.value) == str(expected.value)


def _compare(results, what):
    """results: {lib: list of tensors or None}, compared entry by entry."""
    for k, (mine, theirs) in enumerate(zip(results[wg], results[torch], strict=True)):
        assert (mine is None) == (theirs is None), f"{what} {k}: {mine} against {theirs}"
        if theirs is not None:
            assert_close(mine, theirs, what=f"{what} {k}")


def scaled_relu(lib):
    class ScaledReLU(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, k, shift):
            ctx.save_for_backward(x)
            ctx.k = k                      # any attribute
            ctx.seen = ctx.needs_input_grad
            return x.clamp(min=0) * k + shift

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * (x > 0) * ctx.k, None, grad * 2 if ctx.needs_input_grad[2] else None
    return ScaledReLU


def test_ctx_function_as_torch(device):
    a, s = randn(3, 4), randn(3, 4)
    results, seen = {}, {}
    for lib, (x, shift) in ((wg, (wg_tensor(a, device, True), wg_tensor(s, device))),
                            (torch, (torch_tensor(a, True), torch_tensor(s)))):
        y = scaled_relu(lib).apply(x, 1.5, shift)
        seen[lib] = y.grad_fn.ctx.seen if lib is wg else y.grad_fn.seen
        (y * y).sum().backward()
        results[lib] = [y, x.grad, shift.grad]
        assert y.requires_grad and not y.is_leaf
    _compare(results, "output, gradients")
    assert seen[wg] == seen[torch] == (True, False, False)


def test_no_graph_without_grad(device):
    a = randn(5)
    for lib, x in zip((wg, torch), _both(a, device)):
        with lib.no_grad():
            y = scaled_relu(lib).apply(x, 2.0, x)
        assert not y.requires_grad and y.grad_fn is None
    x = wg_tensor(a, device)
    assert not scaled_relu(wg).apply(x, 2.0, x).requires_grad


def test_keyword_arguments_and_defaults(device):
    def function(lib):
        class Affine(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x, scale=3.0, bias=None):
                ctx.scale = scale
                return x * scale + (0 if bias is None else bias)

            @staticmethod
            def backward(ctx, grad):
                return grad * ctx.scale, None, grad
        return Affine
    a, b = randn(4), randn(4)
    results = {}
    for lib, (x, bias) in ((wg, (wg_tensor(a, device, True), wg_tensor(b, device, True))),
                           (torch, (torch_tensor(a, True), torch_tensor(b, True)))):
        (function(lib).apply(x, 2.5, bias=bias) ** 2).sum().backward()
        results[lib] = [x.grad, bias.grad]
    _compare(results, "gradients")


def test_multiple_outputs_one_unused_gets_zeros_or_none(device):
    def function(lib, materialize):
        class Pair(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x, y):
                ctx.set_materialize_grads(materialize)
                ctx.save_for_backward(x, y)
                return x * y, x.exp(), y.sum()

            @staticmethod
            def backward(ctx, g_prod, g_exp, g_sum):
                Pair.got = [g_prod, g_exp, g_sum]
                x, y = ctx.saved_tensors
                gx = g_prod * y + (0 if g_exp is None else g_exp * x.exp())
                gy = g_prod * x + (0 if g_sum is None else g_sum)
                return gx, gy
        return Pair
    a, b = randn(2, 3), randn(2, 3)
    for materialize in (True, False):
        results, got = {}, {}
        for lib, (x, y) in ((wg, (wg_tensor(a, device, True), wg_tensor(b, device, True))),
                            (torch, (torch_tensor(a, True), torch_tensor(b, True)))):
            pair = function(lib, materialize)
            prod, _, total = pair.apply(x, y)
            (prod.sum() + prod.sum() * 2 + total * 3).backward()   # output 0 twice, output 1 never
            got[lib] = pair.got
            results[lib] = [x.grad, y.grad]
        _compare(results, f"gradients (materialize={materialize})")
        _compare(got, f"backward's gradients (materialize={materialize})")


def test_non_differentiable_outputs_and_integer_outputs(device):
    def function(lib):
        class Clipped(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                mask = (x > 0).to(x.dtype)
                ctx.mark_non_differentiable(mask)
                ctx.save_for_backward(mask)
                return x * mask, mask, (x > 0).sum()

            @staticmethod
            def backward(ctx, grad, grad_mask, grad_count):
                ctx.zeros = [grad_mask]
                (mask,) = ctx.saved_tensors
                return grad * mask
        return Clipped
    a = randn(3, 3)
    results, flags = {}, {}
    for lib, x in zip((wg, torch), _both(a, device)):
        y, mask, count = function(lib).apply(x)
        flags[lib] = (y.requires_grad, mask.requires_grad, count.requires_grad)
        (y * mask).sum().backward()
        results[lib] = [y, mask, count, x.grad]
    _compare(results, "outputs, gradient")
    assert flags[wg] == flags[torch] == (True, False, False)


def test_mark_dirty_in_place_function(device):
    def function(lib):
        class Twice(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                x.mul_(2)
                ctx.mark_dirty(x)
                return x

            @staticmethod
            def backward(ctx, grad):
                return grad * 2
        return Twice
    a = randn(4)
    results = {}
    for lib, leaf in zip((wg, torch), _both(a, device)):
        x = leaf * leaf
        y = function(lib).apply(x)
        assert y is x
        (x * leaf).sum().backward()
        results[lib] = [x, leaf.grad]
    _compare(results, "values, gradient")
    _same_error(lambda lib: function(lib).apply(lib.tensor(a, requires_grad=True)))   # a leaf may not be written


def test_saved_tensor_written_in_place_raises(device):
    def run(lib):
        x = lib.tensor(randn(3), requires_grad=True) * 1
        y = scaled_relu(lib).apply(x, 2.0, x)
        x.add_(1)
        y.sum().backward()
    with pytest.raises(RuntimeError) as expected:
        run(torch)
    with pytest.raises(RuntimeError) as got:
        run(wg)
    prefix = "one of the variables needed for gradient computation has been modified by an inplace operation"
    assert str(expected.value).startswith(prefix) and str(got.value).startswith(prefix)
    assert "is at version 1; expected version 0 instead" in str(got.value)


@pytest.mark.parametrize("mistake", ["too_few", "gradient_for_number", "wrong_shape"])
def test_wrong_gradients_raise_as_torch(mistake):
    a = randn(2, 3)

    def run(lib):
        class Bad(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x, k):
                return x * k

            @staticmethod
            def backward(ctx, grad):
                if mistake == "too_few":
                    return grad
                if mistake == "gradient_for_number":
                    return grad, grad
                return grad[0], None
        Bad.apply(lib.tensor(a, requires_grad=True), 2.0).sum().backward()
    _same_error(run)


def test_broadcast_gradient_is_summed_and_extra_nones_are_dropped(device):
    def function(lib):
        class Spread(lib.autograd.Function):
            @staticmethod
            def forward(ctx, bias, rows):
                ctx.rows = rows
                return bias.expand(rows, bias.shape[0]) * 1

            @staticmethod
            def backward(ctx, grad):
                return grad * 3, None, None   # a gradient of the output's shape, one None too many
        return Spread
    a, w = randn(4), randn(3, 4)
    results = {}
    for lib, (bias, weight) in ((wg, (wg_tensor(a, device, True), wg_tensor(w, device))),
                                (torch, (torch_tensor(a, True), torch_tensor(w)))):
        (function(lib).apply(bias, 3) * weight).sum().backward()
        results[lib] = [bias.grad]
    _compare(results, "summed gradient")


def test_setup_context_style_and_once_differentiable(device):
    def function(lib):
        from importlib import import_module
        once_differentiable = import_module(lib.__name__ + ".autograd.function").once_differentiable

        class Cube(lib.autograd.Function):
            @staticmethod
            def forward(x, y):
                return x ** 3 * y

            @staticmethod
            def setup_context(ctx, inputs, output):
                ctx.save_for_backward(*inputs)

            @staticmethod
            @once_differentiable
            def backward(ctx, grad):
                x, y = ctx.saved_tensors
                return grad * 3 * x ** 2 * y, grad * x ** 3
        return Cube
    a, b = randn(2, 3), randn(2, 3)
    results = {}
    for lib, (x, y) in ((wg, (wg_tensor(a, device, True), wg_tensor(b, device, True))),
                        (torch, (torch_tensor(a, True), torch_tensor(b, True)))):
        out = function(lib).apply(x, y)
        out.sum().backward()
        results[lib] = [out, x.grad, y.grad]
    _compare(results, "output, gradients")


def test_finite_differences():
    cube = None

    def fn(x, y):
        nonlocal cube
        cube = cube or _cube_times()
        return cube.apply(x, 0.5, y)
    finite_difference_check(fn, randn(3, 2, dtype=np.float64), randn(3, 2, dtype=np.float64))


def _cube_times():
    class CubeTimes(wg.autograd.Function):
        @staticmethod
        def forward(ctx, x, k, y):
            ctx.save_for_backward(x, y)
            ctx.k = k
            return x ** 3 * y * k, x.sin()

        @staticmethod
        def backward(ctx, grad, grad_sin):
            x, y = ctx.saved_tensors
            return grad * 3 * x ** 2 * y * ctx.k + grad_sin * x.cos(), None, grad * x ** 3 * ctx.k
    return CubeTimes


def test_hooks_retain_grad_and_anomaly_on_custom_outputs(device):
    a = randn(3)
    results = {}
    for lib, x in zip((wg, torch), _both(a, device)):
        y = scaled_relu(lib).apply(x, 2.0, x)
        y.retain_grad()
        y.register_hook(lambda g: g * 3)
        (y * x).sum().backward()
        results[lib] = [y.grad, x.grad]
    _compare(results, "retained gradient, input gradient")

    def bad(lib):
        class NaNBackward(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, grad):
                return grad * float("nan")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")   # (torch warns that anomaly mode is slow)
            with lib.autograd.detect_anomaly():
                NaNBackward.apply(lib.tensor(a, requires_grad=True)).sum().backward()
    _same_error(bad)


def test_second_backward_raises_after_free(device):
    x = wg_tensor(randn(3), device, True)
    y = scaled_relu(wg).apply(x * 1, 2.0, x)
    y.sum().backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.sum().backward()


# ---- nn.Module's full backward hooks ----
def _hooked_module(lib):
    class Mix(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = lib.nn.Linear(3, 3)

        def forward(self, a, k, b, c):
            h = self.linear(a) * k
            return h + b, h * c, (a * c).sum()
    return Mix()


def test_module_backward_hooks_see_what_torch_does(device):
    a, b, c, w, bias = randn(2, 3), randn(2, 3), randn(2, 3), randn(3, 3), randn(3)
    results, seen = {}, {}
    for lib in (wg, torch):
        module = _hooked_module(lib)
        module.linear.load_state_dict({"weight": lib.tensor(w), "bias": lib.tensor(bias)})
        if lib is wg:
            module.to(device)
        make = (lambda v, rg: wg_tensor(v, device, rg)) if lib is wg else torch_tensor
        x, y, z = make(a, True), make(b, False), make(c, True)
        calls = []

        def pre_hook(mod, grad_output, calls=calls):
            calls.append(("pre", list(grad_output)))
            return (grad_output[0] * 2,) + tuple(grad_output[1:])

        def hook(mod, grad_input, grad_output, calls=calls):
            calls.append(("hook", list(grad_input), list(grad_output)))
            return (grad_input[0] + 1,) + tuple(grad_input[1:])
        handles = [module.register_full_backward_pre_hook(pre_hook), module.register_full_backward_hook(hook)]
        first, second, _ = module(x, 0.5, y, z)
        (first * second).sum().backward()   # output 2 is never used: None in grad_output
        for handle in handles:
            handle.remove()
        first, _, _ = module(x, 0.5, y, z)  # no hooks now
        first.sum().backward()
        results[lib] = [x.grad, z.grad, module.linear.weight.grad]
        seen[lib] = calls
    _compare(results, "gradients")
    assert [c[0] for c in seen[wg]] == [c[0] for c in seen[torch]] == ["pre", "hook"]
    _compare({wg: seen[wg][0][1], torch: seen[torch][0][1]}, "pre-hook's grad_output")
    _compare({wg: seen[wg][1][1] + seen[wg][1][2], torch: seen[torch][1][1] + seen[torch][1][2]},
             "hook's grad_input, grad_output")


def test_backward_hook_when_no_input_requires_grad(device):
    seen, grads = {}, {}
    w = randn(2, 3)
    for lib, x in zip((wg, torch), _both(randn(4, 3), device, requires_grad=False)):
        linear = lib.nn.Linear(3, 2, bias=False)
        linear.weight.data = lib.tensor(w)
        if lib is wg:
            linear.to(device)
        calls = []
        linear.register_full_backward_hook(lambda m, gi, go, calls=calls: calls.append((gi, go)))
        with pytest.warns(UserWarning, match="Full backward hook is firing"):
            linear(x).sum().backward()
        seen[lib], grads[lib] = calls, [linear.weight.grad]
    assert len(seen[wg]) == len(seen[torch]) == 1
    assert seen[wg][0][0] == seen[torch][0][0] == (None,)
    _compare({lib: list(seen[lib][0][1]) + grads[lib] for lib in (wg, torch)}, "grad_output, weight gradient")


@pytest.mark.parametrize("which", ["hook", "pre_hook"])
def test_backward_hook_returning_wrong_count_raises_as_torch(which):
    a = randn(2, 3)

    def run(lib):
        linear = lib.nn.Linear(3, 3)
        if which == "hook":
            linear.register_full_backward_hook(lambda m, gi, go: gi + gi)
        else:
            linear.register_full_backward_pre_hook(lambda m, go: go + go)
        linear(lib.tensor(a, requires_grad=True)).sum().backward()
    _same_error(run)


ALIASED_PROGRAM = """
import json, sys
import torch
from torch.autograd.function import once_differentiable


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 2 * x


x = torch.tensor(json.loads(sys.argv[1]), requires_grad=True)
Square.apply(x).sum().backward()
print(json.dumps(x.grad.tolist()))
"""


def test_torch_program_through_import_alias(tmp_path):
    """`import torch` giving webgrad (torch_alias): torch.autograd.function imports as written."""
    values = randn(4).tolist()
    program = tmp_path / "square.py"
    program.write_text("import webgrad.torch_alias\nwebgrad.torch_alias.install()\n" + ALIASED_PROGRAM)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "WEBGRAD_DEVICE": "cpu", "PYTHONPATH": os.path.join(root, "py")}
    proc = subprocess.run([sys.executable, str(program), json.dumps(values)], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert_close(np.array(json.loads(proc.stdout)), 2 * np.array(values, dtype=np.float32), what="x.grad")
