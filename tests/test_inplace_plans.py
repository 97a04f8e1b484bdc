"""In-place writes keep a plan per signature (ops/inplace.py's _WritePlan): later calls of one
signature whose target and operands lie at other offsets, or whose scalars differ, give torch's
values on fresh random inputs on both devices; views of one base see each write; version counters
count cached writes; and the errors that follow from values, not from the signature, are raised
on later calls of a signature that once succeeded."""
import numpy as np
import pytest
import torch

import webgrad as wg
from conftest import assert_close, integers, randn, rng, torch_tensor, wg_tensor

# name -> fn(base, other, row, scalar): one in-place write into a view of base at row `row`, the
# signature alike for every row (the offsets and scalars change from call to call)
WRITES = {
    "row.add_(other row)": lambda b, o, r, s: b[r].add_(o[(r + 1) % 4]),
    "row.add_(other row, alpha)": lambda b, o, r, s: b[r].add_(o[3 - r], alpha=s),
    "row.sub_(scalar)": lambda b, o, r, s: b[r].sub_(s),
    "row.mul_(scalar)": lambda b, o, r, s: b[r].mul_(s),
    "row.div_(column)": lambda b, o, r, s: b[r].div_(o[:, r] + 3.0),
    "column.clamp_(scalars)": lambda b, o, r, s: b[:, r].clamp_(-abs(s), abs(s) + 0.1),
    "column.copy_(row)": lambda b, o, r, s: b[:, r].copy_(o[r]),
    "row.fill_(scalar)": lambda b, o, r, s: b[r].fill_(s),
    "row.zero_()": lambda b, o, r, s: b[r].zero_(),
    "row += row of base": lambda b, o, r, s: b[r].__iadd__(b[(r + 2) % 4]),
    "row.mul_(itself)": lambda b, o, r, s: b[r].mul_(b[r]),
    "base.add_(row, broadcast)": lambda b, o, r, s: b.add_(o[r], alpha=s),
}


@pytest.mark.parametrize("name", list(WRITES))
def test_one_signature_many_offsets_and_scalars(name, device):
    """Each call writes at its own offset with its own scalar; after each, the whole base and the
    other operand are torch's (nothing of an earlier call's offset or scalar is kept)."""
    write = WRITES[name]
    base, other = randn(4, 4), randn(4, 4)
    ours = wg_tensor(base, device), wg_tensor(other, device)
    theirs = torch_tensor(base), torch_tensor(other)
    scalars = rng().uniform(-2, 2, size=8)
    for call, row in enumerate([0, 2, 1, 3, 3, 0, 2, 1]):
        write(*ours, row, float(scalars[call]))
        write(*theirs, row, float(scalars[call]))
        assert_close(ours[0], theirs[0], what=f"{name}, call {call} (row {row})")
        assert_close(ours[1], theirs[1], what=f"{name}, call {call}: the operand")


def test_int_target_wraps_and_casts_per_call(device):
    """Integer scalars wrap to int32 and float sources truncate into int targets at every call."""
    start = integers(3, 5, low=-50, high=50)
    ours, theirs = wg.tensor(start, device=device), torch.tensor(start)
    source = randn(3, 5) * 20
    for call, row in enumerate([0, 2, 1, 2]):
        step = int(rng().integers(-2**33, 2**33))
        ours[row].add_(step % 2**31)
        theirs[row].add_(step % 2**31)
        ours[row].copy_(wg_tensor(source[(row + call) % 3], device) * (call + 1))
        theirs[row].copy_(torch_tensor(source[(row + call) % 3]) * (call + 1))
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy(), err_msg=f"call {call} (row {row})")


def test_views_of_one_base_see_cached_writes(device):
    """A write through one view (its signature's plan cached) shows in the base and in the other
    views of it, as in torch."""
    base, other = randn(5, 6), randn(3, 5)
    results = []
    for make in (lambda a: wg_tensor(a, device), torch_tensor):
        b, o = make(base), make(other)
        rows, column, flat = b[1:4], b[:, 2], b.view(-1)
        for step in range(3):
            rows.mul_(0.5 + step)
            column.add_(o[step])
            flat[step * 7:step * 7 + 4].sub_(1.0 + step)
        results.append((b, rows, column, flat))
    for ours, theirs, what in zip(*results, ("base", "rows", "column", "flat")):
        assert_close(ours, theirs, what=what)


