"""Arithmetic on bool tensors as torch's: bool + bool and bool * bool stay bool (or, and), as do
maximum, minimum, where and & | ^ of bools and Python bools; an int operand makes the result int32
(torch's int64), a float one float32; subtraction and negation of a bool tensor raise torch's
RuntimeError. In place as well: add_ / mul_ of bools, &= |= ^= and logical_*_ write into the tensor
itself. On both devices, with strided and broadcast operands."""
import operator

import numpy as np
import pytest
import torch

import webgrad as wg
from conftest import rng, tag
from torch_api import raises_like


def operands(device):
    """Fresh random masks a (strided) and b (broadcast against a), an int32 and a float32 tensor like
    b, a Python int: webgrad's on device, and torch's."""
    s0, s1 = (int(s) for s in rng().integers(2, 8, 2))
    a = rng().random((s1, s0)) < 0.5
    b = rng().random(s1) < 0.5
    i = rng().integers(-100, 100, s1).astype(np.int32)
    f = rng().standard_normal(s1).astype(np.float32)
    n = int(rng().integers(-100, 100))
    ours = [wg.tensor(v, device=device) for v in (a, b, i, f)]
    theirs = [torch.from_numpy(v.copy()) for v in (a, b, i, f)]
    return (ours[0].T, *ours[1:], n), (theirs[0].T, *theirs[1:], n)


# name -> fn(library, a, b, i, f, n)
CASES = {
    "a + b": lambda L, a, b, i, f, n: a + b,
    "a * b": lambda L, a, b, i, f, n: a * b,
    "a & b": lambda L, a, b, i, f, n: a & b,
    "a | b": lambda L, a, b, i, f, n: a | b,
    "a ^ b": lambda L, a, b, i, f, n: a ^ b,
    "~a": lambda L, a, b, i, f, n: ~a,
    "a + True": lambda L, a, b, i, f, n: a + True,
    "False + a": lambda L, a, b, i, f, n: False + a,
    "a * True": lambda L, a, b, i, f, n: a * True,
    "a ^ True": lambda L, a, b, i, f, n: a ^ True,
    "a + int": lambda L, a, b, i, f, n: a + n,
    "int * a": lambda L, a, b, i, f, n: n * a,
    "a + 0.5": lambda L, a, b, i, f, n: a + 0.5,
    "a * int32": lambda L, a, b, i, f, n: a * i,
    "a + float32": lambda L, a, b, i, f, n: a + f,
    "maximum": lambda L, a, b, i, f, n: L.maximum(a, b),
    "minimum": lambda L, a, b, i, f, n: L.minimum(a, b),
    "where of bools": lambda L, a, b, i, f, n: L.where(b, a, ~b),
    "where with False": lambda L, a, b, i, f, n: L.where(b, a, False),
    "where with an int": lambda L, a, b, i, f, n: L.where(b, a, n),
    "logical_xor with int32": lambda L, a, b, i, f, n: L.logical_xor(a, i),
    "(a + b).sum()": lambda L, a, b, i, f, n: (a + b).sum(),
}

REFUSED = {
    "a - b": lambda a, b, i, f, n: a - b,
    "a - True": lambda a, b, i, f, n: a - True,
    "a - int": lambda a, b, i, f, n: a - n,
    "int - a": lambda a, b, i, f, n: n - a,
    "int32 - a": lambda a, b, i, f, n: i - a,
    "a - float32": lambda a, b, i, f, n: a - f,
    "-a": lambda a, b, i, f, n: -a,
    "a.neg()": lambda a, b, i, f, n: a.neg(),
    "a.sub_(b)": lambda a, b, i, f, n: a.sub_(b),
}

# name -> (the written tensor's index among the operands, fn(a, b, i, f, n))
IN_PLACE = {
    "a.add_(b)": (0, lambda a, b, i, f, n: a.add_(b)),
    "a.mul_(b)": (0, lambda a, b, i, f, n: a.mul_(b)),
    "a.add_(True)": (0, lambda a, b, i, f, n: a.add_(True)),
    "a += b": (0, lambda a, b, i, f, n: operator.iadd(a, b)),
    "a &= b": (0, lambda a, b, i, f, n: operator.iand(a, b)),
    "a |= b": (0, lambda a, b, i, f, n: operator.ior(a, b)),
    "a ^= b": (0, lambda a, b, i, f, n: operator.ixor(a, b)),
    "a |= True": (0, lambda a, b, i, f, n: operator.ior(a, True)),
    "a.logical_and_(b)": (0, lambda a, b, i, f, n: a.logical_and_(b)),
    "a.logical_or_(int32)": (0, lambda a, b, i, f, n: a.logical_or_(i)),
    "a.logical_xor_(b)": (0, lambda a, b, i, f, n: a.logical_xor_(b)),
    "a.logical_not_()": (0, lambda a, b, i, f, n: a.logical_not_()),
    "float32.logical_and_(b)": (3, lambda a, b, i, f, n: f.logical_and_(b)),
    "int32.add_(b)": (2, lambda a, b, i, f, n: i.add_(b)),
}
# an int result does not go into a bool tensor; & | ^ take bools and ints only
IN_PLACE_REFUSED = {
    "a.add_(int32)": lambda a, b, i, f, n: a.add_(i),
    "a.mul_(int)": lambda a, b, i, f, n: a.mul_(n),
    "float32 |= b": lambda a, b, i, f, n: operator.ior(f, b),
}


@pytest.mark.parametrize("name", CASES)
def test_bool_arithmetic_matches_torch(device, name):
    ours_args, theirs_args = operands(device)
    ours, theirs = CASES[name](wg, *ours_args), CASES[name](torch, *theirs_args)
    expected = theirs.to(torch.int32) if theirs.dtype is torch.int64 else theirs
    assert ours.dtype.name == str(expected.dtype).removeprefix("torch."), tag(f"{name}: {ours.dtype} vs {theirs.dtype}")
    np.testing.assert_allclose(ours.numpy(), expected.numpy(), rtol=1e-6, err_msg=tag(name))


@pytest.mark.parametrize("name", REFUSED)
def test_bool_subtraction_and_negation_raise_like_torch(device, name):
    ours_args, theirs_args = operands(device)
    ours, _ = raises_like(lambda: REFUSED[name](*ours_args), lambda: REFUSED[name](*theirs_args))
    assert "bool tensor" in str(ours) and ("~" in str(ours)), tag(f"{name}: {ours}")


@pytest.mark.parametrize("name", IN_PLACE)
def test_bool_in_place_matches_torch(device, name):
    """The op returns the tensor it wrote (a view of a transposed mask for a), whose values are torch's."""
    ours_args, theirs_args = operands(device)
    which, fn = IN_PLACE[name]
    target, expected = ours_args[which], theirs_args[which]
    assert fn(*ours_args) is target and fn(*theirs_args) is expected
    assert target.dtype.name == str(expected.dtype).removeprefix("torch."), tag(name)
    np.testing.assert_array_equal(target.numpy(), expected.numpy(), err_msg=tag(name))


@pytest.mark.parametrize("name", IN_PLACE_REFUSED)
def test_bool_in_place_refusals_match_torch(device, name):
    ours_args, theirs_args = operands(device)
    raises_like(lambda: IN_PLACE_REFUSED[name](*ours_args), lambda: IN_PLACE_REFUSED[name](*theirs_args))
