"""Files: safetensors save/load (against the format's spec, the safetensors package and files torch
writes; hostile files) and read_idx (MNIST's IDX, plain and gzipped; corrupt files)."""
import gc
import gzip
import io
import json
import struct
import tracemalloc

import numpy as np
import pytest
import torch

import webgrad as wg
from conftest import DEVICES, rng, tag, to_numpy, wg_tensor
from webgrad.io import load, read_idx, save

SPEC_DTYPES = {"F32": np.dtype("<f4"), "F64": np.dtype("<f8"), "I32": np.dtype("<i4"), "U8": np.dtype("u1"),
               "BOOL": np.dtype("?")}


def _arrays(device):
    """A random array of every dtype the device holds, including edge shapes and extreme values."""
    r = rng()
    arrays = {
        "weight": r.standard_normal((3, 4, 5)).astype(np.float32),
        "scalar": np.asarray(r.standard_normal(), np.float32),
        "ints": np.concatenate([r.integers(-2**31, 2**31, 20), [-2**31, 2**31 - 1, 0, -1]]).astype(np.int32),
        "bytes": r.integers(0, 256, (7, 3)).astype(np.uint8),
        "mask": r.random((2, 3, 2)) < 0.5,
        "empty": np.zeros((0, 3), np.int32),
        "layer.0.bias": r.standard_normal(int(r.integers(1, 40))).astype(np.float32),
        "specials": np.array([np.inf, -np.inf, np.nan, -0.0, 1e-45, 3.4028235e38], np.float32),  # bit-exact
    }
    if device == "cpu":
        arrays["double"] = np.concatenate([r.standard_normal(6), [np.nan, -0.0, 5e-324, -np.inf]]).reshape(5, 2)
    return arrays


def _check_loaded(loaded, arrays, device, what):
    assert set(loaded) == set(arrays), tag(f"{what}: names {sorted(loaded)} != {sorted(arrays)}")
    for name, a in arrays.items():
        t = loaded[name]
        assert isinstance(t, wg.Tensor), tag(f"{what}: {name} is a {type(t).__name__}")
        assert t.device == device, tag(f"{what}: {name} on {t.device}, expected {device}")
        assert tuple(t.shape) == a.shape, tag(f"{what}: {name} shape {tuple(t.shape)} != {a.shape}")
        got = to_numpy(t)
        assert got.dtype == a.dtype, tag(f"{what}: {name} dtype {t.dtype} != {a.dtype}")
        np.testing.assert_array_equal(got, a, err_msg=tag(f"{what}: {name}"))
        assert got.tobytes() == a.tobytes(), tag(f"{what}: {name} differs in its bytes (-0.0, NaN, denormals)")


def _parse_spec(raw):
    """An independent reader of the safetensors spec, strict: 8-byte little-endian header size, a JSON
    object (UTF-8, starting with '{', padded only with spaces), optional __metadata__ of str -> str,
    then each entry's dtype, shape and data_offsets into a data section they cover with no gaps."""
    (size,) = struct.unpack("<Q", raw[:8])
    text = raw[8:8 + size]
    assert len(text) == size and text.startswith(b"{"), tag("header start")
    assert text.rstrip(b" ").endswith(b"}"), tag("header padding is spaces")
    header = json.loads(text.decode("utf-8"))
    metadata = header.pop("__metadata__", None)
    assert metadata is None or all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())
    body, arrays, at = raw[8 + size:], {}, 0
    for name, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"]):
        assert set(info) == {"dtype", "shape", "data_offsets"}, tag(f"{name}: keys {sorted(info)}")
        dtype, shape, (begin, end) = SPEC_DTYPES[info["dtype"]], info["shape"], info["data_offsets"]
        assert begin == at and end - begin == int(np.prod(shape, dtype=np.int64)) * dtype.itemsize, tag(
            f"{name}: offsets {[begin, end]} at {at}")
        arrays[name] = np.frombuffer(body[begin:end], dtype).reshape(shape)
        at = end
    assert at == len(body), tag(f"data section has {len(body)} bytes, entries cover {at}")
    return arrays, metadata, size


