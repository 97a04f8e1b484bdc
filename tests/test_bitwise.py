"""& | ^ ~ and bitwise_* on int32 and uint8 tensors as torch's: bitwise, promoted as torch promotes
(uint8 with uint8 stays uint8, with int32 or a negative Python int int32; torch's int64 is our
int32), in place too; float operands raise torch's RuntimeError. Both devices, with strided and
broadcast operands and the full range of values (negative ints, bytes over 127)."""
import operator

import numpy as np
import pytest
import torch

import webgrad as wg
from conftest import rng, tag
from torch_api import raises_like


def operands(device):
    """Fresh random int32 i (strided) and j (broadcast against i), uint8 u and v alike, a Python int n."""
    s0, s1 = (int(s) for s in rng().integers(2, 8, 2))
    values = [rng().integers(-2**31, 2**31, (s1, s0), dtype=np.int64).astype(np.int32),
              rng().integers(-2**31, 2**31, s1, dtype=np.int64).astype(np.int32),
              rng().integers(0, 256, (s1, s0)).astype(np.uint8),
              rng().integers(0, 256, s1).astype(np.uint8)]
    n = int(rng().integers(-1000, 1000))
    ours = [wg.tensor(v, device=device) for v in values]
    theirs = [torch.from_numpy(v.copy()) for v in values]
    return (ours[0].T, ours[1], ours[2].T, ours[3], n), (theirs[0].T, theirs[1], theirs[2].T, theirs[3], n)


CASES = {
    "i & j": lambda L, i, j, u, v, n: i & j,
    "i | j": lambda L, i, j, u, v, n: i | j,
    "i ^ j": lambda L, i, j, u, v, n: i ^ j,
    "~i": lambda L, i, j, u, v, n: ~i,
    "i & n": lambda L, i, j, u, v, n: i & n,
    "n | i": lambda L, i, j, u, v, n: n | i,
    "u & v": lambda L, i, j, u, v, n: u & v,
    "u | v": lambda L, i, j, u, v, n: u | v,
    "u ^ 255": lambda L, i, j, u, v, n: u ^ 255,
    "~u": lambda L, i, j, u, v, n: ~u,
    "u & j": lambda L, i, j, u, v, n: u & j,
    "u | True": lambda L, i, j, u, v, n: u | True,
    "bitwise_xor(i, u)": lambda L, i, j, u, v, n: L.bitwise_xor(i, u),
    "bitwise_not(u)": lambda L, i, j, u, v, n: L.bitwise_not(u),
    "i.bitwise_and(j)": lambda L, i, j, u, v, n: i.bitwise_and(j),
    "(i & j).sum()": lambda L, i, j, u, v, n: (i & 0xffff).sum(),
}

# name -> (the written operand's index, fn)
IN_PLACE = {
    "i &= j": (0, lambda i, j, u, v, n: operator.iand(i, j)),
    "i |= n": (0, lambda i, j, u, v, n: operator.ior(i, n)),
    "i ^= i": (0, lambda i, j, u, v, n: operator.ixor(i, i)),
    "u ^= v": (2, lambda i, j, u, v, n: operator.ixor(u, v)),
    "u.bitwise_not_()": (2, lambda i, j, u, v, n: u.bitwise_not_()),
    "i.bitwise_or_(u)": (0, lambda i, j, u, v, n: i.bitwise_or_(u)),
    "u |= j": (2, lambda i, j, u, v, n: operator.ior(u, j)),   # an int32 result written into bytes wraps
}

REFUSED = {
    "float & int": lambda L, i, j, u, v, n: i.float() & j,
    "~float": lambda L, i, j, u, v, n: ~u.float(),
    "int | 0.5": lambda L, i, j, u, v, n: i | 0.5,
}


@pytest.mark.parametrize("name", CASES)
def test_bitwise_matches_torch(device, name):
    ours_args, theirs_args = operands(device)
    ours, theirs = CASES[name](wg, *ours_args), CASES[name](torch, *theirs_args)
    expected = theirs.to(torch.int32) if theirs.dtype is torch.int64 else theirs
    assert ours.dtype.name == str(expected.dtype).removeprefix("torch."), tag(f"{name}: {ours.dtype} vs {theirs.dtype}")
    np.testing.assert_array_equal(ours.numpy(), expected.numpy(), err_msg=tag(name))


@pytest.mark.parametrize("name", IN_PLACE)
def test_bitwise_in_place_matches_torch(device, name):
    ours_args, theirs_args = operands(device)
    which, fn = IN_PLACE[name]
    target, expected = ours_args[which], theirs_args[which]
    assert fn(*ours_args) is target and fn(*theirs_args) is expected
    np.testing.assert_array_equal(target.numpy(), expected.numpy(), err_msg=tag(name))


@pytest.mark.parametrize("name", REFUSED)
def test_bitwise_of_floats_raises_like_torch(device, name):
    ours_args, theirs_args = operands(device)
    raises_like(lambda: REFUSED[name](wg, *ours_args), lambda: REFUSED[name](torch, *theirs_args))
