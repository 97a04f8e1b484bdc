"""Tensor hooks, torch.autograd.grad / backward, torch.utils.checkpoint and the integer-mean
refusals, each against torch on CPU run side by side on the same random inputs."""
import warnings

import numpy as np
import pytest
import torch
import torch.utils.checkpoint

import webgrad as wg
from conftest import assert_close, integers, randn, seed, to_numpy, torch_tensor, wg_tensor
from webgrad.utils.checkpoint import checkpoint, checkpoint_sequential


def _both(a, device, requires_grad=True):
    return wg_tensor(a, device, requires_grad=requires_grad), torch_tensor(a, requires_grad=requires_grad)


def _raises_as_torch(wg_call, torch_call):
    """wg_call raises what torch_call does: the same exception type and message."""
    with pytest.raises(Exception) as expected:
        torch_call()
    with pytest.raises(expected.type) as got:
        wg_call()
    assert str(got.value) == str(expected.value)


# ---- Tensor.register_hook ----
def test_hooks_on_leaves_and_non_leaves_as_torch(device):
    a, b, c, d = randn(3, 4), randn(3, 4), randn(3, 4), randn(3, 4)
    results = []
    for x, w, scale, shift in ((wg_tensor(a, device, True), wg_tensor(b, device, True), wg_tensor(c, device),
                                wg_tensor(d, device)),
                               (torch_tensor(a, True), torch_tensor(b, True), torch_tensor(c), torch_tensor(d))):
        seen = []
        y = x * w
        y.retain_grad()
        y.register_hook(lambda g: g * scale)               # replaces what flows on (and y.grad)
        y.register_hook(lambda g: seen.append(g.clone()))  # runs second: sees the first's result
        x.register_hook(lambda g: g + shift)               # before accumulation into x.grad
        (y * y).sum().backward()
        results.append([x.grad, w.grad, y.grad, seen[0]])
    for mine, theirs, what in zip(*results, ("x.grad", "w.grad", "y.grad", "second hook's argument")):
        assert_close(mine, to_numpy(theirs), what=what)


def test_hook_handle_remove(device):
    a = randn(5)
    x = wg_tensor(a, device, requires_grad=True)
    calls = []
    handle = x.register_hook(lambda g: calls.append(1) or g * 100)
    kept = x.register_hook(lambda g: calls.append(2))
    handle.remove()
    handle.remove()   # a second remove does nothing, as torch's
    (x * x).sum().backward()
    assert calls == [2]
    assert_close(x.grad, 2 * a, what="gradient with the replacing hook removed")
    kept.remove()
    (x * x).sum().backward()
    assert calls == [2]


def test_hook_refusals_as_torch(device):
    a = randn(3)
    _raises_as_torch(lambda: wg_tensor(a, device).register_hook(lambda g: g),
                     lambda: torch_tensor(a).register_hook(lambda g: g))
    x = wg_tensor(a, device, requires_grad=True)
    x.register_hook(lambda g: g[:2])
    with pytest.raises(RuntimeError, match="changed the size"):
        (x * 2).sum().backward()
    y = wg_tensor(a, device, requires_grad=True)
    y.register_hook(lambda g: g.int())
    with pytest.raises(RuntimeError, match="changed the type"):
        (y * 2).sum().backward()


# ---- torch.autograd.grad ----
def test_grad_of_several_outputs_with_grad_outputs_as_torch(device):
    a, b, g1, g2 = randn(4, 3), randn(3, 2), randn(4, 2), randn(4, 3)
    x, tx = _both(a, device)
    w, tw = _both(b, device)
    before = randn(3, 2)
    w.grad, tw.grad = wg_tensor(before, device), torch_tensor(before)
    mine = wg.autograd.grad([(x @ w).tanh(), x * x], [x, w], grad_outputs=[wg_tensor(g1, device),
                                                                            wg_tensor(g2, device)])
    theirs = torch.autograd.grad([(tx @ tw).tanh(), tx * tx], [tx, tw], grad_outputs=[torch_tensor(g1),
                                                                                    torch_tensor(g2)])
    assert isinstance(mine, tuple) and len(mine) == 2
    for m, t, what in zip(mine, theirs, ("d/dx", "d/dw")):
        assert_close(m, to_numpy(t), what=what)
    assert x.grad is None, "autograd.grad must not fill .grad"
    assert_close(w.grad, before, what="an existing .grad is left as it was")


