"""The WebGPU runtime's buffer pool (runtime.py), random work through the whole policy, and the
policy on the real device through the native driver, with results compared against NumPy
(runtime_fakes.FakeDriver checks every call).
"""
import numpy as np
import pytest

from webgrad.backends.webgpu import bind_groups as bind_groups_module, runtime as runtime_module
from webgrad.backends.webgpu.native import NativeDriver
from webgrad.backends.webgpu.runtime import MAX_QUEUED, PARAMS_BYTES, Runtime, f32_bits
from conftest import rng, tag
from runtime_fakes import kernel
from test_native_driver import AXPB   # out[i] = a[i] * scale + b[i] over a segment


# ---- the buffer pool ----
def test_a_full_pool_destroys_the_sizes_asked_for_least_recently(fake_runtime):
    driver, runtime = fake_runtime()
    pipeline = kernel(runtime)
    small, middle, large = 1024, 4096, 16384
    a = runtime.alloc(small)
    b = runtime.alloc(middle)
    c1, c2 = runtime.alloc(large), runtime.alloc(large)
    runtime.dispatch(pipeline, [b, c1], [], 1)   # groups that go with b and c1
    runtime.dispatch(pipeline, [a, b], [], 1)
    a2 = runtime.alloc(small)                    # small is now the size asked for last
    order = [b.handle, max(c1.handle, c2.handle)]
    runtime.pool_limit = 2 * small + large       # room for both small ones and one large one
    del a, b, c1, c2, a2
    runtime.flush()
    destroyed = [entry[1] for entry in driver.logged("destroy")]
    # middle goes first, then the larger size's highest buffer (the one alloc would take last), until the pool fits
    assert destroyed == order, tag(f"destroyed {destroyed}, buffers {order}")
    assert runtime.memory_stats()["pool_bytes"] == 2 * small + large
    assert set(driver.bind_groups) == set(runtime.bind_groups.ids.values()) == set(), tag("both groups went")


def test_a_loop_reuses_its_working_set_past_the_least_pool_limit(fake_runtime, monkeypatch):
    """A step whose buffers add up to more than POOL_LIMIT makes them once: the pool keeps up to
    the most bytes ever live, so later steps create and destroy none."""
    g = rng()
    monkeypatch.setattr(runtime_module, "POOL_LIMIT", 64 << 10)
    driver, runtime = fake_runtime()
    pipeline = kernel(runtime)
    sizes = [int(s) * 4096 for s in g.integers(4, 9, int(g.integers(6, 12)))]   # well over 64 KiB in all

    def step():
        held = [runtime.alloc(size) for size in sizes]
        for i in range(1, len(held)):
            runtime.dispatch(pipeline, [held[i], held[i - 1]], [], 1)
        del held   # all freed, as a step's activations are
        runtime.flush()

    step()
    buffers = set(driver.buffers)
    for _ in range(3):
        step()
    assert set(driver.buffers) == buffers and not driver.logged("destroy"), tag(f"sizes {sizes}")


def test_a_step_gets_the_same_buffers_whatever_order_it_freed_them_in(fake_runtime):
    """The pool hands out its lowest buffer of a size first, so a loop asking for the same sizes each
    step binds the same buffers each step and makes no new bind groups after the first (handed out
    last-freed-first, they rotated with the order a step happened to free them in)."""
    g = rng()
    driver, runtime = fake_runtime()
    pipeline = kernel(runtime)
    sizes = [int(s) * 1024 for s in g.integers(1, 3, int(g.integers(6, 12)))]   # a few sizes, repeated

    def step():
        held = [runtime.alloc(size) for size in sizes]
        for i in range(1, len(held)):
            runtime.dispatch(pipeline, [held[i], held[i - 1]], [], 1)
        handles = [storage.handle for storage in held]
        for i in g.permutation(len(held)):
            held[i] = None   # freed in a random order
        runtime.flush()
        return handles

    first = step()
    groups = len(runtime.bind_groups)
    for _ in range(4):
        assert step() == first, tag(f"sizes {sizes}")
    assert len(runtime.bind_groups) == groups, tag("new bind groups after the first step")


