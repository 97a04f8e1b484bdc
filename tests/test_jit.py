"""wg.jit: recorded and replayed training steps give exactly what the same steps give eagerly."""
import numpy as np
import pytest

import webgrad as wg
from webgrad import nn
from conftest import cross_entropy_step, integers, randn, seed


def _batches(count, batch=16, features=12, classes=5):
    return [(wg.tensor(randn(batch, features), device="webgpu"),
             wg.tensor(integers(batch, high=classes).astype(np.int32), device="webgpu")) for _ in range(count)]


def _train(batches, make_optimizer, jitted, model_seed, lr_schedule=None, batchnorm=False):
    """Losses and final weights of one training run; the jitted and eager runs share every seed."""
    wg.manual_seed(model_seed)
    layers = [nn.Linear(12, 32), nn.ReLU(), nn.Dropout(0.25), nn.Linear(32, 5)]
    if batchnorm:
        layers.insert(1, nn.BatchNorm1d(32))
    model = nn.Sequential(*layers).to("webgpu")
    opt = make_optimizer(model.parameters())
    calls = []
    step = cross_entropy_step(model, opt, calls)
    run = wg.jit(step) if jitted else step
    wg.manual_seed(model_seed + 1)
    losses = []
    for i, (x, y) in enumerate(batches):
        if lr_schedule:
            opt.param_groups[0]["lr"] = lr_schedule(i)
        losses.append(run(x, y).item())
    state = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    return np.array(losses), state, len(calls)


@pytest.mark.parametrize("optimizer", [
    lambda p: wg.optim.Adam(p, lr=1e-2),
    lambda p: wg.optim.AdamW(p, lr=1e-2, weight_decay=0.1),
    lambda p: wg.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True),
    lambda p: wg.optim.SGD(p, lr=0.1),
], ids=["adam", "adamw", "sgd-nesterov", "sgd"])
def test_replayed_steps_match_eager_steps(optimizer):
    batches = _batches(8)
    s = seed() % 1000
    # the learning rate changes every step: replays must pick it up, like the step count
    schedule = lambda i: 0.05 / (1 + i)  # noqa: E731
    eager_losses, eager_state, eager_calls = _train(batches, optimizer, False, s, schedule)
    losses, state, calls = _train(batches, optimizer, True, s, schedule)
    assert calls == 2 and eager_calls == len(batches)   # steps 3.. ran no Python
    np.testing.assert_array_equal(losses, eager_losses)
    for name in eager_state:
        np.testing.assert_array_equal(state[name], eager_state[name], err_msg=name)
    assert len(set(np.round(losses, 6))) == len(batches)   # dropout drew new masks on each replay


def test_batchnorm_running_stats_advance_on_replay():
    batches = _batches(6)
    s = seed() % 1000
    _, eager_state, _ = _train(batches, lambda p: wg.optim.Adam(p, lr=1e-2), False, s, batchnorm=True)
    _, state, _ = _train(batches, lambda p: wg.optim.Adam(p, lr=1e-2), True, s, batchnorm=True)
    assert int(state["1.num_batches_tracked"]) == len(batches)
    for name in ("1.running_mean", "1.running_var", "0.weight"):
        np.testing.assert_allclose(state[name], eager_state[name], rtol=1e-6, atol=1e-7, err_msg=name)


