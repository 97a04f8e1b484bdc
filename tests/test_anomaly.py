"""Errors that must reach Python as clear exceptions: NaN and Inf (wg.autograd.detect_anomaly,
against torch.autograd.detect_anomaly on CPU on the same programs), kernels that do not compile,
and a lost GPU device.

In backward both name the first Function whose gradient holds NaN (torch as 'SqrtBackward0',
webgrad as 'SqrtBackward'). webgrad also checks forward outputs, so a NaN or Inf made in forward is
reported at the op that made it; there torch's forward values are the oracle for which op that is.
"""
import re

import numpy as np
import pytest
import torch

import webgrad as wg
from webgrad import backends
from webgrad.backends.webgpu.backend import WebGPUBackend
from webgrad.backends.webgpu.kernels.common import fill
from webgrad.backends.webgpu.kernels.map import map_params
from webgrad.backends.webgpu.native import NativeDriver
from conftest import positive, rng, tag, to_numpy, torch_tensor, wg_tensor


def _message(run):
    with pytest.raises(RuntimeError) as info:
        run()
    return str(info.value)


def _function(message):
    """(name without torch's node number, output position) from an anomaly message."""
    found = re.search(r"Function '([A-Za-z]+?)\d*' returned (nan|inf) values in its (\d+)th output", message)
    assert found, tag(f"not an anomaly report: {message}")
    return found.group(1), int(found.group(3))


def _with_zero(n):
    x = positive(n)
    x[rng().integers(0, n)] = 0.0
    return x


@pytest.mark.parametrize("program", ["sqrt_at_zero", "norm_of_zeros", "zero_upstream"])
def test_backward_names_the_same_function_as_torch(device, program):
    # forward values are all finite; the first NaN appears in a backward rule's result
    n = int(rng().integers(3, 40))
    x = _with_zero(n)
    w = rng().standard_normal(n).astype(np.float32)

    def run(lib, make):
        t = make(x, True)
        if program == "sqrt_at_zero":        # d sqrt / dx = 0.5 / sqrt(0) = inf, times a zero upstream: nan
            loss = (lib.sqrt(t) * 0).sum()
        elif program == "norm_of_zeros":     # sqrt of a sum that is 0
            loss = ((t * 0) * (t * 0)).sum().sqrt() * 0
        else:                                # zeros reach sqrt's rule through a product and a sum
            loss = (lib.sqrt(t) * make(w, False)).sum() * 0
        loss.backward()

    with torch.autograd.detect_anomaly():
        want = _function(_message(lambda: run(torch, torch_tensor)))
    with wg.autograd.detect_anomaly():
        got = _function(_message(lambda: run(wg, lambda a, g: wg_tensor(a, device, g))))
    assert got == want, tag(f"webgrad reports {got}, torch {want}")


def test_forward_nan_names_the_op_that_made_it(device):
    # log of a negative, then 0/0, then an overflowing exp: each program's first non-finite value
    # is made by a different op; torch's forward values say which
    n = int(rng().integers(3, 40))
    a = rng().uniform(0.5, 2.0, n).astype(np.float32)
    bad = int(rng().integers(0, n))
    negative, zeros, huge = a.copy(), a.copy(), a.copy()
    negative[bad], zeros[bad], huge[bad] = -a[bad], 0.0, 200.0
    programs = {
        "log": (negative, lambda lib, t: lib.exp(lib.log(t) * 2)),
        "div": (zeros, lambda lib, t: (t * 3) / t),
        "exp": (huge, lambda lib, t: lib.log(lib.exp(t)) + 1),
    }
    for name, (values, program) in programs.items():
        first = _first_nonfinite_torch_op(values, program)
        with wg.autograd.detect_anomaly():
            message = _message(lambda: program(wg, wg_tensor(values, device, True)))
        assert "(in forward)" in message, tag(message)
        assert _function(message)[0].lower() == first, tag(f"{name}: {message}; torch's first: {first}")


def _first_nonfinite_torch_op(values, program):
    """The name of the torch function whose result is the program's first non-finite value."""
    found = []

    class Watch(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if not found and isinstance(out, torch.Tensor) and not torch.isfinite(out).all():
                name = func.__name__.strip("_")          # torch.log: log; Tensor.__mul__: mul
                found.append({"truediv": "div"}.get(name, name))
            return out

    with Watch(), torch.no_grad():
        program(torch, torch.from_numpy(values))
    assert found, tag("torch found no non-finite value: the program does not test anything")
    return found[0]


def test_finite_programs_run_unchanged(device):
    a, w = rng().standard_normal((8, 5)).astype(np.float32), rng().standard_normal((5, 3)).astype(np.float32)
    results = []
    for checked in (False, True):
        x = wg_tensor(a, device, True)
        with wg.autograd.detect_anomaly(check_nan=checked):
            loss = wg.log_softmax(x @ wg_tensor(w, device), 1).sum()
            loss.backward()
        results.append((loss.item(), to_numpy(x.grad)))
    assert results[0][0] == results[1][0], tag("loss")
    np.testing.assert_array_equal(results[0][1], results[1][1], err_msg=tag("gradient"))


def test_off_outside_the_context(device):
    x = wg_tensor(-positive(4), device)
    with wg.autograd.detect_anomaly():
        assert wg.autograd.is_anomaly_enabled()
    assert not wg.autograd.is_anomaly_enabled()
    assert np.isnan(to_numpy(wg.log(x))).all()   # no check, no error


# ---- kernels that do not compile ----
def test_broken_kernel_names_itself():
    runtime = wg.get_backend("webgpu").runtime
    name = f"undefined_{rng().integers(1 << 30)}"
    key = ("map", "broken", name)

    def source():
        return fill("map", map_params(0, (), 0), compute="f32", bindings="@group(0) @binding(1) var<storage, "
                    "read_write> out: array<f32>;", body=f"    out[i] = {name};")
    for _ in range(2):   # a failed compile is not cached as a pipeline: it fails the same way again
        message = _message(lambda: runtime.pipeline(key, source, bindings=("read_write",)))
        assert str(key) in message and "shaders/map.wgsl" in message, tag(message)
        assert name in message, tag(f"no compiler diagnostic in: {message}")
    a = rng().standard_normal(5).astype(np.float32)
    np.testing.assert_allclose((wg.tensor(a, device="webgpu") * 2).numpy(), a * 2, err_msg=tag("afterwards"))


# ---- a lost device ----
def test_lost_device_raises_clearly(monkeypatch):
    # a device of its own, standing in for the module-level one while the test runs
    backend = WebGPUBackend(NativeDriver())
    monkeypatch.setitem(backends._backends, "webgpu", backend)
    a = rng().standard_normal(64).astype(np.float32)
    x = wg.tensor(a, device="webgpu")
    np.testing.assert_allclose((x + 1).numpy(), a + 1, err_msg=tag("before the loss"))
    backend.driver._device.destroy()
    for op in (lambda: (x * 2).numpy(), lambda: x.sum().item(), lambda: wg.tensor(a, device="webgpu"),
               lambda: wg.randn(1000, device="webgpu").numpy()):
        message = _message(op)
        assert message.startswith("webgpu: the GPU device was lost: ") and "restart" in message, tag(message)
    monkeypatch.undo()
    np.testing.assert_allclose((wg.tensor(a, device="webgpu") + 1).numpy(), a + 1, err_msg=tag("other devices"))