def test_grad_through_a_non_leaf_input_and_single_tensors(device):
    a = randn(5)
    x, tx = _both(a, device)
    y, ty = x.exp(), tx.exp()
    (gy,) = wg.autograd.grad((y * y).sum(), y)
    assert_close(gy, to_numpy(torch.autograd.grad((ty * ty).sum(), ty)[0]), what="d/dy of a non-leaf y")
    assert x.grad is None


def test_grad_allow_unused_and_materialize_grads_as_torch(device):
    a, b = randn(3), randn(3)
    x, tx = _both(a, device)
    u, tu = _both(b, device)
    _raises_as_torch(lambda: wg.autograd.grad((x * 2).sum(), [x, u]),
                     lambda: torch.autograd.grad((tx * 2).sum(), [tx, tu]))
    gx, gu = wg.autograd.grad((x * 2).sum(), [x, u], allow_unused=True)
    assert gu is None
    assert_close(gx, np.full(3, 2, np.float32), what="used input's gradient")
    gx, gu = wg.autograd.grad((x * 2).sum(), [x, u], materialize_grads=True)
    assert_close(gu, np.zeros(3, np.float32), what="materialized unused gradient")
    _raises_as_torch(lambda: wg.autograd.grad((x * 2).sum(), [x, u], allow_unused=False, materialize_grads=True),
                     lambda: torch.autograd.grad((tx * 2).sum(), [tx, tu], allow_unused=False,
                                                 materialize_grads=True))


def test_grad_refusals_as_torch(device):
    a = randn(3)
    x, tx = _both(a, device)
    _raises_as_torch(lambda: wg.autograd.grad(x * 2, [x]), lambda: torch.autograd.grad(tx * 2, [tx]))
    _raises_as_torch(lambda: wg.autograd.grad((x * 2).sum(), [x.detach()]),
                     lambda: torch.autograd.grad((tx * 2).sum(), [tx.detach()]))
    _raises_as_torch(lambda: wg.autograd.grad(x.detach().sum(), [x]),
                     lambda: torch.autograd.grad(tx.detach().sum(), [tx]))
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        wg.autograd.grad((x * 2).sum(), x, grad_outputs=[wg_tensor(randn(2), device)])
    with pytest.raises(NotImplementedError, match="create_graph"):
        wg.autograd.grad((x * x).sum(), x, create_graph=True)
    loss = (x * x).sum()
    first = wg.autograd.grad(loss, x, retain_graph=True)[0]
    assert_close(wg.autograd.grad(loss, x)[0], to_numpy(first), what="grad again after retain_graph")
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        wg.autograd.grad(loss, x)


def test_autograd_backward_and_backward_inputs_as_torch(device):
    a, b, g = randn(4), randn(4), randn(4)
    x, tx = _both(a, device)
    w, tw = _both(b, device)
    wg.autograd.backward([(x * w).sum(), x.sin()], [None, wg_tensor(g, device)])
    torch.autograd.backward([(tx * tw).sum(), tx.sin()], [None, torch_tensor(g)])
    assert_close(x.grad, to_numpy(tx.grad), what="x.grad")
    assert_close(w.grad, to_numpy(tw.grad), what="w.grad")
    x2, tx2 = _both(a, device)
    w2, tw2 = _both(b, device)
    (x2 * w2 * w2).sum().backward(inputs=[w2])
    (tx2 * tw2 * tw2).sum().backward(inputs=[tw2])
    assert x2.grad is None and tx2.grad is None
    assert_close(w2.grad, to_numpy(tw2.grad), what="w.grad with inputs=[w]")


# ---- torch.utils.checkpoint ----
def _mlp(device, dropout=0.0):
    layers = [wg.nn.Linear(4, 8), wg.nn.Tanh(), wg.nn.Dropout(dropout), wg.nn.Linear(8, 8), wg.nn.ReLU(),
              wg.nn.Linear(8, 3)]
    return wg.nn.Sequential(*layers).to(device)


