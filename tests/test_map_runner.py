"""An elementwise op's plan keeps its backend's runner for the operands' layout (ops/elementwise.py's
_Plan.run, Backend.map_runner): calls of one signature whose operands differ in strides, offsets or
the order of tensors and numbers each give torch's values, on fresh random inputs on both devices,
and a device replaced between calls gets runners of its own."""
import numpy as np
import pytest
import torch

import webgrad as wg
from conftest import assert_close, randn, tag, torch_tensor, wg_tensor

# name -> fn(m, v, c): calls over a (4, 4) matrix m, a (4,) vector v and a (4, 4) bool mask c; the
# layouts differ (contiguous, transposed, a row at each offset, broadcast) while the shapes repeat
CALLS = {
    "m + m.T": lambda m, v, c: m + m.T,
    "m.T + m": lambda m, v, c: m.T + m,
    "m + m": lambda m, v, c: m + m,
    "row 1 * row 3": lambda m, v, c: m[1] * m[3],
    "row 2 * row 0": lambda m, v, c: m[2] * m[0],
    "column 1 * v": lambda m, v, c: m[:, 1] * v,
    "m * v": lambda m, v, c: m * v,
    "v.expand * m.T": lambda m, v, c: v.expand(4, 4) * m.T,
    "2.5 - row 2": lambda m, v, c: 2.5 - m[2],
    "row 3 - 2.5": lambda m, v, c: m[3] - 2.5,
    "where(c, m.T, 1.5)": lambda m, v, c: torch_or_wg(m).where(c, m.T, 1.5),
    "where(c.T, -1.0, m)": lambda m, v, c: torch_or_wg(m).where(c.T, -1.0, m),
    "clamp(m.T, min=v)": lambda m, v, c: torch_or_wg(m).clamp(m.T, min=v),
    "m.T.relu()": lambda m, v, c: m.T.relu(),
}


def torch_or_wg(t):
    return torch if isinstance(t, torch.Tensor) else wg


def test_one_signature_many_layouts(device):
    m, v, c = randn(4, 4), randn(4), randn(4, 4) > 0
    ours_in = wg_tensor(m, device), wg_tensor(v, device), wg.tensor(c, device=device)
    theirs_in = torch_tensor(m), torch_tensor(v), torch.tensor(c)
    # twice over, the second time in reverse: each call finds the runners the others left
    for name in [*CALLS, *reversed(CALLS)]:
        assert_close(CALLS[name](*ours_in), CALLS[name](*theirs_in), what=name)


def test_gradients_through_layouts(device):
    """Nodes over the same layouts: the gradients reach each operand as torch's do."""
    m, v = randn(4, 4), randn(4)
    grads = []
    for make in (lambda x: wg_tensor(x, device, True), lambda x: torch_tensor(x, True)):
        a, b = make(m), make(v)
        ((a + a.T) * b + a[1] * a[3] - 2.5 * a.T.relu()).sum().backward()
        grads.append((a.grad, b.grad))
    for ours, theirs in zip(*grads):
        assert_close(ours, theirs, what="gradient")


def test_runner_follows_a_replaced_device(monkeypatch):
    """A plan made on one webgpu device runs its kernel on the device that holds the tensors now,
    not on the device its runner was made for."""
    from webgrad import backends
    from webgrad.backends.webgpu.backend import WebGPUBackend
    from webgrad.backends.webgpu.native import NativeDriver
    x, y = randn(6), randn(6)
    first = wg.tensor(x, device="webgpu") * wg.tensor(y, device="webgpu")
    np.testing.assert_allclose(first.numpy(), x * y, rtol=1e-6, err_msg=tag("on the first device"))
    replacement = WebGPUBackend(NativeDriver())
    monkeypatch.setitem(backends._backends, "webgpu", replacement)
    again = wg.tensor(x, device="webgpu") * wg.tensor(y, device="webgpu")
    assert replacement._map_kernels, tag("the replacement device ran no map kernel of its own")
    np.testing.assert_allclose(again.numpy(), x * y, rtol=1e-6, err_msg=tag("on the replacement device"))
    monkeypatch.undo()
    back = wg.tensor(y, device="webgpu") * wg.tensor(x, device="webgpu")
    np.testing.assert_allclose(back.numpy(), x * y, rtol=1e-6, err_msg=tag("on the first device again"))


@pytest.mark.parametrize("offset", [0, 1, 5])
def test_cpu_runner_reads_each_call_at_its_offset(offset):
    """The reference backend's runner (Backend.map_runner's default) places each call's storage and
    offset into the layout it keeps."""
    m = randn(8, 3)
    t = wg.tensor(m)
    for row in (offset, 7 - offset, offset):
        assert_close(t[row] * 2.0 - t[7 - row], torch_tensor(m)[row] * 2.0 - torch_tensor(m)[7 - row],
                     what=f"rows {row} and {7 - row}")
