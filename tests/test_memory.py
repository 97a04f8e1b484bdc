"""GPU memory on the webgpu device: buffers go back when tensors die, the pool of freed buffers is
bounded, and training holds a flat amount of memory.

wg.memory_stats() is the runtime's account; the native driver's own table of GPU buffers is the
independent check: every buffer it holds is live (a tensor's) or pooled, none is lost track of.
The autograd graph is freed by reference counting alone (the garbage collector is off in these
tests), so its GPU buffers go back as soon as its last tensor dies.
"""
import gc

import numpy as np
import pytest

import webgrad as wg
from webgrad import nn, optim
from conftest import randn, rng, tag

GPU = "webgpu"


@pytest.fixture
def runtime():
    runtime = wg.get_backend(GPU).runtime
    runtime.flush()
    return runtime


@pytest.fixture
def no_gc():
    gc.collect()
    gc.disable()
    yield
    gc.enable()


def stats(runtime):
    """memory_stats after the queued work is submitted (freed buffers reach the pool then), checked
    against the driver's buffers."""
    runtime.flush()
    s = wg.memory_stats(GPU)
    held = len(runtime.driver._buffers)
    assert held == s["live_buffers"] + s["pool_buffers"], tag(f"driver holds {held} buffers, runtime counts {s}")
    assert s["pool_bytes"] <= s["pool_limit"] and s["peak_bytes"] >= s["live_bytes"], tag(str(s))
    return s


def test_stats_follow_a_tensor(runtime, no_gc):
    before = stats(runtime)
    assert {"live_buffers", "live_bytes", "pool_bytes", "peak_bytes"} <= set(before)
    n = int(rng().integers(70_000, 300_000))
    x = wg.zeros(n, device=GPU)
    during = stats(runtime)
    assert during["live_buffers"] == before["live_buffers"] + 1, tag(str(during))
    grown = during["live_bytes"] - before["live_bytes"]
    assert 4 * n <= grown <= 4 * n * 5 // 4 + 256, tag(f"{grown} bytes for {n} floats")   # a size class
    assert during["peak_bytes"] >= during["live_bytes"]
    del x
    after = stats(runtime)
    assert (after["live_buffers"], after["live_bytes"]) == (before["live_buffers"], before["live_bytes"]), tag()
    if during["pool_bytes"] + grown <= during["pool_limit"]:
        assert after["pool_bytes"] == during["pool_bytes"] + grown, tag("the freed buffer is kept for reuse")
    y = wg.ones(n, device=GPU)   # the same size class again: the pooled buffer, no new one
    assert len(runtime.driver._buffers) == after["live_buffers"] + after["pool_buffers"], tag("reused")
    assert y.sum().item() == n


def test_dead_tensors_return_to_baseline(runtime, no_gc):
    before = stats(runtime)
    a, b = randn(37, 50), randn(50, 23)
    x, w = wg.tensor(a, device=GPU), wg.tensor(b, device=GPU)
    outs = [x @ w, wg.softmax(x, 1), x.sum(0), wg.cat([x, x]), x[::2].T.contiguous(),
            wg.index_select(x, 0, wg.tensor(rng().integers(0, 37, 11).astype(np.int32), device=GPU)),
            (x > 0).float().mean(1, keepdim=True), wg.randn(1000, device=GPU)]
    np.testing.assert_allclose(outs[0].numpy(), a @ b, rtol=1e-4, atol=1e-4)
    assert stats(runtime)["live_bytes"] > before["live_bytes"]
    del x, w, outs
    after = stats(runtime)
    assert (after["live_buffers"], after["live_bytes"]) == (before["live_buffers"], before["live_bytes"]), tag(
        f"{after} vs {before}")


def test_autograd_graphs_free_without_the_garbage_collector(runtime, no_gc):
    model = nn.Sequential(nn.Linear(20, 64), nn.Tanh(), nn.Linear(64, 10)).to(GPU)
    x = wg.tensor(randn(32, 20), device=GPU)
    y = wg.tensor(rng().integers(0, 10, 32).astype(np.int32), device=GPU)
    with_params = stats(runtime)
    loss = nn.functional.cross_entropy(model(x), y)      # a graph that is never differentiated
    assert stats(runtime)["live_bytes"] > with_params["live_bytes"]
    del loss
    assert stats(runtime)["live_bytes"] == with_params["live_bytes"], tag("a forward graph outlived its loss")
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    grads = sum(p.grad._storage.nbytes for p in model.parameters())
    del loss
    after = stats(runtime)
    assert after["live_bytes"] == with_params["live_bytes"] + grads, tag("only the gradients stay after backward")


