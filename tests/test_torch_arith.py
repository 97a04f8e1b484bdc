"""torch's arithmetic functions and operators beyond + - * /: `//` and `%`, div's rounding modes,
remainder/fmod, add/sub with alpha and the aliases, atan2/hypot/logaddexp, the new unary maths,
lerp/addcmul/addcdiv; on both devices against torch (and finite differences on cpu)."""
import functools

import numpy as np
import pytest
import torch

import webgrad as wg
from conftest import assert_close, check_op, integers, nonzero, randn, rng, tag, uniform, wg_tensor
from torch_api import raises_like, same_error


def both(fn, *inputs, **kwargs):
    """check_op of fn(module, *tensors), run with webgrad and with torch as the module."""
    return check_op(functools.partial(fn, wg), *inputs, torch_fn=functools.partial(fn, torch), **kwargs)


def _off_integers(q, margin=0.02):
    """Quotients kept `margin` away from whole numbers (where floor/trunc/remainder jump)."""
    return np.abs(q - np.round(q)) > margin


def _dividend_divisor(shape_a, shape_b):
    while True:
        a, b = 4 * randn(*shape_a), nonzero(*shape_b, margin=0.3)
        if np.all(_off_integers(a / b)):
            return a, b


DIVISIONS = {
    "floordiv_operator": lambda m, a, b: a // b,
    "mod_operator": lambda m, a, b: a % b,
    "remainder": lambda m, a, b: m.remainder(a, b),
    "fmod": lambda m, a, b: m.fmod(a, b),
    "div_trunc": lambda m, a, b: m.div(a, b, rounding_mode="trunc"),
    "div_floor": lambda m, a, b: a.div(b, rounding_mode="floor"),
    "floor_divide": lambda m, a, b: m.floor_divide(a, b),
}


@pytest.mark.parametrize("shapes", [((37,), (37,)), ((3, 4, 5), (4, 1)), ((), (2, 3))])
@pytest.mark.parametrize("name", list(DIVISIONS))
def test_division_of_floats(name, shapes, device):
    a, b = _dividend_divisor(*shapes)
    # torch has no derivative for floor_divide (`//`); div's rounding modes have zero gradients
    grad = name not in ("floordiv_operator", "floor_divide")
    both(DIVISIONS[name], a, b, device=device, grad=grad)


@pytest.mark.parametrize("name", list(DIVISIONS))
def test_division_of_ints_negative_operands(name, device):
    a = integers(6, 7, low=-50, high=50)
    b = integers(7, low=-9, high=10)
    b[b == 0] = 4
    out = both(DIVISIONS[name], a, b, device=device)
    assert out[0].dtype.kind == "i", tag(f"{name} of ints gave {out[0].dtype}")