def _torch_twin(net):
    twin = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Dropout(0.0), torch.nn.Linear(8, 8),
                               torch.nn.ReLU(), torch.nn.Linear(8, 3))
    twin.load_state_dict({k: torch.from_numpy(to_numpy(v).copy()) for k, v in net.state_dict().items()})
    return twin


def _gradients(net, a, device, run):
    """run(net, x)'s output and the gradients of (output * weights).sum() for x and every parameter."""
    for p in net.parameters():
        p.grad = None
    x = wg_tensor(a, device, requires_grad=True)
    wg.manual_seed(seed())
    out = run(net, x)
    (out * wg_tensor(np.linspace(-1, 1, out.numel(), dtype=np.float32).reshape(out.shape), device)).sum().backward()
    return [to_numpy(out)] + [to_numpy(x.grad)] + [to_numpy(p.grad) for p in net.parameters()]


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_checkpoint_gradients_equal_the_plain_run_and_torch(device, use_reentrant):
    net, a = _mlp(device), randn(5, 4)
    calls = []

    def counted(x):
        calls.append(1)
        return net(x)
    plain = _gradients(net, a, device, lambda n, x: n(x))
    kept = _gradients(net, a, device, lambda n, x: checkpoint(counted, x, use_reentrant=use_reentrant))
    assert len(calls) == 2, "the checkpointed function runs once forward and once more in backward"
    twin, tx = _torch_twin(net), torch_tensor(a, True)
    out = twin(tx)
    (out * torch.linspace(-1, 1, out.numel()).reshape(out.shape)).sum().backward()
    oracle = [out.detach().numpy(), tx.grad.numpy()] + [p.grad.numpy() for p in twin.parameters()]
    for k, (mine, plain_k, theirs) in enumerate(zip(kept, plain, oracle)):
        assert_close(mine, plain_k, what=f"checkpointed vs plain, array {k}")
        assert_close(mine, theirs, what=f"checkpointed vs torch, array {k}")


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_checkpoint_recomputes_dropout_with_the_same_masks(device, use_reentrant):
    net, a = _mlp(device, dropout=0.5), randn(6, 4)
    plain = _gradients(net, a, device, lambda n, x: n(x))
    after_plain = wg.rand(3, device=device).tolist()
    kept = _gradients(net, a, device, lambda n, x: checkpoint(n, x, use_reentrant=use_reentrant))
    after_kept = wg.rand(3, device=device).tolist()
    for k, (mine, ref) in enumerate(zip(kept, plain)):
        assert_close(mine, ref, what=f"checkpointed dropout vs plain, array {k}")
    assert after_kept == after_plain, "the recomputation leaves the generator where the plain run left it"
    unpreserved = _gradients(net, a, device, lambda n, x: checkpoint(n, x, use_reentrant=use_reentrant,
                                                                       preserve_rng_state=False))
    assert not np.allclose(unpreserved[2], plain[2]), "without the saved state the masks differ"


@pytest.mark.parametrize("segments", [1, 2, 3])
def test_checkpoint_sequential_equals_the_plain_run(device, segments):
    net, a = _mlp(device), randn(3, 4)
    plain = _gradients(net, a, device, lambda n, x: n(x))
    kept = _gradients(net, a, device, lambda n, x: checkpoint_sequential(n, segments, x, use_reentrant=False))
    for k, (mine, ref) in enumerate(zip(kept, plain)):
        assert_close(mine, ref, what=f"checkpoint_sequential({segments}) vs plain, array {k}")
    with pytest.raises(ValueError, match="segments"):
        checkpoint_sequential(net, 7, wg_tensor(a, device), use_reentrant=False)


def test_checkpoint_inputs_without_grad_as_torch(device):
    """Non-reentrant: the parameters inside get gradients though the input needs none; reentrant:
    the output needs no grad, with torch's warning. Under no_grad the function just runs."""
    net, a = _mlp(device), randn(2, 4)
    twin, tx = _torch_twin(net), torch_tensor(a)
    x = wg_tensor(a, device)
    checkpoint(net, x, use_reentrant=False).sum().backward()
    torch.utils.checkpoint.checkpoint(twin, tx, use_reentrant=False).sum().backward()
    for p, tp in zip(net.parameters(), twin.parameters()):
        assert_close(p.grad, tp.grad.numpy(), what="parameter gradient through a checkpoint")
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
        assert not checkpoint(net, x, use_reentrant=True).requires_grad
    with pytest.warns(UserWarning, match="use_reentrant"):
        assert checkpoint(net, wg_tensor(a, device, requires_grad=True)).requires_grad
    with wg.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not checkpoint(net, x, use_reentrant=False).requires_grad
    with pytest.raises(ValueError, match="Unexpected keyword arguments"):
        checkpoint(lambda t, scale: t * scale, x, use_reentrant=True, scale=2.0)


