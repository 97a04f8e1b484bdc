"""Fusion of wg.jit's elementwise chains (backends/webgpu/fusion.py): a fused replay gives what the
unfused replay and eager calls give, bit for bit, in as many fewer dispatches as the chains predict."""
import numpy as np
import torch

import webgrad as wg
from webgrad import nn
from webgrad.backends.webgpu import fusion
from webgrad.nn import functional as F
from conftest import integers, randn, rng, seed, to_numpy

CALLS = 3   # eager, recorded, replayed


def _arrays(result):
    if isinstance(result, wg.Tensor):
        return [to_numpy(result)]
    return [to_numpy(t) for t in result]


def _jitted_runs(fn, make_inputs, fuse):
    """(results of each call, the recording's dispatches, the buffers it keeps) of wg.jit(fn) on
    fresh inputs each call; make_inputs(call) gives the same inputs for both runs."""
    jitted = wg.jit(fn, fuse=fuse)
    results = [_arrays(jitted(*make_inputs(call))) for call in range(CALLS)]
    (program,) = jitted._programs.values()
    return results, len(program.recording.dispatches), len(program.recording.storages)


def check_fusion(make_fn, make_inputs, saved, kept_fewer=None):
    """The fused replays of the function make_fn() gives (with state of its own, the same each time)
    equal its unfused replays and its eager calls bit for bit, with `saved` dispatches fewer (and
    kept_fewer buffers fewer kept by its recording, where given)."""
    fused, fused_count, fused_kept = _jitted_runs(make_fn(), make_inputs, True)
    plain, plain_count, plain_kept = _jitted_runs(make_fn(), make_inputs, False)
    fn = make_fn()
    eager = [_arrays(fn(*make_inputs(call))) for call in range(CALLS)]
    for call in range(CALLS):
        for k, (ours, unfused, reference) in enumerate(zip(fused[call], plain[call], eager[call])):
            what = f"call {call}, output {k} (seed {seed()})"
            np.testing.assert_array_equal(ours, unfused, err_msg=what)
            np.testing.assert_array_equal(ours, reference, err_msg=what)
    assert plain_count - fused_count == saved, (plain_count, fused_count)
    if kept_fewer is not None:
        assert plain_kept - fused_kept == kept_fewer, (plain_kept, fused_kept)
    return fused


def _inputs(*shapes):
    """make_inputs for check_fusion: fresh random arrays of these shapes for each call."""
    calls = [[randn(*shape) for shape in shapes] for _ in range(CALLS)]
    return lambda call: [wg.tensor(a, device="webgpu") for a in calls[call]]


def test_chain_with_broadcasts_and_scalars_is_one_kernel():
    def fn(x, row, col):
        return ((x * row + col).exp() * 0.5 - x).relu() / (col + 2.0)
    make = _inputs((5, 7), (1, 7), (5, 1))
    # 8 maps: col + 2.0 runs over col's 5 elements, apart; the other 7 are one kernel, which keeps
    # their 6 intermediates to itself (the recording lets go of those buffers)
    fused = check_fusion(lambda: fn, make, saved=6, kept_fewer=6)
    x, row, col = (torch.from_numpy(to_numpy(t)) for t in make(CALLS - 1))
    np.testing.assert_allclose(fused[-1][0], (((x * row + col).exp() * 0.5 - x).relu() / (col + 2.0)).numpy(),
                               rtol=1e-6, atol=1e-6)


def test_views_strided_reads_and_writes():
    start = randn(6, 8)

    def make_fn():
        acc = wg.tensor(start, device="webgpu")

        def fn(x, y):
            t = x[:, 1::2] * y.t()      # strided and transposed reads
            acc[:, ::2] += t.sigmoid()  # a strided in-place write into a tensor that outlives the call
            return acc * 1.0
        return fn
    # 7 maps: the 6 over acc's 24-element slice (mul, sigmoid, and the in-place add's copies) are one
    # kernel; acc * 1.0 runs over 48 elements, so it stays apart
    check_fusion(make_fn, _inputs((6, 8), (4, 6)), saved=5)