def test_freed_buffers_are_reused_once_enough_wait_for_a_submit(fake_runtime, monkeypatch):
    """A chain of large ops, each freeing its input: once RELEASED_SUBMIT_BYTES wait, an allocation
    submits early and reuses them, instead of a new buffer per op until the queue is full."""
    g = rng()
    waiting = int(g.integers(2, 5))
    size = 4096 * int(g.integers(1, 4))
    monkeypatch.setattr(runtime_module, "RELEASED_SUBMIT_BYTES", waiting * size)
    driver, runtime = fake_runtime()
    pipeline = kernel(runtime)
    before = len(driver.buffers)
    x = runtime.alloc(size)
    for _ in range(MAX_QUEUED - 2):
        y = runtime.alloc(size)
        runtime.dispatch(pipeline, [y, x], [], 1)
        x = y
    made = len(driver.buffers) - before
    assert made <= waiting + 2, tag(f"{made} buffers for a chain of {MAX_QUEUED - 2} ops")


# ---- everything at once, at random ----
def test_random_work_keeps_the_driver_consistent(fake_runtime, monkeypatch):
    """Random allocations, frees, dispatches, recordings, replays, reads and pool trims with a small
    arena, bind-group limit and pool: every call passes FakeDriver's checks, and after every flush
    the driver holds exactly the bind groups and buffers the runtime accounts for."""
    g = rng()
    monkeypatch.setattr(runtime_module, "ARENA_MIN_BYTES", int(g.choice([2, 4])) * PARAMS_BYTES)
    monkeypatch.setattr(runtime_module, "MAX_QUEUED", int(g.integers(3, 12)))
    driver, runtime = fake_runtime()
    runtime.bind_groups.kept = int(g.integers(3, 12))
    runtime.pool_limit = int(g.integers(1, 6)) * 4096
    pipelines = [kernel(runtime, bindings, name=str(i)) for i, bindings in
                 enumerate([("read_write",), ("read_write", "read"), ("read_write", "read", "read")])]
    live, recordings, values = [], [], {}
    for step in range(400):
        op = g.integers(0, 10) if len(live) >= 3 else 0
        if op < 2:
            storage = runtime.alloc(int(g.integers(1, 3000)))
            data = g.integers(0, 256, int(g.integers(1, storage.nbytes + 1)), dtype=np.uint8).tobytes()
            runtime.write(storage, data)
            live.append(storage)
            values[storage] = data
        elif op < 4:
            storage = live.pop(int(g.integers(0, len(live))))
            values.pop(storage)
        elif op < 7:
            pipeline = pipelines[int(g.integers(0, 3))]
            picked = [live[int(i)] for i in g.integers(0, len(live), len(driver.pipelines[pipeline]))]
            runtime.dispatch(pipeline, picked, [int(step)], int(g.integers(1, 70000)))
        elif op == 7:
            if recordings and g.integers(0, 2):
                runtime.replay(recordings[int(g.integers(0, len(recordings)))])
            else:
                runtime.start_recording()
                for _ in range(int(g.integers(1, 30))):
                    runtime.dispatch(pipelines[0], [live[int(g.integers(0, len(live)))]], [int(step)], 1)
                recordings.append(runtime.stop_recording())
        elif op == 8:
            storage = live[int(g.integers(0, len(live)))]
            n = len(values[storage])
            assert bytes(runtime.read(storage, 0, n)) == values[storage], tag(f"step {step}")
        else:
            runtime.empty_pool() if g.integers(0, 4) == 0 else runtime.flush()
        if op >= 8:   # flushed
            assert set(driver.bind_groups) == set(runtime.bind_groups.ids.values()), tag(f"step {step}")
            stats = runtime.memory_stats()
            assert len(driver.buffers) == stats["live_buffers"] + stats["pool_buffers"], tag(f"step {step}")
    assert driver.logged("destroy") and driver.logged("forget") and len(driver.arenas) > 1, \
        tag("the run did not reach every policy")