def test_new_shapes_record_again_and_results_follow_inputs():
    w = wg.tensor(randn(6, 3), device="webgpu")
    calls = []

    @wg.jit
    def project(x, scale=1.0):
        calls.append(1)
        return {"out": (x @ w) * scale, "parts": [x.sum(), x.relu().mean(0)]}
    for rows, scale in [(4, 1.0)] * 4 + [(7, 1.0)] * 3 + [(4, 2.0)] * 3:
        x = randn(rows, 6)
        result = project(wg.tensor(x, device="webgpu"), scale=scale)
        np.testing.assert_allclose(result["out"].numpy(), x @ w.numpy() * scale, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(result["parts"][0].item(), x.sum(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(result["parts"][1].numpy(), np.maximum(x, 0).mean(0), rtol=1e-5, atol=1e-6)
    assert len(calls) == 2 + 2 + 2   # each signature: one warm-up call, one recorded call


def test_each_argument_position_has_its_own_input_buffer():
    # recorded with one tensor passed twice, replayed with two different ones
    combine = wg.jit(lambda a, b, c: a * 2 + b - c)
    x = wg.tensor(randn(5), device="webgpu")
    for _ in range(2):
        combine(x, x, x)
    a, b, c = randn(5), randn(5), randn(5)
    out = combine(*(wg.tensor(v, device="webgpu") for v in (a, b, c)))
    np.testing.assert_allclose(out.numpy(), a * 2 + b - c, rtol=1e-5, atol=1e-6)


def test_outputs_are_fresh_tensors_and_replays_hold_memory_flat():
    w = wg.tensor(randn(8, 8), device="webgpu")
    square = wg.jit(lambda x: (x @ w).tanh())
    xs = [randn(5, 8) for _ in range(30)]
    outs = [square(wg.tensor(x, device="webgpu")) for x in xs[:3]]
    live = wg.memory_stats("webgpu")["live_bytes"]
    outs += [square(wg.tensor(x, device="webgpu")) for x in xs[3:]]
    # each kept output owns one small buffer; nothing else may accumulate
    assert wg.memory_stats("webgpu")["live_bytes"] - live <= 27 * 256
    for x, out in zip(xs, outs):   # earlier results were not overwritten by later replays
        np.testing.assert_allclose(out.numpy(), np.tanh(x @ w.numpy()), rtol=1e-5, atol=1e-5)


def test_results_handed_over_whole_or_copied_keep_their_values():
    # A result in a buffer of its own that the call made goes to the caller as it is, and the next
    # replay writes a new buffer; a slice of a larger one, a tensor returned twice and a tensor made
    # before the call are copied out. Every result kept from every call must keep its values.
    w = wg.tensor(randn(6, 4), device="webgpu")

    @wg.jit
    def parts(x):
        y = x @ w
        total = x.sum()
        return y.tanh(), {"row": y[:1], "total": (total, total)}, [w, x.mean()]
    xs = [randn(64, 6) for _ in range(6)]   # y: 1 KiB, its first row a quarter of the smallest buffer
    results = [parts(wg.tensor(x, device="webgpu")) for x in xs]
    (program,) = parts._programs.values()
    assert sorted(program.handed) == [0, 5]   # y.tanh() and x.mean(), in the result's order
    for x, (tanh, rest, (weight, mean)) in zip(xs, results):
        y = x @ w.numpy()
        np.testing.assert_allclose(tanh.numpy(), np.tanh(y), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(rest["row"].numpy(), y[:1], rtol=1e-5, atol=1e-5)
        for total in rest["total"]:
            np.testing.assert_allclose(total.item(), x.sum(), rtol=1e-5, atol=1e-4)
        np.testing.assert_array_equal(weight.numpy(), w.numpy())
        np.testing.assert_allclose(mean.item(), x.mean(), rtol=1e-5, atol=1e-6)
    assert len({id(r[0]._storage) for r in results}) == len(xs)


def test_inputs_bound_where_they_fill_their_buffer_else_copied():
    # The recording reads its inputs: a tensor filling a buffer of its size is bound where the
    # recording read its own (no copy); a slice of a larger one is copied in. Calls mix both, so the
    # bindings go back and forth; results kept from every call keep their values.
    w = wg.tensor(randn(6, 4), device="webgpu")
    project = wg.jit(lambda x, y: (x @ w) * y)
    pool = wg.tensor(randn(40, 6), device="webgpu")
    cases = []
    for i in range(8):
        x = wg.tensor(randn(8, 6), device="webgpu") if i % 3 else pool[8 + i:16 + i]
        y = wg.tensor(randn(8, 1), device="webgpu")
        cases.append((x.numpy(), y.numpy(), project(x, y)))
        if i > 1:   # replays: x is bound where it fills its own buffer, the recording's copy otherwise
            (program,) = project._programs.values()
            assert (program.bound[0] is x) == (i % 3 != 0)
            assert program.bound[1] is y
    for x, y, out in cases:
        np.testing.assert_allclose(out.numpy(), (x @ w.numpy()) * y, rtol=1e-5, atol=1e-5)


def test_a_result_fed_back_as_the_next_input():
    # a recurrent state: each call's result (handed over) is the next call's input (bound)
    w = wg.tensor(randn(6, 6) * 0.5, device="webgpu")
    cell = wg.jit(lambda x, h: (x + h @ w).tanh())
    xs = [randn(3, 6) for _ in range(7)]
    h, expected = wg.tensor(np.zeros((3, 6), np.float32), device="webgpu"), np.zeros((3, 6), np.float32)
    for x in xs:
        h = cell(wg.tensor(x, device="webgpu"), h)
        expected = np.tanh(x + expected @ w.numpy())
        np.testing.assert_allclose(h.numpy(), expected, rtol=1e-5, atol=1e-5)
    (program,) = cell._programs.values()
    assert program.handed and sorted(program.bindable) == [0, 1]


def test_inputs_written_by_the_call_are_copied():
    # an in-place update of an input inside the call writes the recording's own buffer, not the caller's
    bump = wg.jit(lambda x: x.add_(1) * 2)
    values = [randn(5) for _ in range(5)]
    tensors = [wg.tensor(v, device="webgpu") for v in values]
    outs = [bump(t) for t in tensors]
    (program,) = bump._programs.values()
    assert not program.bindable
    for v, out in zip(values, outs):
        np.testing.assert_allclose(out.numpy(), (v + 1) * 2, rtol=1e-6)
    for v, t in zip(values[2:], tensors[2:]):   # replays leave the caller's tensors as they were
        np.testing.assert_array_equal(t.numpy(), v)


def test_a_replay_after_a_read_is_submitted_at_once():
    # a read waits for all the work: the GPU is idle until the next step's dispatches are submitted
    runtime = wg.get_backend("webgpu").runtime
    w = wg.tensor(randn(8, 8), device="webgpu")
    square = wg.jit(lambda x: (x @ w).relu())
    x = wg.tensor(randn(4, 8), device="webgpu")
    for _ in range(3):
        square(x).sum().item()
    square(x)
    assert not runtime._queue   # submitted, not left for MAX_QUEUED dispatches to gather
    square(x)
    assert runtime._queue       # the GPU has work: this one waits for the queue to fill or a read
    np.testing.assert_allclose(square(x).numpy(), np.maximum(x.numpy() @ w.numpy(), 0), rtol=1e-5, atol=1e-5)


def test_reading_values_while_recording_is_an_error():
    @wg.jit
    def peek(x):
        return x * x.sum().item()
    x = wg.tensor(randn(3), device="webgpu")
    peek(x)   # the warm-up call runs eagerly: reading is fine there
    with pytest.raises(RuntimeError, match="cannot read tensor values"):
        peek(x)
    np.testing.assert_allclose(peek.fn(x).numpy(), x.numpy() * x.numpy().sum(), rtol=1e-5)  # nothing left half-recorded


def test_inputs_that_require_grad_and_cpu_functions():
    double = wg.jit(lambda x: x * 2)
    x = wg.tensor(randn(3), device="webgpu", requires_grad=True)
    double(x)
    with pytest.raises(ValueError, match="must not require grad"):
        double(x)
    calls = []

    @wg.jit
    def on_cpu(x):
        calls.append(1)
        return x + 1
    for _ in range(4):
        v = randn(3)
        np.testing.assert_allclose(on_cpu(wg.tensor(v, device="cpu")).numpy(), v + 1)
    assert len(calls) == 4   # nothing to record off the GPU: every call runs