def test_an_intermediate_read_through_another_layout_is_not_fused():
    def fn(x, y):
        t = x * 2.0
        return t.t() + y            # thread i needs t's element at another place: two kernels
    check_fusion(lambda: fn, _inputs((3, 5), (5, 3)), saved=0)


def test_a_chain_past_the_binding_limit_splits(monkeypatch):
    # WebGPU's default: 8 storage buffers per stage, the parameters' one of them
    monkeypatch.setitem(wg.get_backend("webgpu").runtime.limits, "max_storage_buffers_per_shader_stage", 8)

    def fn(*xs):
        total = xs[0]
        for x in xs[1:]:
            total = total + x
        return total
    # 8 adds of 9 inputs: the first 5 bind 6 inputs and the sum the 6th reads (7 buffers); the last
    # 3 bind that sum, 3 inputs and their result
    check_fusion(lambda: fn, _inputs(*[(3, 4)] * 9), saved=6)


def test_chain_feeding_a_reduction():
    def fn(x, m):
        return ((x - m) ** 2 * 0.25).sum(dim=1)
    check_fusion(lambda: fn, _inputs((6, 9), (6, 1)), saved=2)


def test_intermediate_also_returned_and_read_by_two_consumers():
    def fn(x, y):
        t = x * y
        u = t.tanh()
        return t, (t + 1.0) * u - t * t
    # t is an output: stored; u and the rest stay in the kernel
    check_fusion(lambda: fn, _inputs((4, 10), (4, 10)), saved=5, kept_fewer=4)


def test_comparisons_where_ints_and_bytes_mix_dtypes():
    image = integers(8, 5, high=256).astype(np.uint8)

    def make_fn():
        pixels = wg.tensor(image, device="webgpu")   # uint8, captured by fn rather than passed in

        def fn(x, y, n):
            keep = (x > 0.0) & (y < x)
            return wg.where(keep, x * 2.0, y), (n * 3 + 1) * n, (pixels.float() / 255.0 - 0.5) * x
        return fn
    make_floats = _inputs((8, 5), (8, 5))
    counts = [integers(8, 5).astype(np.int32) for _ in range(CALLS)]

    def make(call):
        return [*make_floats(call), wg.tensor(counts[call], device="webgpu")]
    # gt and lt (f32), and (bool), mul, where (f32): one kernel; the int32 mul, add, mul: another; the
    # pixels' float, div, sub, mul: a third
    check_fusion(make_fn, make, saved=9)


def test_in_place_updates_of_state_and_inputs():
    start = randn(3, 4)

    def make_fn():
        state = wg.tensor(start, device="webgpu")

        def fn(x):
            t = x * 2.0
            x.add_(1.0)                  # after t read it, before t + x reads it
            state.mul_(0.9).add_(t * 0.1)
            return t + x, state * 1.0
        return fn
    # 10 maps (in-place updates go through copies): t = x * 2 stays alone, as it read x before x.add_
    # wrote it and may not move past that write; the others make two kernels
    check_fusion(make_fn, _inputs((3, 4)), saved=7)


def test_a_dispatch_in_between_that_writes_an_operand_keeps_the_order():
    weight, grad = randn(4, 6), randn(4, 6)

    def make_fn():
        p = nn.Parameter(wg.tensor(weight, device="webgpu"))
        p.grad = wg.tensor(grad, device="webgpu")
        opt = wg.optim.SGD([p], lr=0.5)

        def fn(x):
            t = p.detach() * x
            opt.step()                   # writes p in place: t's kernel may not move past it
            return t + p.detach()
        return fn
    fused = check_fusion(make_fn, _inputs((4, 6)), saved=0)
    assert not np.array_equal(fused[1][0], fused[2][0])   # p moved on at the replay


