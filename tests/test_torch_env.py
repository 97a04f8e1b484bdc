"""What programs ask of `torch` itself, beside tensors: grad-mode contexts and decorators, devices,
accelerator queries, dtype names. Each grad-mode case runs the same sequence on torch and webgrad."""
import pickle

import numpy as np
import pytest
import torch

import webgrad as wg
from conftest import rng, tag


def _grad_modes(lib):
    """requires_grad of x * 2 at each point of a sequence of grad-mode uses, on lib (torch or webgrad)."""
    x = lib.ones(3, requires_grad=True)
    seen = []

    def probe():
        seen.append((x * 2).requires_grad)

    @lib.no_grad
    def bare_no_grad():
        probe()

    @lib.no_grad()
    def called_no_grad():
        probe()

    @lib.inference_mode()
    def inference():
        probe()

    @lib.inference_mode(False)
    def not_inference():
        probe()

    @lib.set_grad_enabled(False)
    def decorated_off():
        probe()

    probe()                              # decorating changed nothing outside
    bare_no_grad(); called_no_grad(); inference(); not_inference(); decorated_off()  # noqa: E702
    probe()
    with lib.no_grad():
        probe()
        with lib.enable_grad():
            probe()
        probe()
    lib.set_grad_enabled(False)          # a plain call takes effect at once
    probe()
    with lib.set_grad_enabled(True):
        probe()
    probe()
    lib.set_grad_enabled(True)
    with lib.inference_mode():
        probe()
    probe()
    return seen


def test_grad_modes_as_torch():
    assert _grad_modes(wg) == _grad_modes(torch)


def test_devices():
    assert wg.device("cpu") == "cpu" == wg.device(wg.device("cpu"))
    assert repr(wg.device("webgpu")) == "device(type='webgpu')"
    assert wg.device("webgpu:0").index == 0 and wg.device("webgpu:0").type == "webgpu"
    assert pickle.loads(pickle.dumps(wg.device("cpu"))) == wg.device("cpu")
    a = rng().standard_normal(4).astype(np.float32)
    for name in ("cpu", "webgpu"):
        x = wg.tensor(a, device=wg.device(name))
        assert x.device == wg.device(name) and x.device == name and x.device.type == name, tag(name)
        assert {x.device: 1}[name] == 1   # devices index dicts as their names
        np.testing.assert_array_equal(x.to(wg.device("cpu")).numpy(), a)
    assert torch.device("cpu").type == wg.device("cpu").type


def test_accelerator_queries():
    assert wg.cuda.is_available() is False and wg.cuda.device_count() == 0
    assert wg.backends.mps.is_available() is False and wg.backends.mps.is_built() is False
    wg.backends.cudnn.benchmark = True            # programs set these; nothing changes
    wg.backends.cuda.matmul.allow_tf32 = False
    wg.cuda.manual_seed_all(0)
    assert wg.accelerator.is_available() is True  # the test machines have a (software) adapter
    assert wg.accelerator.current_accelerator() == "webgpu"
    # the common idiom picks a device webgrad has
    dev = "cuda" if wg.cuda.is_available() else "mps" if wg.backends.mps.is_available() else "cpu"
    assert wg.ones(2, device=dev).device == "cpu"


@pytest.mark.parametrize("name", ["cuda", "cuda:0", "mps"])
def test_devices_webgrad_lacks_say_so(name):
    with pytest.raises(RuntimeError, match="webgpu"):
        wg.ones(2, device=name)


def test_dtype_names():
    assert wg.long is wg.int64 is wg.int32 and wg.double is wg.float64 and wg.half is wg.float16
    assert wg.get_default_dtype() is wg.float32 and wg.is_tensor(wg.ones(1)) and not wg.is_tensor([1])
    assert wg.is_floating_point(wg.ones(1)) and not wg.is_floating_point(wg.ones(1, dtype=wg.int32))
    for device in ("cpu", "webgpu"):   # float16 is held (tests/test_float16.py); bfloat16 nowhere
        with pytest.raises(TypeError, match="bfloat16.*float32"):
            wg.zeros(3, dtype=wg.bfloat16, device=device)
    with pytest.raises(TypeError, match="float64"):
        wg.zeros(3, dtype=wg.float64, device="webgpu")
    with pytest.raises(TypeError):
        wg.set_default_dtype(wg.float64)


def test_compile_returns_its_argument():
    model = wg.nn.Linear(2, 3)
    assert wg.compile(model) is model
    assert wg.compile(mode="reduce-overhead")(len) is len