# ---- round trips ----
@pytest.mark.parametrize("target", DEVICES)
def test_save_load_roundtrip(device, target, tmp_path):
    """Saved from `device`, loaded onto `target`: equal names, values, shapes, dtypes."""
    arrays = _arrays("cpu" if device == target == "cpu" else "webgpu")   # float64 only from cpu to cpu
    tensors = {name: wg_tensor(a, device) for name, a in arrays.items()}
    tensors["transposed"] = wg_tensor(arrays["weight"][0], device).T   # a non-contiguous view saves its values
    arrays["transposed"] = np.ascontiguousarray(arrays["weight"][0].T)
    path = tmp_path / "model.safetensors"
    save(tensors, path)
    _check_loaded(load(path, device=target), arrays, target, f"{device} -> {target} (pathlib)")
    _check_loaded(load(str(path), device=target), arrays, target, f"{device} -> {target} (str)")


def test_file_matches_the_spec(device, tmp_path):
    arrays = _arrays(device)
    path = tmp_path / "m.safetensors"
    save({name: wg_tensor(a, device) for name, a in arrays.items()}, path, metadata={"format": "pt", "step": 3})
    parsed, metadata, size = _parse_spec(path.read_bytes())
    assert metadata == {"format": "pt", "step": "3"}, tag(f"metadata {metadata}")
    assert size % 8 == 0, tag(f"header size {size}: the data should start 8-byte aligned")
    assert set(parsed) == set(arrays), tag(f"names {sorted(parsed)}")
    for name, a in arrays.items():
        assert parsed[name].dtype == a.dtype and parsed[name].shape == a.shape, tag(name)
        assert parsed[name].tobytes() == a.tobytes(), tag(f"{name}: bytes")


def test_safetensors_package_reads_webgrad_files(device, tmp_path):
    from safetensors import safe_open
    from safetensors.numpy import load_file as np_load_file
    from safetensors.torch import load_file as torch_load_file
    arrays = _arrays(device)
    path = tmp_path / "m.safetensors"
    save({name: wg_tensor(a, device) for name, a in arrays.items()}, path, metadata={"note": "webgrad"})
    by_numpy = np_load_file(str(path))
    by_torch = torch_load_file(str(path))
    with safe_open(str(path), "np") as f:
        assert f.metadata() == {"note": "webgrad"}, tag(f"metadata {f.metadata()}")
    for name, a in arrays.items():
        assert by_numpy[name].dtype == a.dtype and by_numpy[name].shape == a.shape, tag(f"numpy: {name}")
        np.testing.assert_array_equal(by_numpy[name], a, err_msg=tag(f"safetensors.numpy: {name}"))
        assert by_numpy[name].tobytes() == a.tobytes(), tag(f"safetensors.numpy: {name} bytes")
        np.testing.assert_array_equal(by_torch[name].numpy(), a, err_msg=tag(f"safetensors.torch: {name}"))


def test_torch_written_file_loads(device, tmp_path):
    from safetensors.torch import save_file
    arrays = _arrays(device)
    path = tmp_path / "torch.safetensors"
    save_file({name: torch.from_numpy(a.copy()) for name, a in arrays.items()}, str(path),
              metadata={"format": "pt"})
    _check_loaded(load(path, device=device), arrays, device, "torch-written file")


def test_load_errors_outside_the_format(tmp_path):
    path = tmp_path / "d.safetensors"
    save({"x": wg_tensor(np.ones(3), "cpu")}, path)      # float64
    with pytest.raises(TypeError, match="float64"):
        load(path, device="webgpu")
    with pytest.raises(TypeError, match="'b'.*list"):
        save({"a": wg_tensor(np.ones(2, np.float32), "cpu"), "b": [1.0, 2.0]}, tmp_path / "e.safetensors")
    with pytest.raises(FileNotFoundError):
        load(tmp_path / "missing.safetensors")


# ---- hostile files ----
def _file(header, data=b"", size=None):
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(text) if size is None else size) + text + data


def _entry(dtype="F32", shape=(2, 2), offsets=(0, 16)):
    return {"dtype": dtype, "shape": list(shape), "data_offsets": list(offsets)}


DATA = bytes(range(16))
GOOD = _file({"a": _entry()}, DATA)