def _linear(in_features, out_features):
    """make_fn's state: a Linear on webgpu with these fresh random weights (the same for each run)."""
    weight, bias = randn(out_features, in_features), randn(out_features)

    def make():
        layer = nn.Linear(in_features, out_features, device="webgpu")
        with wg.no_grad():
            layer.weight.copy_(wg.tensor(weight, device="webgpu"))
            layer.bias.copy_(wg.tensor(bias, device="webgpu"))
        return layer
    return make


def test_linear_relu_is_the_product_with_an_epilogue():
    make_linear = _linear(20, 12)

    def make_fn():
        layer = make_linear()

        def fn(x):
            with wg.no_grad():
                return layer(x).relu()
        return fn
    make = _inputs((6, 20))
    # the relu goes into the product's store, and the product's own result (dead) is never stored
    fused = check_fusion(make_fn, make, saved=1, kept_fewer=1)
    layer = make_linear()
    x, w, b = (torch.from_numpy(to_numpy(t)) for t in (make(CALLS - 1)[0], layer.weight, layer.bias))
    np.testing.assert_allclose(fused[-1][0], torch.relu(x @ w.T + b).numpy(), rtol=1e-5, atol=1e-5)


def test_linear_gelu_and_a_chain_after_it():
    make_linear = _linear(16, 24)

    def make_fn():
        layer = make_linear()

        def fn(x, y):
            with wg.no_grad():
                h = layer(x)
                return F.gelu(h) * y + 1.0, h   # h is returned: the product stores it too
        return fn
    # gelu, mul, add: all three in the product's store
    check_fusion(make_fn, _inputs((5, 16), (5, 24)), saved=3)


def test_matmul_relu_backward_chain_trains_the_same():
    x, w1, w2 = randn(8, 12), randn(12, 16), randn(16, 3)

    def make_fn():
        a = wg.tensor(w1, device="webgpu", requires_grad=True)
        b = wg.tensor(w2, device="webgpu", requires_grad=True)

        def fn(x):
            a.grad = b.grad = None
            ((x @ a).relu() @ b).sum().backward()
            return a.grad * 1.0, b.grad * 1.0
        return fn
    # forward: relu into x @ a's store (its result is still stored: backward reads it); backward:
    # relu's gradient into the store of the product that makes its incoming gradient, and each
    # returned gradient's * 1.0 into the product that makes it
    check_fusion(make_fn, lambda call: [wg.tensor(x * (call + 1), device="webgpu")], saved=4)


def test_a_chain_recorded_before_the_product_joins_its_epilogue():
    def fn(x, y, w):
        t = (x * 2.0).exp()         # recorded before the product, which does not read it
        return (y @ w + t).tanh()
    # mul, exp, add, tanh: all four in the product's store
    check_fusion(lambda: fn, _inputs((4, 6), (4, 5), (5, 6)), saved=4)


def test_split_k_products_put_their_maps_in_the_sums_store(monkeypatch):
    monkeypatch.setattr(wg.get_backend("webgpu"), "is_software", False)   # a GPU's plan: K splits

    def fn(x, y, z):
        return (x @ y).relu() * 2.0, (z @ y.t()).relu()
    # (4, 640) @ (640, 6) has K split (its pieces summed by a reduction, which the maps then read):
    # relu and * 2.0 go into that sum's store; (3, 6) @ (6, 640) does not split: relu in its store
    check_fusion(lambda: fn, _inputs((4, 640), (640, 6), (3, 6)), saved=3)


def test_a_product_read_through_another_layout_keeps_its_map_apart():
    def fn(x, y, z):
        p = x @ y
        return p.t() + z, p[:, :2] * 3.0   # thread i needs p's element at another place; fewer elements
    check_fusion(lambda: fn, _inputs((5, 3), (3, 5), (5, 5)), saved=0)


