"""wg.load of files it did not write: map_location, dtypes beyond what a device holds, big-endian
files, and hostile files (each refused with a clear error, loading nothing and running no code)."""
import collections
import io
import os
import pickle
import struct
import warnings
import zipfile

import numpy as np
import pytest
import torch

import webgrad as wg
from conftest import DEVICES, assert_close, rng, tag, to_numpy
from test_io import _raises_within

OrderedDict = collections.OrderedDict


# ---- map_location and dtypes ----
def _relocated(path, location):
    """A copy of a torch.save file whose storages say they were saved on `location` (as on a GPU)."""
    with zipfile.ZipFile(path) as archive:
        records = {i.filename: archive.read(i) for i in archive.infolist()}
    (name,) = [n for n in records if n.endswith("/data.pkl")]
    records[name] = records[name].replace(b"X\x03\x00\x00\x00cpu", b"X" + struct.pack("<I", len(location))
                                          + location.encode())
    out = path.with_name(f"{location.replace(':', '_')}.pt")
    with zipfile.ZipFile(out, "w") as archive:
        for n, data in records.items():
            archive.writestr(n, data)
    return out


def test_map_location(tmp_path):
    w = torch.from_numpy(rng().standard_normal((2, 3)).astype(np.float32))
    torch.save({"w": w}, tmp_path / "cpu.pt")
    cuda = _relocated(tmp_path / "cpu.pt", "cuda:0")
    assert torch.load(cuda, map_location="cpu")["w"].equal(w)   # torch reads the relocated file
    cases = [
        (cuda, None, wg.default_device()),               # an accelerator's tensors: webgrad's default device
        (cuda, {"cuda:0": "cpu"}, "cpu"), (cuda, {"cuda:1": "cpu"}, wg.default_device()),
        (cuda, "webgpu", "webgpu"), (cuda, torch.device("cpu"), "cpu"),
        (cuda, lambda storage, location: storage, "cpu"),   # torch's idiom for "keep it on the cpu"
        (cuda, lambda storage, location: None, wg.default_device()),
        (cuda, lambda storage, location: "webgpu" if location == "cuda:0" else "cpu", "webgpu"),
        (tmp_path / "cpu.pt", None, "cpu"), (tmp_path / "cpu.pt", {"cpu": "webgpu"}, "webgpu"),
    ]
    for path, map_location, device in cases:
        t = wg.load(path, map_location=map_location)["w"]
        assert t.device == device, tag(f"{path.name} with map_location={map_location!r}: on {t.device}")
        assert_close(t, w, what=f"{path.name} with map_location={map_location!r}")
    ours = tmp_path / "ours.pt"
    wg.save({"g": wg.ones(2, device="webgpu"), "c": wg.ones(2, device="cpu")}, ours)
    loaded = wg.load(ours)
    assert (loaded["g"].device, loaded["c"].device) == ("webgpu", "cpu"), tag("each back where it was saved from")
    assert wg.load(ours, {"webgpu": "cpu"})["g"].device == "cpu"
    assert wg.load(ours, device="webgpu")["c"].device == "webgpu"
    with pytest.raises(TypeError, match="not both"):
        wg.load(ours, "cpu", device="cpu")


@pytest.mark.parametrize("target", DEVICES)
def test_int64_beyond_int32_and_float64_on_webgpu_raise_naming_the_tensor(target, tmp_path):
    r = rng()
    big = torch.from_numpy(r.integers(-2**31, 2**31, 4)).clone()
    big[int(r.integers(0, 4))] = int(r.choice([2**31, -2**31 - 1, 2**40]))
    path = tmp_path / "wide.pt"
    torch.save({"fine": torch.ones(3), "step": {"counts": [big]}}, path)
    before = wg.memory_stats(target).get("live_buffers")
    with pytest.raises(OverflowError, match=r"wide.pt: tensor \['step'\]\['counts'\]\[0\]: int64 values"):
        wg.load(path, map_location=target)
    assert wg.memory_stats(target).get("live_buffers") == before, tag("a failed load left tensors behind")
    torch.save({"fine": torch.ones(3), "double": torch.from_numpy(r.standard_normal(3))}, path)
    if target == "cpu":
        assert wg.load(path, map_location="cpu")["double"].dtype is wg.float64
    else:
        with pytest.raises(TypeError, match=r"tensor \['double'\] is float64.*map_location='cpu'"):
            wg.load(path, map_location=target)
        assert wg.memory_stats(target).get("live_buffers") == before, tag("a failed load left tensors behind")