# ---- the same policy on the real device ----
@pytest.fixture(scope="module")
def native():
    """A runtime over a native driver of its own (its bind groups and arena start afresh)."""
    return Runtime(NativeDriver())


def _consistent(runtime):
    assert set(runtime.driver._bind_groups) == set(runtime.bind_groups.ids.values()), tag("driver and runtime groups")
    stats = runtime.memory_stats()
    assert len(runtime.driver._buffers) == stats["live_buffers"] + stats["pool_buffers"], tag(str(stats))


def test_unaligned_reads_and_writes_on_the_device(native):
    g = rng()
    for _ in range(10):
        n = int(g.integers(1, 700))
        storage = native.alloc(n)
        model = bytearray(g.integers(0, 256, storage.nbytes, dtype=np.uint8).tobytes())
        native.write(storage, model)
        for _ in range(8):
            k = int(g.integers(0, n + 1))
            data = g.integers(0, 256, k, dtype=np.uint8).tobytes()
            native.write(storage, [data, bytearray(data), memoryview(data)][k % 3])
            model[:k] = data
            offset = int(g.integers(0, storage.nbytes))
            size = int(g.integers(0, storage.nbytes - offset + 1))
            got = native.read(storage, offset, size)
            assert len(got) == size and bytes(got) == bytes(model[offset: offset + size]), tag(f"{offset}+{size}")
        assert bytes(native.read(storage, 0, storage.nbytes)) == bytes(model)
    _consistent(native)


def test_kernels_through_a_growing_arena_and_evicted_groups(native):
    g = rng()
    n = 8192
    a, b = g.standard_normal(n).astype(np.float32), g.standard_normal(n).astype(np.float32)
    pipeline = native.pipeline(("policy_axpb",), lambda: AXPB, bindings=("read", "read", "read_write"))
    sa, sb = native.alloc(a.nbytes), native.alloc(b.nbytes)
    native.write(sa, a.tobytes())
    native.write(sb, b.tobytes())

    def dispatch(out, scale, lo, hi):
        native.dispatch(pipeline, [sa, sb, out], [f32_bits(scale), hi - lo, lo], -(-(hi - lo) // 64))

    def check(out, want, what):
        got = np.frombuffer(bytes(native.read(out, 0, 4 * n)), np.float32)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, err_msg=tag(what))

    # a recording of more parameter blocks than the arena holds, each over its own segment
    size = 2 * native._arena_bytes // PARAMS_BYTES + int(g.integers(1, 50))
    cuts = np.sort(g.choice(np.arange(1, n), size - 1, replace=False))
    segments = list(zip([0, *cuts.tolist()], [*cuts.tolist(), n]))
    scales = g.standard_normal(size).astype(np.float32)
    out = native.alloc(4 * n)
    native.start_recording()
    for (lo, hi), scale in zip(segments, scales):
        dispatch(out, float(scale), lo, hi)
    recording = native.stop_recording()
    want = np.concatenate([a[lo:hi] * s + b[lo:hi] for (lo, hi), s in zip(segments, scales)])
    check(out, want, "recorded")
    arena = native._arena_bytes
    native.write(out, bytes(4 * n))
    dispatch(out, 2.0, 0, n)                 # eager work before the replay: it shares no submit
    native.replay(recording)
    assert native._arena_bytes > arena, tag("the arena grew")
    check(out, want, "replayed on a grown arena")
    _consistent(native)

    # outputs in ever new combinations: past `kept` the groups start over (the recording's too)
    kept = native.bind_groups.kept = int(g.integers(4, 10))
    outs = []
    for round_ in range(12):
        outs.append(native.alloc(4 * n))
        scale = float(g.standard_normal())
        dispatch(outs[-1], scale, 0, n)
        check(outs[-1], a * np.float32(scale) + b, f"round {round_}")
        assert len(native.driver._bind_groups) <= kept, tag(f"round {round_}")
        _consistent(native)
    native.bind_groups.kept = bind_groups_module.BIND_GROUPS_KEPT
    del outs
    native.empty_pool()      # their groups go with them
    _consistent(native)
    native.replay(recording)
    check(out, want, "replayed after the groups were evicted")
    _consistent(native)