HOSTILE = {
    "empty file": (b"", "shorter than"),
    "truncated header length": (b"\x10\x00\x00\x00", "shorter than"),
    "header length past the end": (_file(b"{}", size=1000), "not a valid safetensors file: header length 1000"),
    "header length huge": (_file(b"{}", size=2**64 - 1), "not a safetensors file"),
    "header length zero": (_file(b"{}", size=0), "not a safetensors file"),
    "header not JSON": (_file(b"this is not json"), "not a safetensors file"),
    "header not starting an object": (_file(b"[1] { }"), "not a safetensors file"),
    "header starts an object, then is no JSON": (_file(b"{not json}"), "not a valid safetensors file: header is not JSON"),
    "header not UTF-8": (_file(b"{\"\xff\xfe\": 1}"), "not JSON"),
    "header deeply nested": (_file(b"{" + b"[" * 200_000), "not JSON"),
    "JSON array": (_file([_entry()], DATA), "not a safetensors file"),
    "JSON string": (_file("a"), "not a safetensors file"),
    "unknown dtype": (_file({"a": _entry(dtype="Q7")}, DATA), "dtype"),
    "unsupported dtype BF16": (_file({"a": _entry(dtype="BF16", offsets=(0, 8))}, DATA[:8]), "dtype"),
    "dtype not a string": (_file({"a": {**_entry(), "dtype": ["F32"]}}, DATA), "dtype"),
    "missing data_offsets": (_file({"a": {"dtype": "F32", "shape": [4]}}, DATA), "data_offsets"),
    "entry not an object": (_file({"a": 3}, DATA), "'a'"),
    "negative shape": (_file({"a": _entry(shape=(-2, -2))}, DATA), "shape"),
    "huge shape": (_file({"a": _entry(shape=(2**40, 2**40))}, DATA), "needs"),
    "float in shape": (_file({"a": _entry(shape=(2.0, 2))}, DATA), "shape"),
    "bool in shape": (_file({"a": _entry(shape=(True, 2), offsets=(0, 8))}, DATA[:8]), "shape"),
    "bool offset": (_file({"a": _entry(shape=(2,), offsets=(False, 8))}, DATA[:8]), "offsets"),
    "shape not a list": (_file({"a": {**_entry(), "shape": "22"}}, DATA), "shape"),
    "offsets past the data": (_file({"a": _entry(shape=(8,), offsets=(0, 32))}, DATA), "offsets"),
    "negative offset": (_file({"a": _entry(shape=(4,), offsets=(-4, 12))}, DATA), "offsets"),
    "offsets reversed": (_file({"a": _entry(shape=(4,), offsets=(16, 0))}, DATA), "offsets"),
    "offsets not ints": (_file({"a": _entry(offsets=(0.0, 16.0))}, DATA), "offsets"),
    "three offsets": (_file({"a": _entry(offsets=(0, 8, 16))}, DATA), "data_offsets"),
    "offsets too short for shape": (_file({"a": _entry(offsets=(0, 12))}, DATA), "needs 16"),
    "offsets too long for shape": (_file({"a": _entry(shape=(3,), offsets=(0, 16))}, DATA), "needs 12"),
    "overlapping tensors": (_file({"a": _entry(shape=(4,), offsets=(0, 16)), "b": _entry(shape=(4,), offsets=(8, 24))},
                                  DATA + DATA[:8]), "overlap"),
    "the same bytes twice": (_file({"a": _entry(shape=(4,)), "b": _entry(shape=(4,))}, DATA), "overlap"),
    "truncated data": (GOOD[:-4], "offsets"),
    "gap before the first tensor": (_file({"a": _entry(shape=(3,), offsets=(4, 16))}, DATA), "bytes 0 to 4.*no tensor"),
    "gap between tensors": (_file({"a": _entry(shape=(1,), offsets=(0, 4)), "b": _entry(shape=(2,), offsets=(8, 16))},
                                  DATA), "bytes 4 to 8.*no tensor"),
    "trailing bytes after the data": (GOOD + b"\0" * 8, "24 bytes.*cover 16"),
    "data but no tensors": (_file({}, DATA), "16 bytes.*cover 0"),
    "duplicate name": (_file(b'{"a":' + json.dumps(_entry(shape=(2,), offsets=(0, 8))).encode() + b',"a":'
                             + json.dumps(_entry(shape=(2,), offsets=(8, 16))).encode() + b"}", DATA), "'a' twice"),
    "duplicate name, same bytes": (_file(b'{"a":' + json.dumps(_entry()).encode() + b',"a":'
                                         + json.dumps(_entry()).encode() + b"}", DATA), "'a' twice"),
    "duplicate key inside an entry": (_file(b'{"a":{"dtype":"F32","dtype":"U8","shape":[16],"data_offsets":[0,16]}}',
                                            DATA), "'dtype' twice"),
    "metadata not strings": (_file({"__metadata__": {"step": 3}, "a": _entry()}, DATA), "__metadata__"),
    "metadata a list": (_file({"__metadata__": ["pt"], "a": _entry()}, DATA), "__metadata__"),
    "NUL padding after the header": (_file(json.dumps({"a": _entry()}).encode() + b"\0" * 3, DATA), "not JSON"),
    "header length huge, 100 MB file claimed": (_file(b"{}", size=100 * 2**20), "header length"),
    "good entry then a bad one": (_file({"a": _entry(shape=(4,)), "b": _entry(dtype="I64", shape=(1,),
                                                                              offsets=(16, 24))}, DATA + DATA[:8]),
                                  "dtype"),
}