def test_pool_is_bounded(runtime, monkeypatch, no_gc):
    limit = int(rng().integers(1, 4)) << 20
    monkeypatch.setattr(runtime, "pool_limit", limit)
    runtime.empty_pool()
    before = stats(runtime)
    sizes = rng().integers(1_000, 200_000, 60)
    for n in sizes:        # freed in random sizes, well past the limit in all
        x = wg.zeros(int(n), device=GPU)
        del x
        s = stats(runtime)   # checks pool_bytes <= pool_limit and that no buffer is unaccounted
    assert s["pool_bytes"] > 0, tag("nothing was pooled")
    assert 4 * sizes.sum() > 2 * limit and s["live_bytes"] == before["live_bytes"], tag(str(s))


def test_a_full_pool_keeps_the_sizes_in_use(runtime, monkeypatch, no_gc):
    # Old buffers of one size fill the pool; a loop then frees and asks again for buffers of another
    # size, as big as the limit allows: the old size must make way rather than the loop's buffers
    # being destroyed and made anew on every round.
    limit = 4 << 20
    monkeypatch.setattr(runtime, "pool_limit", limit)
    runtime.empty_pool()
    old = [wg.zeros(100_000, device=GPU) for _ in range(3)]   # 400 KB each, then pooled
    del old
    stats(runtime)
    created = []
    monkeypatch.setattr(runtime.driver, "create_buffer", lambda size, make=runtime.driver.create_buffer:
                        created.append(size) or make(size))
    n = int(rng().integers(230_000, 260_000))   # 1 MiB buffers: four fill the pool
    for round_ in range(6):
        batch = [wg.zeros(n, device=GPU) for _ in range(4)]
        del batch
        s = stats(runtime)
        if round_ == 0:
            first = len(created)
    assert len(created) == first, tag(f"the loop made {len(created) - first} new buffers after its first round")
    assert s["pool_bytes"] <= limit, tag(str(s))


def test_training_memory_is_flat(runtime, monkeypatch, no_gc):
    # an MLP trained with Adam on shuffled batches: after warm-up every step holds the same memory;
    # the runtime's cache of bind groups, which pooled buffers in new combinations keep adding to,
    # starts over past its size (lowered here so that it does within the test)
    kept = int(rng().integers(100, 150))
    monkeypatch.setattr(runtime.bind_groups, "kept", kept)
    n, features, classes = 512, 12, 4
    data = wg.data.TensorDataset(wg.tensor(randn(n, features), device=GPU),
                                 wg.tensor(rng().integers(0, classes, n).astype(np.int32), device=GPU))
    model = nn.Sequential(nn.Linear(features, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                          nn.Linear(64, classes)).to(GPU)
    opt = optim.Adam(model.parameters(), lr=1e-2)
    loader = wg.data.DataLoader(data, batch_size=48, shuffle=True)   # 11 batches, the last one short
    trace, losses = [], []
    while len(trace) < 250:
        for x, y in loader:
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss)
            if len(losses) > 1:
                losses.pop(0).item()      # read one step late, as a training loop's logging does
            s = stats(runtime)
            trace.append((s["live_buffers"], s["live_bytes"], s["pool_bytes"], len(runtime.driver._buffers)))
            # at most one submit's groups past the size
            assert len(runtime.driver._bind_groups) <= kept + 100, tag(f"{len(runtime.driver._bind_groups)} bind groups")
    warm = trace[2 * len(loader):]        # after two epochs: Adam's state and every batch shape exist
    for k, what in enumerate(["live_buffers", "live_bytes", "pool_bytes", "driver buffers"]):
        values = [t[k] for t in warm]
        # per step the value goes round the same cycle of one epoch (the short batch), no higher
        assert max(values) == max(values[:len(loader)]), tag(f"{what} grew: {values[:3]} ... {values[-3:]}")
    assert losses[-1].item() < 1.2, tag("the model did not train (is the loop what it claims to be?)")
