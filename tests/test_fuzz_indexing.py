"""Property-based tests of indexing and slicing (and their errors), gather and index_select, cat and
stack, on hypothesis' cases (tests/fuzzing.py) against a NumPy oracle."""

import numpy as np
import pytest
import torch
from hypothesis import strategies as st

import webgrad as wg
from fuzzing import assert_matches, cat_cases, fuzz, gather_cases, index_cases, on, shapes, values


# ---- indexing and slicing ----
@fuzz(index_cases())
def test_getitem(device, case):
    x, perm, index = case
    view = np.transpose(x, perm)
    got = on(device, x).permute(perm)[index]
    assert_matches(got, view[index].astype(np.float64), 0, what=f"x{list(perm)}[{index}]")


@st.composite
def bad_index_cases(draw):
    shape = draw(shapes(min_ndim=1, max_ndim=3))
    d = draw(st.integers(0, len(shape) - 1))
    items = [slice(None)] * d
    kind = draw(st.sampled_from(["negative step", "out of range", "too many"]))
    if kind == "negative step":
        items.append(slice(draw(st.one_of(st.none(), st.integers(-3, 3))), None, draw(st.integers(-3, -1))))
    elif kind == "out of range":
        items.append(draw(st.sampled_from([shape[d], shape[d] + 2, -shape[d] - 1])))
    else:
        items = [0] * len(shape) + [0]
    return draw(values(shape, -3, 3)), tuple(items), kind


@fuzz(bad_index_cases())
def test_getitem_errors(device, case):
    """As in torch: a negative step is a ValueError, an index past the end or too many indices an IndexError."""
    x, index, kind = case
    error = ValueError if kind == "negative step" else IndexError
    with pytest.raises(error, match="step must be greater than zero" if error is ValueError else None):
        on(device, x)[index]
    with pytest.raises(error):
        torch.tensor(x)[index]


@fuzz(gather_cases())
def test_gather_index_select(device, case):
    x, dim, index, select = case
    t, i = on(device, x), on(device, index)
    if select:
        assert_matches(t.index_select(dim, i), np.take(x, index, axis=dim).astype(np.float64), 0, what="index_select")
        return
    region = x[tuple(slice(None) if d == dim % x.ndim else slice(0, s) for d, s in enumerate(index.shape))]
    assert_matches(t.gather(dim, i), np.take_along_axis(region, index, axis=dim).astype(np.float64), 0,
                   what="gather")


# ---- cat and stack ----
@fuzz(cat_cases())
def test_cat_stack(device, case):
    """Mixed int32/float32 inputs promote to float32, as in torch."""
    arrays, dim, stack = case
    out = (wg.stack if stack else wg.cat)([on(device, a) for a in arrays], dim)
    promoted = np.float32 if any(a.dtype.kind == "f" for a in arrays) else np.int32
    expected = (np.stack if stack else np.concatenate)([a.astype(promoted) for a in arrays], axis=dim)
    assert_matches(out, expected.astype(np.float64) if expected.dtype.kind == "f" else expected, 0,
                   what="stack" if stack else "cat")