def test_big_endian_files_load(device, tmp_path):
    """A file whose byteorder record says 'big': torch and webgrad read the same values."""
    r = rng()
    arrays = {"f": r.standard_normal(5).astype(np.float32), "i": r.integers(-2**40, 2**40, 3).astype(np.int64) >> 12,
              "h": r.standard_normal(4).astype(np.float16), "b": r.integers(0, 256, 3).astype(np.uint8)}
    names = {"f": torch.FloatStorage, "i": torch.LongStorage, "h": torch.HalfStorage, "b": torch.ByteStorage}
    obj = {k: _Tensor(_Storage(names[k], str(i), a.size), 0, a.shape, (1,)) for i, (k, a) in enumerate(arrays.items())}
    records = {f"data/{i}": a.astype(a.dtype.newbyteorder(">")).tobytes() for i, a in enumerate(arrays.values())}
    path = tmp_path / "big.pt"
    path.write_bytes(_archive(_pickle(obj), byteorder=b"big", **records))
    theirs = torch.load(path)
    ours = wg.load(path, map_location=device)
    for k, a in arrays.items():
        np.testing.assert_array_equal(theirs[k].numpy(), a, err_msg=tag(f"torch: {k}"))
        np.testing.assert_array_equal(to_numpy(ours[k]), a.astype(to_numpy(ours[k]).dtype), err_msg=tag(k))


# ---- hostile files ----
class _Storage:
    """A storage as torch.save pickles one: a persistent id."""

    def __init__(self, kind, key, numel, location="cpu"):
        self.pid = ("storage", kind, key, location, numel)


class _Tensor:
    """A tensor as torch.save pickles one, with any arguments."""

    def __init__(self, storage, offset, size, stride, requires_grad=False, hooks=None):
        self.args = (storage, offset, tuple(size), tuple(stride), requires_grad,
                     OrderedDict() if hooks is None else hooks)


class _TorchPickler(pickle.Pickler):
    """Python's own pickler (protocol 2), writing tensors as torch.save does: an independent writer."""

    def persistent_id(self, obj):
        return obj.pid if isinstance(obj, _Storage) else None

    def reducer_override(self, obj):
        if isinstance(obj, _Tensor):
            return torch._utils._rebuild_tensor_v2, obj.args
        return NotImplemented


def _pickle(obj):
    out = io.BytesIO()
    _TorchPickler(out, protocol=2).dump(obj)
    return out.getvalue()


