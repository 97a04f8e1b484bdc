"""Tests for the native WebGPU driver (wgpu-py), exercised directly, against numpy.

The driver only translates: these tests hand it what the runtime would (word-aligned copies, whole
params blocks, bind group ids); the runtime's policy is tested in test_runtime_policy.py.
"""

import itertools
import os
import subprocess
import sys

import numpy as np
import pytest
import wgpu

from webgrad.backends.webgpu.native import NativeDriver
from webgrad.backends.webgpu.runtime import ARENA_MIN_BYTES, PARAMS_BYTES, RAISED_LIMITS, REPORTED_LIMITS

# out[i] = a[i] * scale + b[i] over the segment [base, base + n); params: scale (f32 bits), n, base.
AXPB = """
@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x >= p[1]) { return; }
    let i = p[2] + gid.x;
    out[i] = a[i] * bitcast<f32>(p[0]) + b[i];
}
"""
AXPB_BINDINGS = ("read", "read", "read_write")


@pytest.fixture(scope="module")
def drv():
    driver = NativeDriver()   # `make test` installs lavapipe, so an adapter must exist
    driver.create_arena(ARENA_MIN_BYTES)
    return driver


_group_ids = itertools.count(1)


@pytest.fixture
def rng():
    return np.random.default_rng()


@pytest.fixture(scope="module")
def axpb(drv):
    return drv.create_pipeline("axpb", AXPB, "main", AXPB_BINDINGS)


def f32_buffer(drv, x):
    h = drv.create_buffer(x.nbytes)
    drv.write_buffer(h, 0, x.tobytes())
    return h


def read_f32(drv, h, n):
    return np.frombuffer(bytes(drv.read_buffers([(h, 0, 4 * n)])), dtype=np.float32)


def pack_params(blocks):
    """blocks: list of (scale, n, base) -> (params blob, offsets), one PARAMS_BYTES block each."""
    blob = bytearray(PARAMS_BYTES * len(blocks))
    for k, (scale, n, base) in enumerate(blocks):
        blob[k * PARAMS_BYTES : k * PARAMS_BYTES + 12] = (
            np.float32(scale).tobytes() + np.array([n, base], dtype=np.uint32).tobytes()
        )
    return bytes(blob), [k * PARAMS_BYTES for k in range(len(blocks))]