def test_version_counters_after_cached_writes(device):
    """Each cached write counts up the version, as torch's; a saved tensor overwritten by one
    makes backward raise torch's error."""
    x_ours, x_theirs = wg_tensor(randn(3), device), torch_tensor(randn(3))
    for _ in range(4):
        for x in (x_ours, x_theirs):
            x.add_(1.0)
            x.zero_()
            x.mul_(x)
    assert x_ours._version == x_theirs._version, (x_ours._version, x_theirs._version)
    for make in (lambda a: wg_tensor(a, device, True), lambda a: torch_tensor(a, True)):
        leaf = make(randn(4))
        for call in range(3):   # the same signature, first without, then with a saved tensor overwritten
            x = leaf * 1.0
            y = x * x
            if call == 2:
                x.add_(2.0)
                with pytest.raises(RuntimeError, match="modified by an inplace operation"):
                    y.sum().backward()
            else:
                y.sum().backward()
                x.add_(2.0)


def test_errors_on_later_calls_of_a_signature(device):
    """Errors that follow from values (the leaf rules, a partly overlapping operand) are raised on a
    signature that once succeeded; those of the signature (dtypes, shapes) on every call."""
    leaf = wg_tensor(randn(4, 3), device, True)
    grad = wg_tensor(randn(4, 3), device)
    with wg.no_grad():   # as an optimizer's step
        leaf.add_(grad, alpha=-0.1)
        leaf[1].mul_(2.0)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        leaf.add_(grad, alpha=-0.1)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        leaf[1].mul_(2.0)
    b, other = wg_tensor(randn(6), device), wg_tensor(randn(6), device)
    b[1:5].add_(other[0:4])
    with pytest.raises(RuntimeError, match="some elements of the input tensor and the written-to tensor"):
        b[1:5].add_(b[0:4])
    ints = wg.tensor(integers(4), device=device)
    for _ in range(2):
        with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Int"):
            ints.add_(grad[0, :1].detach().expand(4))
        with pytest.raises(RuntimeError, match=r"output with shape \[3\] doesn't match the broadcast shape \[4, 3\]"):
            grad[0].add_(leaf.detach())
        with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
            grad[0].expand(4, 3).add_(leaf.detach())


def test_overlapping_operands_as_torch(device):
    """x.add_(x) reads x's old values; disjoint parts of one storage read each other's old values."""
    a = randn(8)
    results = []
    for make in (lambda v: wg_tensor(v, device), torch_tensor):
        x = make(a)
        for _ in range(2):
            x.add_(x)
            x[0:3].mul_(x[5:8])
            x[4:8].sub_(x[0:4], alpha=0.5)
        results.append(x)
    assert_close(*results, what="x after its self-overlapping writes")


def test_uint8_and_strided_writes_reading_themselves(device):
    """Writes whose operand is the target itself (read in the kernel, no copy) through strided views
    and into bytes packed four to a word, as torch's wrapping uint8 arithmetic."""
    start = integers(4, 6, high=250).astype(np.uint8)
    results = []
    for make in (lambda v: wg.tensor(v, device=device), torch.tensor):
        x = make(start)
        for col in (1, 4, 1):
            x[:, col].mul_(3)
            x[col % 4, 1:5].add_(x[col % 4, 1:5])
            x.t()[col].sub_(7)
        results.append(x)
    np.testing.assert_array_equal(results[0].numpy(), results[1].numpy())


def test_writes_reading_themselves_under_jit():
    """Writes that read their own target: eager (the warm-up call: no copy of it) and recorded (through
    copies, which fuse with the maps around them), replayed from each call's inputs, give torch's values."""
    start = randn(6)
    p_ours, p_theirs = wg_tensor(start, "webgpu"), torch_tensor(start)

    @wg.jit
    def step(grad):
        with wg.no_grad():
            p_ours.mul_(0.9).add_(grad, alpha=-0.1)
        return p_ours * 2.0 + 1.0
    for call in range(4):
        grad = randn(6)
        out = step(wg_tensor(grad, "webgpu"))
        p_theirs.mul_(0.9).add_(torch_tensor(grad), alpha=-0.1)
        assert_close(p_ours, p_theirs, what=f"p after call {call}")
        assert_close(out, p_theirs * 2.0 + 1.0, what=f"the step's result, call {call}")


def test_operand_at_the_targets_offset_of_another_shape(device):
    """An operand that starts where x does but broadcasts (not x's own elements) is refused as torch
    refuses it, after the same signature with an operand elsewhere succeeded."""
    start, other_start = randn(5), randn(5)
    results = []
    for make in (lambda v: wg_tensor(v, device), torch_tensor):
        b, other = make(start), make(other_start)
        b[0:4].add_(other[0:1])
        with pytest.raises(RuntimeError, match="some elements of the input tensor and the written-to tensor"):
            b[0:4].add_(b[0:1])
        results.append(b)
    assert_close(*results, what="b, unchanged by the refused write")