def _zip(records):
    """A zip archive of name -> bytes, stored as torch.save stores records."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in records.items():
            archive.writestr(name, data)
    return out.getvalue()


def _archive(pickled, byteorder=b"little", **records):
    """A checkpoint archive: data.pkl, byteorder, the given records, version."""
    return _zip({"archive/data.pkl": pickled, "archive/byteorder": byteorder,
                 **{f"archive/{name}": data for name, data in records.items()}, "archive/version": b"3\n"})


FLOATS = np.arange(4, dtype=np.float32).tobytes()
STORAGE = _Storage(torch.FloatStorage, "0", 4)


def _with_tensor(*args, kind=torch.FloatStorage, **kwargs):
    """An archive of {'w': a tensor of the given arguments} over a 4-float record."""
    storage = _Storage(kind, "0", 4) if kind is not torch.FloatStorage else STORAGE
    return _archive(_pickle({"w": _Tensor(storage, *args, **kwargs)}), **{"data/0": FLOATS})


GOOD = _with_tensor(0, (2, 2), (2, 1))
P2 = b"\x80\x02"
SENTINEL = "/tmp/webgrad-checkpoint-test-ran-code"


def _flip(raw, at, mask):
    raw = bytearray(raw)
    raw[at] ^= mask
    return bytes(raw)


def _duplicate_record():
    out = io.BytesIO()
    with pytest.warns(UserWarning), zipfile.ZipFile(out, "w") as archive:
        archive.writestr("archive/data.pkl", _pickle({"a": 1}))
        archive.writestr("archive/data.pkl", _pickle({"a": 2}))
    return out.getvalue()


def _compressed():
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("archive/data.pkl", _pickle({"a": 1}))
    return out.getvalue()


def _legacy():
    out = io.BytesIO()
    torch.save({"w": torch.ones(2)}, out, _use_new_zipfile_serialization=False)
    return out.getvalue()


def _torchscript():
    out = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)   # torch.jit's; the files still exist
        torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), out)
    return out.getvalue()


def _claimed_size(raw, size):
    """raw with the central directory's sizes of data/0 set to size (the local header keeps its own)."""
    at = raw.rfind(b"PK\x01\x02", 0, raw.find(b"archive/data/0", raw.find(b"PK\x01\x02")))
    return raw[:at + 20] + struct.pack("<II", size, size) + raw[at + 28:]


def _global_call(module, name, *args):
    """A pickle that calls module.name(*args): what pickle.loads would run."""
    body = b"c" + f"{module}\n{name}\n".encode() + b"("
    for a in args:
        raw = a.encode()
        body += b"X" + struct.pack("<I", len(raw)) + raw
    return P2 + body + b"tR."