def _raises_within(limit, exception, match, fn, *args, **kwargs):
    """fn(*args, **kwargs) raises exception matching match, having allocated at most limit bytes
    at its peak (Python's allocator, which every bytes/bytearray read goes through)."""
    tracemalloc.start()
    try:
        with pytest.raises(exception, match=match) as info:
            fn(*args, **kwargs)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= limit, tag(f"peak allocation {peak} bytes > {limit}")
    return info


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_files_raise_and_load_nothing(case, device, tmp_path):
    raw, match = HOSTILE[case]
    path = tmp_path / "bad.safetensors"
    path.write_bytes(raw)
    gc.collect()   # earlier tests' garbage, collected during the load, would change the count
    before = wg.memory_stats(device).get("live_buffers")
    # the file itself, twice over, and change: a header length or shape never sizes an allocation
    info = _raises_within(2 * len(raw) + 2**20, ValueError, match, load, path, device=device)
    assert str(path) in str(info.value), tag(f"the error does not name the file: {info.value}")
    del info   # its traceback holds the load's frames
    gc.collect()
    assert wg.memory_stats(device).get("live_buffers") == before, tag(f"{case}: a failed load left tensors behind")


def test_out_of_order_entries_load_as_the_safetensors_package_does(device, tmp_path):
    """The spec orders nothing in the header: entries listed against their offset order load."""
    from safetensors.numpy import load_file as np_load_file
    path = tmp_path / "shuffled.safetensors"
    path.write_bytes(_file({"late": _entry(dtype="U8", shape=(2, 3), offsets=(10, 16)),
                            "empty": _entry(dtype="I32", shape=(0, 5), offsets=(10, 10)),
                            "early": _entry(dtype="I32", shape=(2,), offsets=(0, 8)),
                            "middle": _entry(dtype="BOOL", shape=(2,), offsets=(8, 10))}, DATA))
    expected = np_load_file(str(path))
    _check_loaded(load(path, device=device), expected, device, "out-of-order entries")


def test_a_failed_device_upload_keeps_nothing(tmp_path):
    """A float64 after a float32 cannot go to webgpu: the float32 made first does not stay behind."""
    path = tmp_path / "mixed.safetensors"
    save({"a": wg_tensor(np.ones(4, np.float32), "cpu"), "b": wg_tensor(np.ones(2), "cpu")}, path)
    before = wg.memory_stats("webgpu").get("live_buffers")
    with pytest.raises(TypeError, match="float64"):
        load(path, device="webgpu")
    assert wg.memory_stats("webgpu").get("live_buffers") == before