def test_a_product_written_through_a_view_keeps_its_map_apart(monkeypatch):
    """Attention's kept weights write P v through torch's (B, T, H, hd) layout: the maps after it
    (the transpose back, then * 2 + 1) index its result densely, so they stay a kernel of their own."""
    from webgrad.ops import attention as attention_op
    monkeypatch.setattr(attention_op, "KEEP_WEIGHTS", True)

    def fn(x):
        q, k, v = (t.view(2, 7, 2, 8).transpose(1, 2) for t in x.split(16, dim=2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return y.transpose(1, 2).contiguous().view(2, 7, 16) * 2.0 + 1.0
    check_fusion(lambda: fn, _inputs((2, 7, 48)), saved=1)   # (* 2 and + 1: one kernel)


def _train_losses(model, loss_of, x, y, fuse, steps=4):
    """Losses and final weights of a few jitted training steps (Adam) on one batch (numpy arrays)."""
    opt = wg.optim.Adam(model.parameters(), lr=1e-2)

    def step(x, y):
        loss = loss_of(model, x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    jitted = wg.jit(step, fuse=fuse)
    wg.manual_seed(seed())   # the same dropout masks in both runs
    losses = [jitted(wg.tensor(x, device="webgpu"), wg.tensor(y, device="webgpu")).item() for _ in range(steps)]
    (program,) = jitted._programs.values()
    weights = {k: to_numpy(v) for k, v in model.state_dict().items()}
    return losses, weights, len(program.recording.dispatches)


def _same_training(make_model, loss_of, x, y):
    """Trains make_model() with and without fusion: the same losses and weights, bit for bit;
    returns the dispatches fusion saved in the replayed step."""
    runs = []
    for fuse in (True, False):
        wg.manual_seed(seed())
        runs.append(_train_losses(make_model(), loss_of, x, y, fuse))
    (fused, fused_weights, fused_count), (plain, plain_weights, plain_count) = runs
    assert fused == plain and fused[-1] < fused[0], (fused, plain)
    for name in plain_weights:
        np.testing.assert_array_equal(fused_weights[name], plain_weights[name], err_msg=name)
    return plain_count - fused_count


def test_mnist_mlp_trains_the_same_fused():
    x, y = randn(32, 1, 28, 28), integers(32).astype(np.int32)
    _same_training(lambda: nn.mnist_mlp(hidden=32, device="webgpu"), lambda m, x, y: F.cross_entropy(m(x), y), x, y)


def test_gpt_trains_the_same_fused():
    layers, vocab, block = 2, int(rng().integers(8, 20)), 8
    config = wg.nn.GPTConfig(block_size=block, vocab_size=vocab, n_layer=layers, n_head=2, n_embd=16, dropout=0.1)
    tokens = integers(4, block + 1, high=vocab).astype(np.int32)
    saved = _same_training(lambda: wg.nn.GPT(config, device="webgpu"), lambda m, x, y: m(x, y)[1],
                           tokens[:, :-1], tokens[:, 1:])
    assert saved >= layers   # at least each layer's GELU backward, g * gelu_grad(a), is one kernel


def _max_pool_relu_step():
    """make_fn: a weight's gradient through (w * x).relu(), a max pool of overlapping windows (3x3,
    stride 2, padding 1: a pixel's gradient sums up to four windows) and a weighted sum."""
    start = randn(2, 3, 7, 7)

    def make_fn():
        w = wg.tensor(start, device="webgpu", requires_grad=True)

        def fn(x, g):
            w.grad = None
            y = F.max_pool2d((w * x).relu(), 3, stride=2, padding=1)
            (y * g).sum().backward()
            return w.grad * 1.0
        return fn
    return make_fn


def test_max_pool_backward_takes_relus_gradient_in_its_store(monkeypatch):
    make = _inputs((2, 3, 7, 7), (2, 3, 4, 4))
    # y * g into the pool's forward store; relu's gradient, its product with x and * 1.0 into the
    # backward's: 11 dispatches -> 6
    check_fusion(_max_pool_relu_step(), make, saved=5)
    # without the pools as producers those maps are kernels of their own after each pool
    monkeypatch.delitem(fusion._PRODUCERS, "pool")
    check_fusion(_max_pool_relu_step(), make, saved=3)


def test_max_pool_forward_keeps_its_indices_apart(monkeypatch):
    def fn(x):
        values, indices = F.max_pool2d(x, 2, stride=2, dilation=2, return_indices=True)
        return (values.tanh() * 2.0, indices * 2)
    make = _inputs((2, 2, 9, 9))
    # tanh and * 2.0 into the pool's store (its values, read by nothing else, never stored); the
    # indices' * 2 reads what other threads of the pool write, so it runs after it
    fused = check_fusion(lambda: fn, make, saved=2, kept_fewer=2)
    monkeypatch.delitem(fusion._PRODUCERS, "pool")
    check_fusion(lambda: fn, make, saved=1, kept_fewer=1)
    x = torch.from_numpy(to_numpy(make(CALLS - 1)[0]))
    values, indices = torch.nn.functional.max_pool2d(x, 2, stride=2, dilation=2, return_indices=True)
    np.testing.assert_allclose(fused[-1][0], (values.tanh() * 2.0).numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(fused[-1][1], (indices * 2).numpy())


def test_mnist_cnn_trains_the_same_fused(monkeypatch):
    monkeypatch.setattr(wg.get_backend("webgpu"), "is_software", True)   # the plan the count below is of
    x, y = randn(4, 1, 28, 28), integers(4).astype(np.int32)
    saved = _same_training(lambda: nn.mnist_cnn(channels=(4, 8), hidden=16, device="webgpu"),
                           lambda m, x, y: F.cross_entropy(m(x), y), x, y)
    # the three ReLUs into their products (a software adapter's plan: no K splits), the classifier's
    # relu gradient into the product that makes its incoming gradient, the conv blocks' into the
    # pools' backwards; cross-entropy's backward into its forward (fusion_loss.py)
    assert saved == 7, saved


def test_a_sums_store_takes_the_maps_after_it(monkeypatch):
    monkeypatch.setattr(wg.get_backend("webgpu"), "is_software", False)   # a GPU's plan: below, both passes

    def fn(x, y):
        return (x.sum(dim=1) * 0.5).tanh(), (y.sum(dim=0) + 1.0).relu(), x.amax(dim=1).relu()
    make = _inputs((5, 100), (3000, 3))
    # x's sums, a workgroup per output: * 0.5 and tanh in its store; y's columns in chunks, then a
    # thread per output sums the chunks: + 1.0 and relu in that store; a max is no producer
    fused = check_fusion(lambda: fn, make, saved=4)
    x, y = (torch.from_numpy(to_numpy(t)).double() for t in make(CALLS - 1))
    for ours, reference in zip(fused[-1], ((x.sum(1) * 0.5).tanh(), (y.sum(0) + 1.0).relu(), x.amax(1).relu())):
        np.testing.assert_allclose(ours, reference.numpy(), rtol=1e-5, atol=1e-5)


def _layer_norm_residual_step():
    """make_fn: a weight's gradient through a pre-norm residual block's input, x + (layer_norm(x) @ w):
    the gradient of x is the residual's plus layer norm's dx (autograd's add of the two)."""
    start = randn(20, 20)

    def make_fn():
        w = wg.tensor(start, device="webgpu", requires_grad=True)
        norm = nn.LayerNorm(20, device="webgpu")

        def fn(x, g):
            w.grad = None
            x = x.detach().requires_grad_()
            y = x + F.layer_norm(x, (20,), norm.weight, norm.bias) @ w
            (y * g).sum().backward()
            return x.grad * 1.0, w.grad
        return fn
    return make_fn


def test_layer_norms_backward_takes_the_residual_gradients_add_in_its_store(monkeypatch):
    make = _inputs((6, 20), (6, 20))
    # 15 dispatches -> 11: layer norm's dx + the residual's gradient, and * 1.0, in the norm's
    # backward store
    check_fusion(_layer_norm_residual_step(), make, saved=4)
    # without the norms as producers the add and * 1.0 are a kernel of their own after the norm
    monkeypatch.delitem(fusion._PRODUCERS, "norm")
    check_fusion(_layer_norm_residual_step(), make, saved=3)
