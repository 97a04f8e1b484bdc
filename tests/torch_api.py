"""Comparing webgrad's API with PyTorch's: an exception's type and message, a signature."""
import inspect

import pytest

from conftest import tag


def torch_text(text):
    """A PyTorch message or repr as webgrad words it."""
    return text.replace("torch", "webgrad")


def raises_like(make_ours, make_theirs):
    """Both raise, an exception of the same type; returns (ours, torch's)."""
    with pytest.raises(Exception) as theirs:
        make_theirs()
    with pytest.raises(type(theirs.value)) as ours:
        make_ours()
    assert type(ours.value) is type(theirs.value), tag(f"{type(ours.value).__name__} vs torch "
                                                      f"{type(theirs.value).__name__}: {theirs.value}")
    return ours.value, theirs.value


def same_error(ours_fn, theirs_fn, exact=True):
    """Both raise the same exception type, with the same message (PyTorch's names swapped for
    ours; with exact=False PyTorch's message may go on after ours ends)."""
    ours, theirs = raises_like(ours_fn, theirs_fn)
    expected, got = torch_text(str(theirs)), str(ours)
    assert (got == expected) if exact else expected.startswith(got.rstrip(".")), tag(f"{got!r} vs {expected!r}")


def signature(fn):
    return [(p.name, p.default, p.kind) for p in inspect.signature(fn).parameters.values() if p.name != "self"]