@pytest.mark.parametrize("reader", [load, read_idx], ids=["safetensors", "idx"])
def test_not_a_file(reader, tmp_path):
    with pytest.raises(IsADirectoryError):
        reader(tmp_path)
    for special in ("/dev/zero", "/dev/null"):   # a read of /dev/zero never ends
        with pytest.raises(ValueError, match=f"{special}: not a regular file"):
            reader(special)
    with pytest.raises(TypeError):
        reader(3)   # a file descriptor is no path


def test_the_good_base_of_the_hostile_files_loads(device, tmp_path):
    path = tmp_path / "good.safetensors"
    path.write_bytes(GOOD)
    (name, t), = load(path, device=device).items()
    np.testing.assert_array_equal(to_numpy(t), np.frombuffer(DATA, "<f4").reshape(2, 2), err_msg=tag(name))


# ---- IDX ----
IDX_CODES = {np.dtype("u1"): 0x08, np.dtype("i4"): 0x0C, np.dtype("f4"): 0x0D}


def _idx(a):
    a = np.asarray(a)
    return (struct.pack(">BBBB", 0, 0, IDX_CODES[a.dtype], a.ndim) + struct.pack(f">{a.ndim}I", *a.shape)
            + a.astype(a.dtype.newbyteorder(">")).tobytes())


def _source(raw, form, tmp_path, name):
    if form in ("str", "pathlib"):
        path = tmp_path / name
        path.write_bytes(raw)
        return str(path) if form == "str" else path
    return {"bytes": bytes, "bytearray": bytearray, "memoryview": memoryview}[form](raw)


def _check_idx(t, a, device, what):
    assert t.device == device and t.dtype == wg_tensor(a, "cpu").dtype, tag(f"{what}: {t.dtype} on {t.device}")
    assert tuple(t.shape) == a.shape, tag(f"{what}: shape {tuple(t.shape)} != {a.shape}")
    got = to_numpy(t)
    assert got.dtype == a.dtype, tag(f"{what}: dtype {got.dtype}")
    np.testing.assert_array_equal(got, a, err_msg=tag(what))


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("form", ["str", "pathlib", "bytes", "bytearray", "memoryview"])
def test_read_idx_mnist_images_and_labels(form, gz, device, tmp_path):
    n = int(rng().integers(1, 12))
    images = rng().integers(0, 256, (n, 28, 28)).astype(np.uint8)
    labels = rng().integers(0, 10, n).astype(np.uint8)
    images[0, 0, :2], labels[0] = (0, 255), 9     # the extremes of the byte range
    for a, name in ((images, "images-idx3-ubyte"), (labels, "labels-idx1-ubyte")):
        raw = _idx(a)
        if gz:
            raw, name = gzip.compress(raw), name + ".gz"
        _check_idx(read_idx(_source(raw, form, tmp_path, name), device=device), a, device, f"{name} as {form}")


def test_read_idx_wider_types_and_edge_shapes(device):
    r = rng()
    cases = [r.integers(-2**31, 2**31, (3, 2, 5)).astype(np.int32),
             r.standard_normal((4, 3)).astype(np.float32),
             np.zeros((0, 28, 28), np.uint8),
             np.asarray(r.integers(0, 256), np.uint8)]               # 0 dims: one value
    for a in cases:
        _check_idx(read_idx(_idx(a), device=device), a, device, f"{a.dtype}{a.shape}")
        _check_idx(read_idx(gzip.compress(_idx(a)), device=device), a, device, f"gzipped {a.dtype}{a.shape}")


def _flip(raw, at, bits):
    raw = bytearray(raw)
    raw[at] ^= bits
    return bytes(raw)


