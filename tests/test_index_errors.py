"""Indices out of range raise as in torch, on both devices: x[idx], index_select, gather (and
scatter_add, which writes x[idx] = v), and cross_entropy's class targets. The cpu device checks at
the op; webgpu's kernels record the first bad index on the device and the runtime raises it at the
next read of a value, which fetches it along (runtime.py, index_errors.py): no read of its own,
no dispatch of its own, under wg.jit replay too. Valid indices, negative ones among them, still
give torch's results, and an error raised once does not stick."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import webgrad as wg
from webgrad.backends.webgpu import index_errors
from webgrad.backends.webgpu.words import word_window
from webgrad.nn import functional as F
from conftest import dispatched_kernels, integers, randn, rng, tag
# the runtime over a fake driver, directly and through browser.py: conftest's fake_runtime
from runtime_fakes import kernel

GATHER_OPS = ("x[i]", "x[:, i]", "index_select", "gather")


def _bad(size):
    """An index outside [-size, size): past the end, before the start, or at int32's ends."""
    g = rng()
    return int(g.choice([g.integers(size, 3 * size), g.integers(-3 * size, -size), 2**31 - 1, -2**31]))


def _gather_case(op):
    """(x, index, dim, fn): fn(x, index) runs op the same way on webgrad and torch tensors (the
    index through _torch(index, op, size) for torch); the index holds valid values, negative ones
    among them."""
    g = rng()
    x = randn(int(g.integers(1, 12)), int(g.integers(1, 12)))
    dim = {"x[i]": 0, "x[:, i]": 1}.get(op, int(g.integers(0, 2)))
    size = x.shape[dim]
    if op == "gather":
        shape = [int(g.integers(1, s + 1)) for s in x.shape]
        shape[dim] = int(g.integers(1, 9))
        index = integers(*shape, low=-size, high=size)
    else:
        index = integers(int(g.integers(1, 9)), low=-size, high=size)
    fn = {"x[i]": lambda t, i: t[i], "x[:, i]": lambda t, i: t[:, i],
          "index_select": lambda t, i: t.index_select(dim, i), "gather": lambda t, i: t.gather(dim, i)}[op]
    return x, index, dim, fn


def _torch(index, op="x[i]", size=None):
    """The index as torch takes it: int64; for its gather and index_select, which take no negative
    indices, those in range counted from the end already (out of range ones are left as they are)."""
    if op in ("index_select", "gather"):
        index = np.where((index >= -size) & (index < size), index % max(size, 1), index)
    return torch.tensor(index, dtype=torch.int64)


def _raised(call):
    with pytest.raises(Exception) as info:
        call()
    return info.value


def _check_error(ours, theirs, device, op, index, size, words=None, torch_says=True):
    """ours: an IndexError naming the index and the size, in `words` where they are given (torch's
    message too, unless not torch_says); on webgpu, where it comes at a later read, naming the op
    first, and an instance of torch's type (its kernels serve several ops: an IndexError that is a
    RuntimeError too, as torch raises for gather and scatter_add)."""
    message = str(ours)
    assert isinstance(ours, IndexError), tag(f"{type(ours).__name__}: {message}")
    assert str(index) in message and str(size) in message, tag(message)
    if words is not None:
        words = words.format(index=index, size=size)
        assert words in message and (words in str(theirs) or not torch_says), tag(f"ours: {message}; torch: {theirs}")
    if device == "webgpu":
        assert message.startswith(f"{op}: ") and isinstance(ours, type(theirs)), tag(f"{ours!r}; torch: {theirs!r}")


# ---- the runtime's policy, over a fake driver ----
def test_a_read_fetches_the_index_error_words_in_the_same_call(fake_runtime):
    driver, runtime = fake_runtime()
    g = rng()
    storage = runtime.alloc(int(g.integers(1, 600)))
    runtime.write(storage, g.integers(0, 256, storage.nbytes, dtype=np.uint8).tobytes())
    offset = int(g.integers(0, storage.nbytes))
    size = int(g.integers(1, storage.nbytes - offset + 1))
    runtime.read(storage, offset, size)
    [(_, regions)] = driver.logged("read")
    assert regions == ((storage.handle, *word_window(offset, size)), runtime.index_errors.region), tag(str(regions))