HOSTILE = {
    # not a checkpoint archive
    "empty file": (b"", ValueError, "not a PyTorch checkpoint"),
    "random bytes": (bytes(range(256)) * 4, ValueError, "not a PyTorch checkpoint"),
    "a safetensors file under another name": (b"\x0e\0\0\0\0\0\0\0{}            ", ValueError,
                                              "not a PyTorch checkpoint.*it is a safetensors file"),
    "torch's legacy format": (_legacy(), ValueError, "before torch 1.6"),
    "TorchScript archive": (_torchscript(), ValueError, "TorchScript"),
    "truncated archive": (GOOD[:-30], ValueError, "not a PyTorch checkpoint"),
    "half an archive": (GOOD[:len(GOOD) // 2], ValueError, "not a PyTorch checkpoint"),
    "corrupt storage bytes (CRC)": (_flip(GOOD, GOOD.find(FLOATS) + 5, 0x40), ValueError, "data/0.*corrupt"),
    "compressed record": (_compressed(), ValueError, "compressed"),
    "no data.pkl": (_zip({"archive/version": b"3\n"}), ValueError, "0 data.pkl"),
    "two archives": (_zip({"a/data.pkl": P2 + b"N.", "b/data.pkl": P2 + b"N."}), ValueError, "2 data.pkl"),
    "a record twice": (_duplicate_record(), ValueError, "twice"),
    "bad byteorder": (_archive(P2 + b"N.", byteorder=b"middle"), ValueError, "byteorder"),
    "devices record not JSON": (_archive(P2 + b"N.", webgrad_devices=b"{"), ValueError, "webgrad_devices"),
    "devices record not names": (_archive(P2 + b"N.", webgrad_devices=b'{"0": 1}'), ValueError, "webgrad_devices"),
    "record size claimed 4 GiB": (_claimed_size(GOOD, 2**32 - 4), ValueError, "holds 4294967292 bytes"),
    "record size claimed 4 GiB, as the pickle says": (
        _claimed_size(_archive(_pickle({"w": _Tensor(_Storage(torch.FloatStorage, "0", 2**30 - 1), 0, (4,), (1,))}),
                               **{"data/0": FLOATS}), 2**32 - 4), ValueError, "data/0.*corrupt"),
    # code and classes
    "os.system": (_archive(_global_call("os", "system", f"touch {SENTINEL}")), pickle.UnpicklingError, "os.system"),
    "posix.system": (_archive(_global_call("posix", "system", f"touch {SENTINEL}")), pickle.UnpicklingError,
                     "posix.system"),
    "builtins.exec": (_archive(_global_call("__builtin__", "exec", f"open('{SENTINEL}', 'w')")),
                      pickle.UnpicklingError, "builtins.exec"),
    "builtins.getattr": (_archive(_global_call("builtins", "getattr")), pickle.UnpicklingError, "builtins.getattr"),
    "torch.load": (_archive(_global_call("torch", "load", SENTINEL)), pickle.UnpicklingError, "torch.load"),
    "a class": (_archive(pickle.dumps(collections.Counter(a=1), protocol=2)), pickle.UnpicklingError,
                "collections.Counter"),
    "a numpy array": (_archive(pickle.dumps(np.zeros(2), protocol=2)), pickle.UnpicklingError, "numpy"),
    "complex storage": (_with_tensor(0, (2,), (1,), kind=torch.ComplexFloatStorage), pickle.UnpicklingError,
                        "torch.ComplexFloatStorage"),
    "protocol 4": (_archive(pickle.dumps({"a": [1]}, protocol=4)), pickle.UnpicklingError, "opcode"),
    "unknown opcode": (_archive(P2 + b"\xff."), pickle.UnpicklingError, "opcode"),
    "BUILD on a list": (_archive(P2 + b"]}b."), pickle.UnpicklingError, "BUILD"),
    "APPEND to a dict": (_archive(P2 + b"}Na."), pickle.UnpicklingError, "APPEND"),
    "SETITEM on a list": (_archive(P2 + b"]NNs."), pickle.UnpicklingError, "SETITEM"),
    "REDUCE on a string": (_archive(P2 + b"X\x01\x00\x00\x00a)R."), pickle.UnpicklingError, "REDUCE"),
    # broken pickles
    "empty pickle": (_archive(b""), ValueError, "ends inside"),
    "truncated pickle": (_archive(_pickle({"a": [1, 2]})[:-4]), ValueError, "ends inside"),
    "no STOP": (_archive(P2 + b"N"), ValueError, "ends inside"),
    "stack underflow": (_archive(P2 + b"R."), ValueError, "too few"),
    "tuple without MARK": (_archive(P2 + b"t."), ValueError, "MARK"),
    "memo read first": (_archive(P2 + b"h\x05."), ValueError, "memo entry 5"),
    "string longer than the file": (_archive(P2 + b"X\xff\xff\xff\x7fabc"), ValueError, "ends inside"),
    "string not UTF-8": (_archive(P2 + b"X\x02\x00\x00\x00\xff\xfe."), ValueError, "UTF-8"),
    "GLOBAL without end of line": (_archive(P2 + b"ctorch" + b"a" * 300), ValueError, "end of line"),
    "bytes after STOP": (_archive(P2 + b"N.N."), ValueError, "follow"),
    "objects left after STOP": (_archive(P2 + b"NN."), ValueError, "left|behind"),
    "unhashable key": (_archive(P2 + b"}]Ns."), ValueError, "unhashable"),
    "tuples nested a million deep as a key": (_archive(P2 + b"})" + b"\x85" * 10**6 + b"Ns."), ValueError, "nest"),
    "bad OrderedDict arguments": (_archive(P2 + b"ccollections\nOrderedDict\nK\x01\x85R."), ValueError,
                                  "collections.OrderedDict"),
    "bytes of another encoding": (_archive(P2 + b"c_codecs\nencode\nX\x01\x00\x00\x00aX\x05\x00\x00\x00utf-8\x86R."),
                                  ValueError, "_codecs.encode"),
    # storages and tensors
    "persistent id not a storage": (_archive(P2 + b"X\x01\x00\x00\x00x\x85Q."), ValueError, "persistent id"),
    "persistent id not a tuple": (_archive(P2 + b"NQ."), ValueError, "not a tuple"),
    "storage without a record": (_archive(_pickle({"w": _Tensor(STORAGE, 0, (4,), (1,))})), ValueError,
                                 "no record data/0"),
    "storage larger than its record": (_archive(_pickle({"w": _Tensor(_Storage(torch.FloatStorage, "0", 2**61), 0,
                                                                      (4,), (1,))}), **{"data/0": FLOATS}),
                                       ValueError, "holds 16 bytes"),
    "storage numel not an int": (_archive(_pickle({"w": _Tensor(_Storage(torch.FloatStorage, "0", 4.0), 0, (4,),
                                                                (1,))}), **{"data/0": FLOATS}), ValueError,
                                 "malformed"),
    "one storage as two types": (_archive(_pickle([_Tensor(STORAGE, 0, (4,), (1,)),
                                                   _Tensor(_Storage(torch.IntStorage, "0", 4), 0, (4,), (1,))]),
                                          **{"data/0": FLOATS}), ValueError, "named as"),
    "tensor past its storage": (_with_tensor(1, (4,), (1,)), ValueError, r"tensor \['w'\].*reaches past"),
    "huge size": (_with_tensor(0, (2**40, 2**40), (2**40, 1)), ValueError, "reaches past"),
    "negative offset": (_with_tensor(-1, (2,), (1,)), ValueError, "offset"),
    "negative size": (_with_tensor(0, (-2,), (1,)), ValueError, "size"),
    "stride of another rank": (_with_tensor(0, (2, 2), (1,)), ValueError, "stride"),
    "bool size": (_with_tensor(0, (True,), (1,)), ValueError, "size"),
    "integer tensor requiring grad": (_with_tensor(0, (4,), (1,), True, kind=torch.IntStorage), ValueError,
                                      "requires grad"),
    "hooks not a dict": (_with_tensor(0, (4,), (1,), False, []), ValueError, "hooks"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_files_raise_and_load_nothing(case, device, tmp_path):
    raw, error, match = HOSTILE[case]
    path = tmp_path / "bad.pt"
    path.write_bytes(raw)
    if os.path.exists(SENTINEL):
        os.remove(SENTINEL)
    before = wg.memory_stats(device).get("live_buffers")
    info = _raises_within(3 * len(raw) + 2**20, error, match, wg.load, path, map_location=device)
    assert str(path) in str(info.value), tag(f"the error does not name the file: {info.value}")
    assert not os.path.exists(SENTINEL), tag("loading ran code from the file")
    assert wg.memory_stats(device).get("live_buffers") == before, tag(f"{case}: a failed load left tensors behind")
    with pytest.raises(error):   # and from a file object, named by its type
        wg.load(io.BytesIO(raw), map_location=device)


def test_the_good_base_of_the_hostile_files_loads(device, tmp_path):
    path = tmp_path / "good.pt"
    path.write_bytes(GOOD)
    assert_close(wg.load(path, map_location=device)["w"], np.arange(4, dtype=np.float32).reshape(2, 2))
    assert torch.load(path)["w"].tolist() == [[0, 1], [2, 3]]   # torch reads the hostile files' base too


def test_not_a_file(tmp_path):
    with pytest.raises(IsADirectoryError):
        wg.load(tmp_path)
    with pytest.raises(ValueError, match="/dev/zero: not a regular file"):
        wg.load("/dev/zero")
    with pytest.raises(TypeError, match="path or a binary file"):
        wg.load(3)
    with pytest.raises(TypeError, match="binary mode"):
        wg.load(io.StringIO("text"))