LABELS = _idx(np.arange(10, dtype=np.uint8))
IMAGES = _idx(np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4))
PATTERN = _idx((np.arange(3000) * 7 % 251).astype(np.uint8).reshape(3, 1000))
IDX_BAD = {
    "empty": (b"", "magic"),
    "three bytes": (b"\0\0\x08", "magic"),
    "bad magic first byte": (b"\x01" + LABELS[1:], "magic"),
    "bad magic second byte": (b"\0\x08" + LABELS[2:], "magic"),
    "unknown type code 0x09": (LABELS[:2] + b"\x09" + LABELS[3:], "type code 0x09"),
    "unknown type code 0x0e": (LABELS[:2] + b"\x0e" + LABELS[3:], "type code 0x0e"),
    "truncated header": (IMAGES[:4 + 4 * 2 + 1], "truncated"),
    "header only, no dims": (IMAGES[:4], "truncated"),
    "data one byte short": (LABELS[:-1], "need 10 data bytes.*has 9"),
    "data one byte long": (LABELS + b"\0", "need 10 data bytes.*has more"),
    "wrong magic: a PNG": (b"\x89PNG\r\n\x1a\n" + LABELS, "magic 89504e47"),
    "wrong magic: safetensors": (GOOD, "magic"),
    "type code 0x0b (int16, not read)": (b"\0\0\x0b\x01" + struct.pack(">I", 2) + b"\0" * 4, "type code 0x0b"),
    "255 dims declared, none present": (b"\0\0\x08\xff", "255 dims declared, 0 present"),
    "dims whose product overflows u32": (b"\0\0\x08\x04" + struct.pack(">4I", *[2**32 - 1] * 4) + b"\0" * 10,
                                         f"need {(2**32 - 1) ** 4} data bytes.*has 10"),
    "float32 dims larger than the data": (b"\0\0\x0d\x02" + struct.pack(">2I", 2**31, 2**31) + b"\0" * 8,
                                          f"need {2**64} data bytes.*has 8"),
    "gzip of garbage": (gzip.compress(b"garbage!"), "magic"),
    "gzip data one byte long": (gzip.compress(LABELS + b"\0"), "has more"),
    "gzip second member": (gzip.compress(LABELS) + gzip.compress(b"\0"), "has more"),
    "gzip truncated header": (gzip.compress(IMAGES)[:-8][:20], "gzip|truncated"),
    "dims larger than the data": (IMAGES[:4] + struct.pack(">3I", 60000, 28, 28) + IMAGES[16:], "need 47040000"),
    "int32 data not a multiple of 4": (b"\0\0\x0c\x01" + struct.pack(">I", 2) + b"\0" * 7, "need 8"),
    "gzip truncated": (gzip.compress(LABELS)[:-5], "gzip"),
    "gzip header only": (gzip.compress(LABELS)[:10], "gzip"),
    "gzip bad CRC": (_flip(gzip.compress(LABELS), -8, 0x01), "gzip"),
    "gzip bad length": (_flip(gzip.compress(LABELS), -4, 0x01), "gzip"),
    "gzip trailing garbage": (gzip.compress(LABELS) + b"garbage!", "gzip"),
}
for _at in (10, 11, 14, 20, 40):   # flipped bits inside the deflate stream
    IDX_BAD[f"gzip corrupt byte {_at}"] = (_flip(gzip.compress(PATTERN, mtime=0), _at, 0xA5), "gzip")


@pytest.mark.parametrize("case", list(IDX_BAD))
def test_read_idx_errors(case, device):
    raw, match = IDX_BAD[case]
    before = wg.memory_stats(device).get("live_buffers")
    _raises_within(2 * len(raw) + 2**20, ValueError, match, read_idx, raw, device=device)
    assert wg.memory_stats(device).get("live_buffers") == before, tag(f"{case}: a failed read left a tensor behind")


def test_read_idx_stops_inflating_where_the_header_says_the_data_ends(tmp_path):
    """A gzip bomb: 10 declared label bytes, then 256 MiB of zeros that deflate to 256 KiB."""
    packed = io.BytesIO()
    with gzip.GzipFile(fileobj=packed, mode="wb") as gz:
        gz.write(LABELS)
        for _ in range(256):
            gz.write(bytes(2**20))
    path = tmp_path / "bomb-idx1-ubyte.gz"
    path.write_bytes(packed.getvalue())
    _raises_within(4 * 2**20, ValueError, "need 10 data bytes.*has more", read_idx, path)


def test_read_idx_error_names_the_file(tmp_path):
    path = tmp_path / "train-labels-idx1-ubyte"
    path.write_bytes(LABELS[:-3])
    with pytest.raises(ValueError, match="train-labels-idx1-ubyte"):
        read_idx(path)
    with pytest.raises(FileNotFoundError):
        read_idx(tmp_path / "missing")