def test_a_recorded_index_error_is_raised_once_at_the_next_read(fake_runtime):
    driver, runtime = fake_runtime()
    code = index_errors.code("some_op", "index {index} is out of bounds for dimension {dim} with size {size}")
    g = rng()
    size, dim = int(g.integers(1, 1000)), int(g.integers(0, 5))
    index = int(g.choice([g.integers(size, 2 * size), g.integers(-2 * size, -size)]))
    storage = runtime.alloc(64)
    data = g.integers(0, 256, 64, dtype=np.uint8).tobytes()
    runtime.write(storage, data)
    pipeline = kernel(runtime, ("read_write", "read_write"))
    runtime.dispatch(pipeline, [storage, runtime.index_errors.storage], [], 1)
    # what a kernel's report_index_error leaves there (shaders/index_error.wgsl)
    driver.buffers[runtime.index_errors.storage.handle][:] = index_errors.RECORD.pack(1, code, index, size, dim)
    with pytest.raises(IndexError, match=f"^some_op: index {index} is out of bounds for dimension {dim} "
                                         f"with size {size} ") as info:
        runtime.read(storage, 0, 64)
    assert isinstance(info.value, RuntimeError), tag("gather's and scatter_add's type in torch, too")
    assert driver.buffers[runtime.index_errors.storage.handle] == bytes(index_errors.RECORD.size), tag("cleared")
    assert bytes(runtime.read(storage, 0, 64)) == data, tag("the next read reads")
    runtime.empty_pool()
    assert runtime.index_errors.storage.handle in driver.buffers, tag("the words are the runtime's, not the pool's")



# ---- the ops, on both devices ----
@pytest.mark.parametrize("op", GATHER_OPS)
def test_gather_family_out_of_range_raises_as_in_torch(op, device):
    x, index, dim, fn = _gather_case(op)
    size = x.shape[dim]
    at = tuple(int(rng().integers(0, s)) for s in index.shape)
    index[at] = bad = _bad(size)
    theirs = _raised(lambda: fn(torch.tensor(x), _torch(index, op, size)))
    ours = _raised(lambda: fn(wg.tensor(x, device=device), wg.tensor(index, device=device)).tolist())
    # torch's index_select says "index out of range in self", and x[:, i] names dimension 0
    words = "index {index} is out of bounds for dimension %d with size {size}" % dim
    _check_error(ours, theirs, device, "gather", bad, size, words, torch_says=op in ("x[i]", "gather"))
    # the error is gone with its raising: the next valid op reads
    index[at] = -size
    got = fn(wg.tensor(x, device=device), wg.tensor(index, device=device))
    np.testing.assert_array_equal(got.numpy(), fn(torch.tensor(x), _torch(index, op, size)).numpy(), err_msg=tag(op))


@pytest.mark.parametrize("op", GATHER_OPS)
def test_valid_indices_give_torchs_values_and_gradients(op, device):
    x, index, dim, fn = _gather_case(op)
    ours_x, theirs_x = wg.tensor(x, device=device, requires_grad=True), torch.tensor(x, requires_grad=True)
    ours, theirs = fn(ours_x, wg.tensor(index, device=device)), fn(theirs_x, _torch(index, op, x.shape[dim]))
    np.testing.assert_array_equal(ours.detach().numpy(), theirs.detach().numpy(), err_msg=tag(op))
    weights = randn(*theirs.shape)
    (ours * wg.tensor(weights, device=device)).sum().backward()
    (theirs * torch.tensor(weights)).sum().backward()
    np.testing.assert_allclose(ours_x.grad.numpy(), theirs_x.grad.numpy(), rtol=1e-5, atol=1e-5, err_msg=tag(op))


