"""webgrad.profiler: every dispatch of the profiled code is timed once and named by its kernel and
family; ranges label them; the profiled program computes what it computes unprofiled."""
import numpy as np
import pytest

import webgrad as wg
from webgrad import profiler
from conftest import cross_entropy_step


@pytest.fixture(params=["timestamps", "wall"])
def measure(request, monkeypatch):
    """Both ways of timing: timestamp queries (lavapipe has them) and, as on an adapter without
    the feature, each dispatch submitted alone and waited for."""
    driver = wg.get_backend("webgpu").runtime.driver
    if request.param == "wall":
        monkeypatch.setattr(driver, "features", frozenset(), raising=False)
        return profiler.WALL
    if "timestamp-query" not in driver.features:
        pytest.fail("the local adapter (lavapipe) offers timestamp-query: the device should have been granted it")
    return profiler.TIMESTAMPS


def test_each_dispatch_timed_once_by_kernel_and_family(measure):
    rng = np.random.default_rng()
    a_np, b_np = rng.standard_normal((33, 17), dtype=np.float32), rng.standard_normal((17, 9), dtype=np.float32)
    a, b = wg.tensor(a_np, device="webgpu"), wg.tensor(b_np, device="webgpu")
    adds = int(rng.integers(2, 6))
    with profiler.profile() as prof:
        c = a
        for _ in range(adds):
            c = c + 1.0
        d = (c @ b).sum()
    assert prof.measure == measure
    kernels = {row.key: row for row in prof.key_averages()}
    assert kernels["map.add"].count == adds
    assert sum(row.count for row in kernels.values()) == len(prof.events)
    families = {row.key: row.count for row in prof.key_averages(group_by="family")}
    assert families["map"] == adds and families["matmul"] >= 1 and families["reduce"] >= 1
    assert all(e.ns > 0 for e in prof.events)
    assert prof.total_us() == pytest.approx(sum(row.gpu_time_total for row in kernels.values()))
    np.testing.assert_allclose(d.item(), ((a_np + adds) @ b_np).sum(), rtol=1e-4)


def test_ranges_and_table():
    x = wg.randn(64, 64, device="webgpu")
    with profiler.profile() as prof:
        with profiler.record_function("forward"):
            y = x.relu() * 2.0
        with profiler.record_function("loss"):
            y.sum().item()
    ranges = {row.key: row.count for row in prof.key_averages(group_by="range")}
    assert ranges["forward"] == 2 and ranges["loss"] >= 1
    table = prof.key_averages().table(sort_by="cuda_time_total", row_limit=1)
    assert table.splitlines()[0].split()[:3] == ["Kernel", "GPU", "total"]
    assert len([line for line in table.splitlines() if line.startswith(("map", "reduce"))]) == 1
    assert table.endswith(f"Measured: {prof.measure}.")


def test_a_replayed_step_is_profiled_whole():
    model = wg.nn.Sequential(wg.nn.Linear(8, 16), wg.nn.Tanh(), wg.nn.Linear(16, 3)).to("webgpu")
    opt = wg.optim.Adam(model.parameters(), lr=0.01)
    x, y = wg.randn(5, 8, device="webgpu"), wg.randint(0, 3, (5,), device="webgpu")
    step = wg.jit(cross_entropy_step(model, opt, []))
    for _ in range(3):
        step(x, y)
    runtime = wg.get_backend("webgpu").runtime
    (program,) = step._programs.values()
    with profiler.profile() as prof:
        step(x, y)
    # the recording alone: the inputs are bound where it read its own, the loss handed over in its buffer
    assert len(prof.events) == len(program.recording.dispatches)
    assert {e.family for e in prof.events} >= {"matmul", "optim", "loss"}
    assert runtime.profiler is None


def test_misuse_is_refused():
    with profiler.profile():
        with pytest.raises(RuntimeError, match="already open"), profiler.profile():
            pass
    with pytest.raises(ValueError, match="group_by"):
        profiler.profile().key_averages(group_by="shape")
    with pytest.raises(ValueError, match="sort_by"):
        profiler.profile().key_averages().table(sort_by="flops")
    with pytest.raises(TypeError, match="ProfilerActivity"):
        profiler.profile(activities=["cuda"])
    with profiler.record_function("nothing open"):   # outside a profile a range does nothing
        pass