def run_segments(drv, pipeline, a, b, out, n, segments, rng):
    """Dispatch one kernel launch per segment in a single submit, through a new bind group; return
    the parameter blocks and the group's id."""
    blocks = [(rng.standard_normal(), hi - lo, lo) for lo, hi in segments]
    params, offsets = pack_params(blocks)
    group = next(_group_ids)
    dispatches = [(pipeline, group, off, (-(-(hi - lo) // 64), 1, 1)) for off, (lo, hi) in zip(offsets, segments)]
    drv.submit(params, [(group, pipeline, (a, b, out))], dispatches)
    return blocks, group


def expected(a, b, blocks, prev):
    want = prev.copy()
    for scale, n, base in blocks:
        want[base : base + n] = a[base : base + n] * np.float32(scale) + b[base : base + n]
    return want


def random_segments(rng, n, count):
    cuts = np.sort(rng.choice(np.arange(1, n), size=count - 1, replace=False))
    bounds = [0, *cuts.tolist(), n]
    return list(zip(bounds[:-1], bounds[1:]))


def test_info_and_limits(drv):
    assert set(drv.info) >= {"name", "vendor", "backend", "adapter_type", "driver"}
    assert drv.is_software == (drv.info["adapter_type"] == "CPU")
    lim = drv.limits
    assert set(lim) == set(REPORTED_LIMITS)
    # The raised limits are the adapter's own (the same adapter: the one adapter of this machine).
    adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    for name in RAISED_LIMITS:
        assert lim[name] == adapter.limits[name.replace("_", "-")], name
    # At least the WebGPU defaults (we only ever raise them).
    assert lim["max_storage_buffer_binding_size"] >= 128 << 20
    assert lim["max_buffer_size"] >= 256 << 20
    assert lim["max_compute_workgroups_per_dimension"] >= 65535
    assert lim["max_storage_buffers_per_shader_stage"] >= 8
    assert lim["max_compute_invocations_per_workgroup"] >= 256
    assert lim["max_compute_workgroup_storage_size"] >= 16384
    assert PARAMS_BYTES % lim["min_storage_buffer_offset_alignment"] == 0


@pytest.mark.parametrize("size", [4, 8, 1000, 4100])
def test_write_read_round_trip(drv, rng, size):
    h = drv.create_buffer(size)
    data = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
    drv.write_buffer(h, 0, data)
    assert bytes(drv.read_buffers([(h, 0, size)])) == data
    # Word-aligned pieces at word-aligned offsets, as the runtime sends them.
    model = bytearray(data)
    for _ in range(20):
        off = 4 * int(rng.integers(0, size // 4))
        n = 4 * int(rng.integers(0, (size - off) // 4 + 1))
        chunk = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        if n:   # wgpu-py refuses an empty write, which the runtime never sends
            drv.write_buffer(h, off, [chunk, bytearray(chunk), memoryview(chunk)][n % 3])
        model[off : off + n] = chunk
        ro = 4 * int(rng.integers(0, size // 4))
        rn = 4 * int(rng.integers(1, (size - ro) // 4 + 1))
        assert bytes(drv.read_buffers([(h, ro, rn)])) == bytes(model[ro : ro + rn])
    drv.destroy_buffer(h, [])


def test_one_read_of_several_regions(drv, rng):
    """Regions of several buffers (one of them twice), back to back in one read, as the runtime
    reads a value with its index error words."""
    datas = [rng.integers(0, 256, 4 * int(rng.integers(1, 300)), dtype=np.uint8).tobytes() for _ in range(3)]
    handles = [drv.create_buffer(len(d)) for d in datas]
    for h, d in zip(handles, datas):
        drv.write_buffer(h, 0, d)
    regions, want = [], b""
    for k in [0, 1, 2, 0]:
        offset = 4 * int(rng.integers(0, len(datas[k]) // 4))
        size = 4 * int(rng.integers(1, (len(datas[k]) - offset) // 4 + 1))
        regions.append((handles[k], offset, size))
        want += datas[k][offset : offset + size]
    assert bytes(drv.read_buffers(regions)) == want, regions
    for h in handles:
        drv.destroy_buffer(h, [])


def test_write_accepts_typed_memoryview(drv, rng):
    x = rng.standard_normal(37).astype(np.float32)
    h = drv.create_buffer(x.nbytes)
    drv.write_buffer(h, 0, memoryview(x))
    np.testing.assert_array_equal(read_f32(drv, h, 37), x)
    drv.destroy_buffer(h, [])


def test_kernel_many_dispatches_one_submit(drv, rng, axpb):
    n = 5000
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    prev = rng.standard_normal(n).astype(np.float32)
    ha, hb, hout = f32_buffer(drv, a), f32_buffer(drv, b), f32_buffer(drv, prev)
    # 40 launches, each with its own params block, covering disjoint segments of `out`.
    blocks, group = run_segments(drv, axpb, ha, hb, hout, n, random_segments(rng, n, 40), rng)
    np.testing.assert_allclose(read_f32(drv, hout, n), expected(a, b, blocks, prev), rtol=1e-6, atol=1e-6)
    for h in (ha, hb, hout):
        drv.destroy_buffer(h, [group] if h == ha else [])


def test_kernel_different_buffers_in_one_submit(drv, rng, axpb):
    """Same pipeline, several buffer triples, params blocks in a shuffled order."""
    n = 300
    sets = []
    for _ in range(4):
        a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
        sets.append((a, b, f32_buffer(drv, a), f32_buffer(drv, b), drv.create_buffer(4 * n)))
    scales = rng.standard_normal(len(sets))
    params, offsets = pack_params([(s, n, 0) for s in scales])
    groups = [next(_group_ids) for _ in sets]
    order = rng.permutation(len(sets))
    dispatches = [(axpb, groups[k], offsets[k], (-(-n // 64), 1, 1)) for k in order]
    drv.submit(params, [(group, axpb, handles[2:]) for group, handles in zip(groups, sets)], dispatches)
    for (a, b, *handles), s, group in zip(sets, scales, groups):
        np.testing.assert_allclose(read_f32(drv, handles[2], n), a * np.float32(s) + b, rtol=1e-6, atol=1e-6)
        drv.destroy_buffer(handles[0], [group])
        for h in handles[1:]:
            drv.destroy_buffer(h, [])


def test_invalid_wgsl_raises_naming_label(drv):
    bad = "@compute @workgroup_size(1) fn main() { let x: f32 = 1u; }"
    with pytest.raises(RuntimeError) as info:
        drv.create_pipeline("my_broken_kernel", bad, "main", ())
    msg = str(info.value)
    assert "my_broken_kernel" in msg and "expected to be `f32`" in msg


@pytest.mark.parametrize(
    "label, entry, bindings",
    [
        ("wrong_access", "main", ("read", "read", "read")),  # shader writes `out`, layout says read-only
        ("missing_binding", "main", ("read", "read")),  # shader uses @binding(3), layout lacks it
        ("wrong_entry", "nope", AXPB_BINDINGS),
    ],
)
def test_pipeline_validation_errors_raise(drv, label, entry, bindings):
    with pytest.raises(RuntimeError, match=label):
        drv.create_pipeline(label, AXPB, entry, bindings)


def test_driver_usable_after_errors(drv, rng, axpb):
    with pytest.raises(RuntimeError):
        drv.create_pipeline("garbage", "this is not wgsl", "main", ())
    n = 100
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    ha, hb, hout = f32_buffer(drv, a), f32_buffer(drv, b), drv.create_buffer(4 * n)
    blocks, group = run_segments(drv, axpb, ha, hb, hout, n, [(0, n)], rng)
    np.testing.assert_allclose(read_f32(drv, hout, n), expected(a, b, blocks, np.zeros(n, np.float32)), rtol=1e-6)
    for h in (ha, hb, hout):
        drv.destroy_buffer(h, [group] if h == ha else [])


def test_bind_groups_are_reused_until_dropped(drv, rng, axpb):
    """A group made once serves later submits, named by its id alone, until its buffer goes."""
    n = 256
    b = rng.standard_normal(n).astype(np.float32)
    hb = f32_buffer(drv, b)
    for _ in range(3):
        a = rng.standard_normal(n).astype(np.float32)
        ha, hout = f32_buffer(drv, a), drv.create_buffer(4 * n)
        blocks, group = run_segments(drv, axpb, ha, hb, hout, n, [(0, n)], rng)
        want = expected(a, b, blocks, np.zeros(n, np.float32))
        np.testing.assert_allclose(read_f32(drv, hout, n), want, rtol=1e-6, atol=1e-6)
        blocks = [(rng.standard_normal(), n, 0)]
        drv.submit(pack_params(blocks)[0], [], [(axpb, group, 0, (n // 64, 1, 1))])
        np.testing.assert_allclose(read_f32(drv, hout, n), expected(a, b, blocks, want), rtol=1e-6, atol=1e-6)
        others = set(drv._bind_groups) - {group}
        drv.destroy_buffer(ha, [group])
        assert set(drv._bind_groups) == others
        drv.destroy_buffer(hout, [])
    drv.destroy_buffer(hb, [])


def test_a_new_arena(drv, rng, axpb):
    """Parameters past the old arena's end reach the kernels through groups made on the new one."""
    n = 4096
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    ha, hb, hout = f32_buffer(drv, a), f32_buffer(drv, b), drv.create_buffer(4 * n)
    old = drv._arena.size
    drv.forget_bind_groups()
    drv.create_arena(4 * old)
    assert drv._arena.size == 4 * old and not drv._bind_groups
    segments = random_segments(rng, n, 3 * old // PARAMS_BYTES)   # blocks far past the old arena's end
    blocks, _ = run_segments(drv, axpb, ha, hb, hout, n, segments, rng)
    np.testing.assert_allclose(read_f32(drv, hout, n), expected(a, b, blocks, np.zeros(n, np.float32)),
                               rtol=1e-6, atol=1e-6)
    drv.forget_bind_groups()
    drv.create_arena(old)
    for h in (ha, hb, hout):
        drv.destroy_buffer(h, [])


def test_sync(drv, rng, axpb):
    n = 1 << 16
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    ha, hb, hout = f32_buffer(drv, a), f32_buffer(drv, b), drv.create_buffer(4 * n)
    blocks, group = run_segments(drv, axpb, ha, hb, hout, n, [(0, n)], rng)
    drv.sync()
    np.testing.assert_allclose(read_f32(drv, hout, n), expected(a, b, blocks, np.zeros(n, np.float32)), rtol=1e-6)
    for h in (ha, hb, hout):
        drv.destroy_buffer(h, [group] if h == ha else [])


def test_no_adapter_message():
    # Forcing a backend that native wgpu never ships ("WebGPU") leaves no adapter.
    code = (
        "from webgrad.backends.webgpu.native import NativeDriver\n"
        "try:\n    NativeDriver()\nexcept RuntimeError as e:\n    print('ERR', e)\n"
    )
    env = dict(os.environ, WGPU_BACKEND_TYPE="WebGPU")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert "ERR" in out.stdout and "no WebGPU adapter" in out.stdout and "mesa-vulkan-drivers" in out.stdout