@pytest.mark.parametrize("scalar", [3, -3, 2.5, -0.75])
def test_division_by_and_of_python_numbers(scalar, device):
    x = integers(5, 6, low=-20, high=20) if isinstance(scalar, int) else 4 * randn(5, 6)
    divisor = np.where(x == 0, 1, x).astype(x.dtype)
    for fn in (lambda m, a: a // scalar, lambda m, a: a % scalar, lambda m, a: m.fmod(a, scalar),
               lambda m, a: m.div(a, scalar, rounding_mode="trunc")):
        both(fn, x, device=device, grad=False)
    for fn in (lambda m, a: scalar // a, lambda m, a: scalar % a):
        both(fn, divisor, device=device, grad=False)


def test_division_dtypes_follow_torch(device):
    i = wg.tensor([7, -7], device=device)
    u = wg.tensor([200, 7], dtype=wg.uint8, device=device)
    cases = {"i // i": (i // i, wg.int32), "i / i": (i / i, wg.float32), "i % 2.5": (i % 2.5, wg.float32),
             "u // 3": (u // 3, wg.uint8), "u % 3": (u % 3, wg.uint8), "i // 2.0": (i // 2.0, wg.float32)}
    for what, (out, dtype) in cases.items():
        assert out.dtype is dtype, tag(f"{what}: {out.dtype}")
    assert (u // 3).tolist() == [66, 2] and (u % 3).tolist() == [2, 1], tag(f"{(u // 3).tolist()}")


def test_floor_division_of_floats_as_python(device):
    """1 // 0.1 is 9 (the quotient 10.0 is rounded up from below), not floor(1 / 0.1)."""
    a = np.array([1.0, -1.0, 7.5, -7.5, 0.0, 3.0], np.float32)
    b = np.array([0.1, 0.1, -2.5, 2.5, 3.0, -1.5], np.float32)
    both(lambda m, x, y: x // y, a, b, device=device, grad=False)
    both(lambda m, x, y: x % y, a, b, device=device, grad=False, atol=1e-6)


def test_float_division_by_zero_gives_torchs_infinities_and_nans(device):
    a = np.array([1.0, -1.0, 0.0], np.float32)
    for fn in (lambda m, x: x // 0.0, lambda m, x: m.fmod(x, 0.0), lambda m, x: x % 0.0):
        ours, theirs = fn(wg, wg_tensor(a, device)).numpy(), fn(torch, torch.from_numpy(a)).numpy()
        np.testing.assert_array_equal(ours, theirs, err_msg=tag("by 0.0"))


@pytest.mark.parametrize("name", ["floordiv_operator", "mod_operator", "fmod", "div_trunc"])
def test_integer_division_by_python_zero_raises(name, device):
    fn = DIVISIONS[name]
    raises_like(lambda: fn(wg, wg.tensor([5, -5], device=device), 0), lambda: fn(torch, torch.tensor([5, -5]), 0))


def test_integer_division_by_a_zero_element_is_what_the_docstring_says(device):
    x = wg.tensor([5, -5], device=device)
    zero = wg.zeros(2, dtype=wg.int32, device=device)
    assert (x // zero).tolist() == [5, -5] and (x % zero).tolist() == [0, 0], tag()
    assert wg.div(x, zero, rounding_mode="trunc").tolist() == [5, -5] and wg.fmod(x, zero).tolist() == [0, 0], tag()


def test_division_errors_match_torch(device):
    b = wg.tensor([True, False], device=device)
    raises_like(lambda: b // b, lambda: torch.tensor([True, False]) // torch.tensor([True, False]))
    raises_like(lambda: b % b, lambda: torch.tensor([True, False]) % torch.tensor([True, False]))
    same_error(lambda: wg.div(wg.ones(2, device=device), 2, rounding_mode="round"),
               lambda: torch.div(torch.ones(2), 2, rounding_mode="round"))


def test_in_place_mod_and_floordiv(device):
    a = integers(3, 4, low=-30, high=30)
    for op in (lambda x: x.__imod__(4), lambda x: x.__ifloordiv__(-3), lambda x: x.remainder_(5),
               lambda x: x.floor_divide_(2), lambda x: x.fmod_(-3)):
        ours, theirs = wg_tensor(a, device), torch.from_numpy(a.astype(np.int64))
        same = op(ours)
        op(theirs)
        assert same is ours, tag("in-place op returned a new tensor")
        assert_close(ours, theirs, what="in place")
    x = wg_tensor(a, device)
    x %= 7
    assert_close(x, torch.from_numpy(a.astype(np.int64)) % 7, what="%=")


# ---- add/sub with alpha, the aliases and the functions torch has beside the methods ----
def test_add_sub_alpha_and_aliases(device):
    a, b = randn(3, 4), nonzero(4, margin=0.5)
    both(lambda m, x, y: m.add(x, y, alpha=2.5) + m.sub(x, y, alpha=-0.5) + x.add(y, alpha=3) - x.sub(y, alpha=2),
         a, b, device=device)
    both(lambda m, x, y: m.subtract(x, y) + m.multiply(x, y) + m.divide(x, y) + m.true_divide(x, y) + m.negative(x)
         + x.subtract(y) * x.multiply(y) - x.divide(y) + x.true_divide(y) - x.negative(), a, b, device=device)
    both(lambda m, x, y: m.mul(m.neg(x), y) + m.div(x, y) + m.clip(m.clone(x), -0.5, 0.5), a, b, device=device)
    ints = integers(5, low=-9, high=9)
    both(lambda m, x: m.add(x, x, alpha=3) - m.sub(x, 2, alpha=2), ints, device=device)


def test_comparison_functions(device):
    a, b = integers(4, 5, low=0, high=4), integers(5, low=0, high=4)
    both(lambda m, x, y: [m.eq(x, y), m.ne(x, y), m.lt(x, y), m.le(x, y), m.gt(x, y), m.ge(x, 2)], a, b,
         device=device)


# ---- binary maths ----
def test_atan2_all_quadrants_and_axes(device):
    y, x = randn(50), randn(50)
    y[:4], x[:4] = [0.0, 0.0, 1.0, -1.0], [1.0, -1.0, 0.0, 0.0]
    both(lambda m, a, b: m.atan2(a, b) + a.arctan2(b) * 0.5, y, x, device=device, grad=(0,), fd=False)
    y, x = nonzero(6, 7, margin=0.2), nonzero(7, margin=0.2)
    both(lambda m, a, b: m.atan2(a, b), y, x, device=device)


def test_hypot_and_logaddexp(device):
    a, b = nonzero(4, 6, margin=0.2), nonzero(6, margin=0.2)
    both(lambda m, x, y: m.hypot(x, y) + x.hypot(y), a, b, device=device)
    both(lambda m, x, y: m.logaddexp(x * 30, y) + x.logaddexp(y), a, b, device=device)
    edges = np.array([-np.inf, np.inf, -np.inf, 2.0], np.float32)
    both(lambda m, x: m.logaddexp(x, x.flip(0)), edges, device=device, grad=False)


# ---- unary maths ----
UNARY = {
    "sinh": (lambda m, x: m.sinh(x) + x.sinh(), lambda *s: 3 * randn(*s)),
    "sinh_small": (lambda m, x: m.sinh(x) / x, lambda *s: nonzero(*s, margin=1e-4) * 1e-3),
    "cosh": (lambda m, x: m.cosh(x) + x.cosh(), lambda *s: 3 * randn(*s)),
    "exp2": (lambda m, x: m.exp2(x) + x.exp2(), lambda *s: 4 * randn(*s)),
    "logit": (lambda m, x: m.logit(x) + x.logit(), lambda *s: uniform(*s, low=0.05, high=0.95)),
    "logit_eps": (lambda m, x: m.logit(x, eps=0.1), lambda *s: uniform(*s, low=0.0, high=1.0)),
    "deg2rad": (lambda m, x: m.deg2rad(x) + x.rad2deg() + m.rad2deg(x), lambda *s: 100 * randn(*s)),
    "sgn": (lambda m, x: m.sgn(x) + x.sgn(), nonzero),
    "asinh": (lambda m, x: m.asinh(x) + x.arcsinh(), lambda *s: 3 * randn(*s)),
    "asinh_small": (lambda m, x: m.asinh(x) / x, lambda *s: nonzero(*s, margin=1e-4) * 1e-3),
    "acosh": (lambda m, x: m.acosh(x) + x.arccosh(), lambda *s: uniform(*s, low=1.1, high=20.0)),
    "atanh": (lambda m, x: m.atanh(x) + m.arctanh(x), lambda *s: uniform(*s, low=-0.95, high=0.95)),
    "atanh_small": (lambda m, x: m.atanh(x) / x, lambda *s: nonzero(*s, margin=1e-4) * 1e-3),
}


@pytest.mark.parametrize("name", list(UNARY))
def test_unary(name, device):
    fn, make = UNARY[name]
    x = make(5, 7)
    if name == "logit_eps":   # finite differences need distance from the clamp's bends
        x = np.where(np.abs(x - 0.1) < 0.02, 0.5, np.where(np.abs(x - 0.9) < 0.02, 0.5, x)).astype(np.float32)
    # f(x) / x near 0 checks f's relative precision there (its gradient cancels in float32)
    small = name.endswith("_small")
    both(fn, x, device=device, rtol=1e-5 if small else 1e-4,
         grad=not small and name != "sgn")   # (sign's gradient is none here, zeros in torch)


def test_unary_extremes_and_ints(device):
    big = np.array([-100.0, -89.0, 0.0, 89.0, 100.0], np.float32)
    for fn in (lambda m, x: m.sinh(x), lambda m, x: m.cosh(x), lambda m, x: m.exp2(x), lambda m, x: m.asinh(x * 1e36),
               lambda m, x: m.acosh(x.abs() * 1e36 + 1), lambda m, x: m.atanh(x.clamp(-1, 1))):
        both(fn, big, device=device, grad=False)
    ints = integers(6, low=-5, high=5)
    for fn in (lambda m, x: m.exp2(x), lambda m, x: m.deg2rad(x), lambda m, x: m.sinh(x)):
        both(fn, ints, device=device)


# ---- blends ----
def test_lerp_addcmul_addcdiv(device):
    a, b, w = randn(3, 4), randn(4), uniform(3, 1, low=0.0, high=1.0)
    both(lambda m, x, y: m.lerp(x, y, 0.3) + x.lerp(y, 0.8), a, b, device=device)
    both(lambda m, x, y, t: m.lerp(x, y, t), a, b, w, device=device)
    c = nonzero(3, 4, margin=0.5)
    both(lambda m, x, y, z: m.addcmul(x, y, z, value=0.5) + x.addcmul(y, z), a, b, c, device=device)
    both(lambda m, x, y, z: m.addcdiv(x, y, z, value=-2) + x.addcdiv(y, z), a, b, c, device=device)
    ints = wg.tensor([1, 2], device=device)
    raises_like(lambda: wg.addcdiv(ints, ints, ints), lambda: torch.addcdiv(*[torch.tensor([1, 2])] * 3))


def test_operators_on_empty_tensors(device):
    e = np.zeros((0, 3), np.float32)
    for fn in (lambda m, x: x // 2, lambda m, x: x % 2, lambda m, x: m.atan2(x, x), lambda m, x: m.sinh(x)):
        both(fn, e, device=device, grad=False)


def test_random_mixed_signs_remainder_property(device):
    """x == (x // y) * y + x % y with x % y between 0 and y, on fresh random ints."""
    x = wg_tensor(rng().integers(-1000, 1000, 200).astype(np.int32), device)
    y = wg_tensor(np.where((v := rng().integers(-30, 30, 200)) == 0, 7, v).astype(np.int32), device)
    q, r = x // y, x % y
    assert (q * y + r).tolist() == x.tolist(), tag("x != (x // y) * y + x % y")
    assert bool((((r >= 0) & (r < y.abs())) | ((r <= 0) & (r > -y.abs()))).all()), tag()
    assert bool(((r == 0) | ((r < 0) == (y < 0))).all()), tag("remainder takes the divisor's sign")


def test_float_remainders_exact_over_wide_ranges(device):
    """fmod, % and // equal torch's to the bit for quotients from 1e-6 up past 2^24 (WGSL's float %
    rounds its product and would be off there)."""
    n = 2000
    a = (10 ** rng().uniform(-3, 7, n) * rng().choice([-1, 1], n)).astype(np.float32)
    b = (10 ** rng().uniform(-3, 3, n) * rng().choice([-1, 1], n)).astype(np.float32)
    for fn in (lambda m, x, y: m.fmod(x, y), lambda m, x, y: x % y, lambda m, x, y: x // y):
        ours = fn(wg, wg_tensor(a, device), wg_tensor(b, device)).numpy()
        np.testing.assert_array_equal(ours, fn(torch, torch.from_numpy(a), torch.from_numpy(b)).numpy(),
                                      err_msg=tag("wide-range remainders"))