def test_checkpoint_of_several_outputs_and_keyword_arguments(device):
    a, b = randn(3, 2), randn(3, 2)
    x, tx = _both(a, device)
    w, tw = _both(b, device)

    def pair(t, weight, power=2):
        return t * weight, (t ** power).sum(), "not a tensor"
    first, second, text = checkpoint(pair, x, w, use_reentrant=False, power=3)
    (first.sum() + second * 2).backward()
    tfirst, tsecond, _ = pair(tx, tw, power=3)
    (tfirst.sum() + tsecond * 2).backward()
    assert text == "not a tensor"
    assert_close(x.grad, tx.grad.numpy(), what="d/dx through two checkpointed outputs")
    assert_close(w.grad, tw.grad.numpy(), what="d/dw")


# ---- mean, var, std of integer tensors ----
@pytest.mark.parametrize("name", ["mean", "nanmean", "var", "std"])
def test_mean_var_std_of_integer_tensors_raise_as_torch(device, name):
    values = integers(4, 3, low=0, high=5)
    for wg_dtype, torch_dtype in ((wg.int32, torch.int32), (wg.bool, torch.bool), (wg.uint8, torch.uint8)):
        mine, theirs = wg_tensor(values, device).to(wg_dtype), torch_tensor(values).to(torch_dtype)
        _raises_as_torch(lambda: getattr(mine, name)(), lambda: getattr(theirs, name)())
        _raises_as_torch(lambda: getattr(mine, name)(0), lambda: getattr(theirs, name)(0))
    if name == "mean":   # a floating dtype= makes it a float mean, as in torch
        assert_close(wg_tensor(values, device).mean(1, dtype=wg.float32),
                     torch_tensor(values).mean(1, dtype=torch.float32).numpy(), what="mean(dtype=float32)")
        _raises_as_torch(lambda: wg_tensor(values, device).float().mean(dtype=wg.int32),
                         lambda: torch_tensor(values).float().mean(dtype=torch.int32))


def test_checkpoint_recomputes_under_the_autocast_of_its_first_run(device):
    net, a = _mlp(device), randn(4, 4)

    def run(fn):
        for p in net.parameters():
            p.grad = None
        with wg.autocast(device, dtype=wg.float16):
            out = fn(wg_tensor(a, device))
        assert out.dtype == wg.float16
        out.float().sum().backward()
        return [to_numpy(p.grad) for p in net.parameters()]
    plain = run(net)
    for k, (mine, ref) in enumerate(zip(run(lambda x: checkpoint(net, x, use_reentrant=False)), plain)):
        assert np.array_equal(mine, ref), f"float16 gradient {k} differs from the plain autocast run's"


def test_checkpoint_under_autograd_grad_as_torch(device):
    """Non-reentrant: autograd.grad through it, the parameters' .grad untouched; reentrant: torch's refusal."""
    net, a = _mlp(device), randn(3, 4)
    twin, tx = _torch_twin(net), torch_tensor(a, True)
    x = wg_tensor(a, device, requires_grad=True)
    (gx,) = wg.autograd.grad(checkpoint(net, x, use_reentrant=False).sum(), x)
    (tgx,) = torch.autograd.grad(torch.utils.checkpoint.checkpoint(twin, tx, use_reentrant=False).sum(), tx)
    assert_close(gx, tgx.numpy(), what="autograd.grad through a checkpoint")
    assert all(p.grad is None for p in net.parameters())
    _raises_as_torch(lambda: wg.autograd.grad(checkpoint(net, x, use_reentrant=True).sum(), x),
                     lambda: torch.autograd.grad(torch.utils.checkpoint.checkpoint(twin, tx, use_reentrant=True).sum(),
                                                 tx))
