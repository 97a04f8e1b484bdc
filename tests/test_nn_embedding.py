"""F.embedding and nn.Embedding against torch: the rows picked, the weight's gradient summed on the
device (repeated indices, padding_idx, scale_grad_by_freq; on a GPU in pieces where the rows are few),
torch's init and module rules, and one kernel each way (two backward where in pieces)."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import webgrad as wg
import webgrad.nn.functional as F
from conftest import assert_close, check_op, dispatched_kernels, integers, randn, rng, tag, to_numpy, wg_tensor


@pytest.mark.parametrize("rows,cols,index_shape", [(10, 3, (5,)), (7, 300, (3, 4)), (50, 16, (2, 3, 70)),
                                                   (1000, 5, (9,)), (4, 1, ()), (6, 8, (0,))])
@pytest.mark.parametrize("padding_idx", [None, 2, -1])
@pytest.mark.parametrize("scale_grad_by_freq", [False, True])
def test_embedding(rows, cols, index_shape, padding_idx, scale_grad_by_freq, device):
    """Index counts past a kernel chunk (256), widths past a workgroup (256 columns), every row picked
    several times (few rows) or mostly not at all (many). (The padding row's gradient is 0, and
    scale_grad_by_freq's divided, by definition: not their finite differences.)"""
    index = integers(*index_shape, low=0, high=rows)
    if index.size:
        index.flat[0] = rows - 1   # the padding row (-1) is picked at least once
    check_op(lambda i, w: F.embedding(i, w, padding_idx, scale_grad_by_freq=scale_grad_by_freq), index,
             randn(rows, cols), device=device, fd=padding_idx is None and not scale_grad_by_freq,
             torch_fn=lambda i, w: TF.embedding(i, w, padding_idx, scale_grad_by_freq=scale_grad_by_freq))


def test_embedding_of_views(device):
    """A strided weight (a transpose) and strided indices (every other one)."""
    index = integers(4, 6, low=0, high=9)
    check_op(lambda i, w: F.embedding(i[:, ::2], w.T), index, randn(5, 9), device=device,
             torch_fn=lambda i, w: TF.embedding(i[:, ::2], w.T))


def test_embedding_backward_is_deterministic(device):
    """The same picks give the same gradient bit for bit (sums in the positions' order, no atomics)."""
    index = wg_tensor(integers(4000, low=0, high=3), device)
    grads = []
    for _ in range(2):
        weight = wg_tensor(randn(3, 40), device, requires_grad=True)
        F.embedding(index, weight).backward(wg_tensor(np.full((4000, 40), 0.1, np.float32), device))
        grads.append(to_numpy(weight.grad))
    np.testing.assert_array_equal(grads[0], grads[1], err_msg=tag("two backward passes"))


def test_embedding_errors(device):
    weight = wg_tensor(randn(5, 3), device)
    with pytest.raises(NotImplementedError, match="max_norm"):
        F.embedding(wg_tensor(integers(2, high=5), device), weight, max_norm=1.0)
    with pytest.raises(RuntimeError, match="int32"):
        F.embedding(wg_tensor(randn(2), device), weight)
    with pytest.raises(AssertionError, match="Padding_idx"):
        F.embedding(wg_tensor(integers(2, high=5), device), weight, padding_idx=5)
    with pytest.raises(RuntimeError, match="2-D"):
        F.embedding(wg_tensor(integers(2, high=5), device), wg_tensor(randn(5), device))
    with pytest.raises(IndexError, match="out of range"):   # (webgpu's kernel finds it: raised at the read)
        F.embedding(wg_tensor(np.array([0, 5], np.int32), device), weight).tolist()


def test_embedding_index_out_of_range_raises_as_in_torch(device):
    """An index past the rows, negative (torch's embedding counts none from the end) or at int32's end
    raises torch's IndexError naming it, at the op on cpu and at the next read on webgpu (the kernel
    records it on the device); the next valid lookup reads torch's rows."""
    g = rng()
    rows, cols = int(g.integers(1, 20)), int(g.integers(1, 300))
    table, index = randn(rows, cols), integers(int(g.integers(1, 600)), low=0, high=rows)
    bad = int(g.choice([g.integers(rows, 3 * rows + 1), g.integers(-3 * rows, 0), 2**31 - 1, -2**31]))
    index[int(g.integers(0, index.size))] = bad
    weight = wg_tensor(table, device)
    with pytest.raises(IndexError, match="index out of range in self"):
        TF.embedding(torch.from_numpy(index).long(), torch.from_numpy(table))
    with pytest.raises(IndexError, match=rf"^embedding: index out of range in self \(index {bad}; indices must lie "
                                         rf"in \[0, {rows}\)\)"):
        F.embedding(wg_tensor(index, device), weight).tolist()
    index[index == bad] = rows - 1
    assert_close(F.embedding(wg_tensor(index, device), weight), table[index], what="the next lookup")


def test_embedding_module_init_and_rules(device):
    """torch's N(0, 1) init with the padding row zeroed, repr, state_dict name, from_pretrained."""
    ours = wg.nn.Embedding(400, 50, padding_idx=-3, device=device)
    theirs = torch.nn.Embedding(400, 50, padding_idx=-3)
    assert repr(ours) == repr(theirs) and ours.padding_idx == 397, tag(repr(ours))
    assert list(ours.state_dict()) == list(theirs.state_dict()), tag("state_dict keys")
    w = to_numpy(ours.weight)
    assert np.all(w[397] == 0), tag("padding row")
    rest = np.delete(w, 397, axis=0)
    assert abs(rest.mean()) < 0.02 and abs(rest.std() - 1) < 0.02, tag(f"N(0, 1): mean {rest.mean()} std {rest.std()}")
    scaled = wg.nn.Embedding(4, 2, scale_grad_by_freq=True)
    assert repr(scaled) == repr(torch.nn.Embedding(4, 2, scale_grad_by_freq=True)), tag(repr(scaled))
    table = randn(6, 4)
    frozen = wg.nn.Embedding.from_pretrained(wg_tensor(table, device))
    assert not frozen.weight.requires_grad and frozen.weight.shape == (6, 4), tag("from_pretrained freezes")
    assert wg.nn.Embedding.from_pretrained(wg_tensor(table, device), freeze=False).weight.requires_grad
    index = integers(3, 5, low=0, high=6)
    assert_close(frozen(wg_tensor(index, device)), table[index], what="from_pretrained lookup")
    with pytest.raises(NotImplementedError, match="max_norm"):
        wg.nn.Embedding(4, 2, max_norm=1.0)
    with pytest.raises(AssertionError, match="Padding_idx"):
        wg.nn.Embedding(4, 2, padding_idx=-5)


def test_embedding_module_trains_like_torch(device):
    """torch's weights copied in: one SGD step gives the same table (the padding row stays 0)."""
    theirs = torch.nn.Embedding(11, 6, padding_idx=0)
    ours = wg.nn.Embedding(11, 6, padding_idx=0, device=device)
    ours.load_state_dict({"weight": wg_tensor(theirs.weight.detach().numpy(), device)})
    index = integers(4, 9, low=0, high=11)
    target = randn(4, 9, 6)
    for module, tensor, opt in ((theirs, torch.tensor, torch.optim.SGD), (ours, lambda a: wg_tensor(a, device),
                                                                         wg.optim.SGD)):
        step = opt(module.parameters(), lr=0.5)
        ((module(tensor(index)) - tensor(target)) ** 2).mean().backward()
        step.step()
    assert_close(ours.weight, theirs.weight, what="weight after a step")
    assert np.all(to_numpy(ours.weight)[0] == 0), tag("padding row after a step")


def test_embedding_is_one_kernel_each_way(monkeypatch):
    weight = wg_tensor(randn(70, 20), "webgpu", requires_grad=True)
    index = wg_tensor(integers(3, 300, low=0, high=70), "webgpu")
    g = wg_tensor(randn(3, 300, 20), "webgpu")
    kernels = dispatched_kernels(monkeypatch)
    out = F.embedding(index, weight, padding_idx=int(rng().integers(0, 70)))
    assert len(kernels) == 1, tag(f"forward took {len(kernels)} dispatches")
    out.backward(g)
    assert len(kernels) == 2, tag(f"backward took {len(kernels) - 1} dispatches")


def test_embedding_past_the_grid():
    """The backward's workgroup per row: past 65535 rows the grid spills into y."""
    rows = wg.get_backend("webgpu").runtime.limits["max_compute_workgroups_per_dimension"] + 9
    index = integers(50, low=0, high=rows)
    index[0] = rows - 1
    check_op(lambda i, w: F.embedding(i, w), index, randn(rows, 2), device="webgpu",
             torch_fn=lambda i, w: TF.embedding(i, w))


@pytest.mark.parametrize("padding_idx,scale_grad_by_freq", [(None, False), (1, False), (None, True)])
def test_embedding_backward_in_pieces_as_on_a_gpu(padding_idx, scale_grad_by_freq, monkeypatch):
    """On a GPU a few rows' backward splits the indices into pieces (the last one shorter), summed after
    it: as torch's, and two dispatches; scale_grad_by_freq keeps one (its counts are the whole's)."""
    from webgrad.backends.webgpu.kernels import embedding as embedding_kernels
    monkeypatch.setattr(wg.get_backend("webgpu"), "is_software", False)
    monkeypatch.setattr(embedding_kernels, "EMBEDDING_MIN_SPAN", 256)
    rows, count = 5, int(rng().integers(1100, 1500))
    index, weight, grad = integers(count, low=0, high=rows), randn(rows, 300), randn(count, 300)
    check_op(lambda i, w: F.embedding(i, w, padding_idx, scale_grad_by_freq=scale_grad_by_freq), index, weight,
             device="webgpu", fd=False,
             torch_fn=lambda i, w: TF.embedding(i, w, padding_idx, scale_grad_by_freq=scale_grad_by_freq))
    w = wg_tensor(weight, "webgpu", requires_grad=True)
    out = F.embedding(wg_tensor(index, "webgpu"), w, padding_idx, scale_grad_by_freq=scale_grad_by_freq)
    kernels = dispatched_kernels(monkeypatch)
    out.backward(wg_tensor(grad, "webgpu"))
    assert len(kernels) == (1 if scale_grad_by_freq else 2), tag(f"backward took {len(kernels)} dispatches")