def test_writes_out_of_range_raise_as_in_torch(device):
    """x[idx] = v and scatter_add put values at the index (the gather family's scatter_add kernel)."""
    g = rng()
    x = randn(int(g.integers(1, 10)), int(g.integers(1, 10)))
    index = integers(int(g.integers(1, 6)), high=x.shape[0])   # torch's scatter_add takes no negative ones
    index[int(g.integers(0, len(index)))] = bad = _bad(x.shape[0])

    def put(t, i):
        t[i] = 1.0
        return t
    words = "index {index} is out of bounds for dimension 0 with size {size}"
    theirs = _raised(lambda: put(torch.tensor(x), _torch(index)))
    ours = _raised(lambda: put(wg.tensor(x, device=device), wg.tensor(index, device=device)).tolist())
    _check_error(ours, theirs, device, "scatter_add", bad, x.shape[0], words)

    spread = np.broadcast_to(index[:, None], (len(index), x.shape[1])).copy()
    src = randn(*spread.shape)
    theirs = _raised(lambda: torch.tensor(x).scatter_add(0, _torch(spread), torch.tensor(src)))
    ours = _raised(lambda: wg.tensor(x, device=device).scatter_add(0, wg.tensor(spread, device=device),
                                                                   wg.tensor(src, device=device)).tolist())
    _check_error(ours, theirs, device, "scatter_add", bad, x.shape[0], words)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("wide", [False, True])   # the mean or sum in the loss's own dispatch, or after it
def test_cross_entropy_target_out_of_range_raises_as_in_torch(reduction, wide, device):
    g = rng()
    rows, classes = int(g.integers(1, 40)), int(g.integers(130, 300) if wide else g.integers(2, 12))
    x, labels = randn(rows, classes), integers(rows, high=classes)
    # past the classes, or negative (-1 too: it is no ignore_index; -100, torch's default one, is)
    bad = int(g.choice([g.integers(classes, 3 * classes), g.integers(-99, 0), 2**31 - 1]))
    labels[int(g.integers(0, rows))] = bad

    def loss(F, logits, target):
        value = F.cross_entropy(logits, target, reduction=reduction)
        value.sum().backward()
        return logits.grad.tolist()
    theirs = _raised(lambda: loss(TF, torch.tensor(x, requires_grad=True), _torch(labels)))
    ours = _raised(lambda: loss(F, wg.tensor(x, device=device, requires_grad=True), wg.tensor(labels, device=device)))
    _check_error(ours, theirs, device, "cross_entropy", bad, classes)
    assert f"Target {bad} is out of bounds." in str(theirs), tag(str(theirs))
    assert f"target {bad} is out of bounds for {classes} classes" in str(ours).lower(), tag(str(ours))
    # the next valid loss reads
    labels[labels == bad] = classes - 1
    ours = F.cross_entropy(wg.tensor(x, device=device), wg.tensor(labels, device=device), reduction=reduction)
    theirs = TF.cross_entropy(torch.tensor(x), _torch(labels), reduction=reduction)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-4, atol=1e-5, err_msg=tag(reduction))


def test_the_first_error_is_raised_and_the_rest_go_with_it():
    """Errors of several ops before one read: the first queued is raised, once."""
    x = randn(int(rng().integers(2, 9)), 3)
    size = x.shape[0]
    first, second = _bad(size), size + 1000
    t = wg.tensor(x, device="webgpu")
    picked = t[wg.tensor([0, first], device="webgpu")]
    more = t.index_select(0, wg.tensor([second], device="webgpu"))
    with pytest.raises(IndexError, match=f"^gather: index {first} is out of bounds for dimension 0 with size {size} "):
        more.tolist()
    assert picked.shape == (2, 3) and t[wg.tensor([-1], device="webgpu")].tolist() == [x[-1].tolist()]


@pytest.fixture
def driver_reads(monkeypatch):
    """The regions of every read the webgpu driver is asked for, as they happen."""
    driver = wg.get_backend("webgpu").runtime.driver
    reads, read = [], driver.read_buffers
    monkeypatch.setattr(driver, "read_buffers", lambda regions: reads.append(regions) or read(regions))
    return reads


def test_checks_cost_no_read_and_no_dispatch_of_their_own(driver_reads, monkeypatch):
    dispatches = dispatched_kernels(monkeypatch)
    classes = int(rng().integers(2, 9))
    rows = int(rng().integers(classes + 1, 30))   # x[labels] picks rows
    x = wg.tensor(randn(rows, classes), device="webgpu", requires_grad=True)
    labels = integers(rows, high=classes)
    for bad in (False, True):
        if bad:
            labels[0] = classes   # a row but no class
        t = wg.tensor(labels, device="webgpu")
        column = t[:, None]
        dispatches.clear()
        picked = x.gather(1, column)
        assert len(dispatches) == 1, tag("a gather is one dispatch")
        loss = F.cross_entropy(x, t) + x[t].sum() + picked.sum()
        loss.backward()
        assert driver_reads == [], tag("no op reads")
        if bad:   # the gather's, queued first
            with pytest.raises(IndexError, match=f"^gather: index {classes} is out of bounds for dimension 1 "):
                loss.item()
        else:
            loss.item()
        assert len(driver_reads) == 1 and len(driver_reads[0]) == 2, tag(f"one read, its value and the errors: "
                                                                         f"{driver_reads}")
        driver_reads.clear()


def test_errors_of_replayed_work_are_raised_at_the_next_read(driver_reads):
    g = rng()
    x = randn(int(g.integers(2, 12)), int(g.integers(1, 5)))
    size = x.shape[0]
    t = wg.tensor(x, device="webgpu")

    @wg.jit
    def pick(t, i):
        return t[i] * 2

    for _ in range(3):   # eager, recorded, replayed
        index = integers(4, low=-size, high=size)
        got = pick(t, wg.tensor(index, device="webgpu"))
        np.testing.assert_array_equal(got.numpy(), (torch.tensor(x)[_torch(index)] * 2).numpy(), err_msg=tag())
    index[int(g.integers(0, 4))] = bad = _bad(size)
    driver_reads.clear()
    got = pick(t, wg.tensor(index, device="webgpu"))   # replayed: queued, not read
    assert len(pick._programs) == 1 and driver_reads == [], tag("a replay, with no read of its own")
    with pytest.raises(IndexError, match=f"^gather: index {bad} is out of bounds for dimension 0 with size {size} "):
        got.tolist()
    assert len(driver_reads) == 1, tag(str(driver_reads))
    index[index == bad] = -1
    assert pick(t, wg.tensor(index, device="webgpu")).tolist() == (torch.tensor(x)[_torch(index)] * 2).tolist()


def test_a_replayed_training_step_reports_its_bad_targets():
    g = rng()
    rows, features, classes = int(g.integers(4, 40)), int(g.integers(2, 9)), int(g.integers(2, 6))
    model = wg.nn.Linear(features, classes, device="webgpu")
    opt = wg.optim.SGD(model.parameters(), lr=0.1)

    @wg.jit
    def step(x, y):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    x = wg.tensor(randn(rows, features), device="webgpu")
    labels = integers(rows, high=classes)
    losses = [step(x, wg.tensor(labels, device="webgpu")).item() for _ in range(3)]   # eager, recorded, replayed
    bad = labels.copy()
    bad[int(g.integers(0, rows))] = -1
    loss = step(x, wg.tensor(bad, device="webgpu"))
    with pytest.raises(IndexError, match=f"^cross_entropy: Target -1 is out of bounds for {classes} classes"):
        loss.item()
    assert np.isfinite(step(x, wg.tensor(labels, device="webgpu")).item()) and np.all(np.isfinite(losses)), tag()
