"""wg.save / wg.load: PyTorch's checkpoint format, and safetensors for paths named *.safetensors.

The checkpoint format is the zip archive torch.save writes, so `torch.load(path)` (weights_only
included) reads webgrad's files and wg.load reads PyTorch's:

    archive/data.pkl         the saved object as a protocol-2 pickle; a tensor is
                             torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...)
                             and its storage a persistent id ('storage', torch.FloatStorage, key,
                             location, numel) naming the record below
    archive/data/<key>       each storage's elements, little-endian, stored uncompressed
    archive/byteorder        'little'
    archive/version          '3'
    archive/webgrad_devices  webgrad's own: {key: the device a storage was saved from}; PyTorch
                             ignores it and reads every storage as a 'cpu' one

Tensors that share a storage (views, tied weights) share one record, which holds only the part
of the storage they reach, and they load as views of one storage again.

Loading never runs code from a file: the pickle is read by webgrad.io.pickler with a table of the
names a checkpoint may use (tensors, storages, OrderedDict, torch.Size, set, bytes, complex);
anything else is a pickle.UnpicklingError naming it. The pickle is read twice: first with
placeholders for tensors, so every tensor is checked (bounds, dtype, device) and named by where it
sits in the object before any device memory is taken; then for real, with the tensors made.

dtypes: webgrad has float32, float64 (cpu only), int32, uint8 and bool. From PyTorch files, int64
loads as int32 when every value fits (an OverflowError naming the tensor otherwise), int8 and int16
as int32, float16 and bfloat16 as float32 (all exact); float64 needs map_location='cpu'. Other
dtypes (complex, quantized, float8, ...) are refused as globals webgrad doesn't read.
"""
import array
import io
import json
import math
import os
import struct
import zipfile

from .. import dtypes
from .._tensor import Size, Tensor
from ..backends import default_device, resolve_device
from ..ops.creation import frombuffer
from . import safetensors
from ._files import open_regular
from .pickler import Function, Global, OrderedDict, Persistent, Reader, Reduce, Unsupported, dump

ARCHIVE = "archive"          # the records' folder; torch.save uses the same name for file objects
DEVICES_RECORD = "webgrad_devices"
_ALIGN = 64                  # storage records start 64-byte aligned, as torch.save writes them (for mmap)
_SAVABLE = "tensors, dicts, OrderedDicts, lists, tuples, sets, strings, bytes, numbers, bools and None"


# ---- dtypes ----
def _as_is(elements):
    return elements.tobytes()


def _bools(elements):
    return elements.tobytes().translate(_NONZERO_IS_ONE)   # webgrad's bool storage holds 0 and 1 only


_NONZERO_IS_ONE = bytes([0] + [1] * 255)


def _int64_to_int32(elements):
    if elements and not (-2**31 <= min(elements) and max(elements) < 2**31):
        raise OverflowError(f"int64 values from {min(elements)} to {max(elements)} do not fit in int32, "
                            f"webgrad's integer dtype")
    return array.array("i", elements).tobytes()


def _to_int32(elements):
    return array.array("i", elements).tobytes()


def _float16_to_float32(elements):
    return array.array("f", struct.unpack(f"<{len(elements)}e", elements.tobytes())).tobytes()


def _bfloat16_to_float32(elements):
    return array.array("I", [bits << 16 for bits in elements]).tobytes()   # bfloat16: float32's top half


class _StorageType:
    """A torch storage class webgrad reads: the file's element format and how it becomes a webgrad dtype."""

    def __init__(self, name, code, dtype, convert):
        self.name, self.code, self.dtype, self.convert = name, code, dtype, convert
        self.itemsize = array.array(code).itemsize


_STORAGE_TYPES = {t.name: t for t in [
    _StorageType("FloatStorage", "f", dtypes.float32, _as_is),
    _StorageType("DoubleStorage", "d", dtypes.float64, _as_is),
    _StorageType("IntStorage", "i", dtypes.int32, _as_is),
    _StorageType("ByteStorage", "B", dtypes.uint8, _as_is),
    _StorageType("BoolStorage", "B", dtypes.bool_, _bools),
    _StorageType("LongStorage", "q", dtypes.int32, _int64_to_int32),
    _StorageType("ShortStorage", "h", dtypes.int32, _to_int32),
    _StorageType("CharStorage", "b", dtypes.int32, _to_int32),
    _StorageType("HalfStorage", "H", dtypes.float32, _float16_to_float32),
    _StorageType("BFloat16Storage", "H", dtypes.float32, _bfloat16_to_float32),
]}
_WRITTEN_AS = {dtypes.float32: "FloatStorage", dtypes.float64: "DoubleStorage", dtypes.int32: "IntStorage",
               dtypes.uint8: "ByteStorage", dtypes.bool_: "BoolStorage"}


# ---- the public functions ----
def save(obj, f, metadata=None):
    """Write obj (a state_dict, or a checkpoint of nested dicts, lists and numbers holding tensors)
    to f, a path or a binary file object, in PyTorch's checkpoint format. A path ending in
    .safetensors gets a safetensors file instead (obj a dict of name -> Tensor, with optional
    metadata), as webgrad wrote before it had the checkpoint format."""
    if _is_safetensors_path(f):
        return safetensors.save(obj, f, metadata)
    if metadata is not None:
        raise TypeError("save: metadata is written to .safetensors files only")
    records = _Records(obj)
    try:
        pickled = dump(obj, records.reduce)
    except Unsupported as e:
        where = "".join(_label(step) for step in e.path) or "the top level"
        raise TypeError(f"save: can't save a value of type {type(e.obj).__name__} (at {where}); "
                        f"webgrad saves {_SAVABLE}") from None
    if isinstance(f, (str, bytes, os.PathLike)):
        with open(f, "wb") as out:
            records.write(out, pickled)
    else:
        records.write(f, pickled)


def load(f, map_location=None, *, weights_only=None, device=None):
    """The object saved in f (a path or a binary file object): a PyTorch checkpoint (from torch.save
    or wg.save), or a safetensors file if f is a path ending in .safetensors.

    map_location: where tensors go, as in torch.load: a device ('cpu', 'webgpu', a device object),
    a dict from saved locations to devices, or a function (storage, location) returning a device,
    None (keep the default) or the storage itself (keep it on the cpu). Without one, tensors go
    back to the device webgrad saved them from; tensors of PyTorch files saved on the cpu load on
    the cpu, and those saved on an accelerator (cuda, mps, ...) on webgrad's default device.
    device: webgrad's older name for map_location.
    weights_only: accepted for PyTorch's sake; webgrad always reads as weights_only=True does:
    tensors, containers and numbers, never code."""
    del weights_only   # reading anything more would mean running code from the file
    if device is not None:
        if map_location is not None:
            raise TypeError("load: give map_location or device, not both")
        map_location = device
    if _is_safetensors_path(f):
        if isinstance(map_location, dict) or callable(map_location):
            raise TypeError("load: a safetensors file records no devices to map; give map_location a device")
        return safetensors.load(f, device=map_location)
    where, data = _read_all(f)
    return _Checkpoint(data, where).load(map_location)


def _is_safetensors_path(f):
    return isinstance(f, (str, bytes, os.PathLike)) and os.fsdecode(f).lower().endswith(".safetensors")


def _read_all(f):
    if isinstance(f, (str, bytes, os.PathLike)):
        with open_regular(f, "a PyTorch checkpoint") as file:
            return os.fsdecode(f), file.read()
    if not hasattr(f, "read"):
        raise TypeError(f"load: f must be a path or a binary file object, not {type(f).__name__}")
    data = f.read()
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError(f"load: the file object gave {type(data).__name__}, not bytes: open it in binary mode")
    return str(getattr(f, "name", None) or f"<{type(f).__name__}>"), data


# ---- writing ----
class _Records:
    """The storage records of the tensors in obj: one per storage (and dtype) they view, holding
    the span of elements they reach; keys are numbered in the order the pickle meets them."""

    def __init__(self, obj):
        self.spans = {}   # (id(storage), dtype) -> [a tensor on it, lowest element, past the highest, key]
        for _, t in _find(obj, Tensor):
            span = self.spans.setdefault((id(t._storage), t.dtype), [t, math.inf, -math.inf, None])
            if t.numel():
                span[1] = min(span[1], t._offset)
                span[2] = max(span[2], t._offset + sum((n - 1) * st for n, st in zip(t.shape, t._strides)) + 1)
        self.order = []

    def reduce(self, obj):
        """What the pickle writes for a tensor (and for a Size, as torch.Size)."""
        if type(obj) is Size:
            return Reduce(Global("torch", "Size"), (tuple(obj),))
        if not isinstance(obj, Tensor):
            return None
        span = self.spans[(id(obj._storage), obj.dtype)]
        if span[3] is None:
            span[3] = str(len(self.order))
            self.order.append(span)
        numel = max(span[2] - span[1], 0)
        storage = Persistent(("storage", Global("torch", _WRITTEN_AS[obj.dtype]), span[3], "cpu", numel))
        offset = obj._offset - span[1] if obj.numel() else 0
        return Reduce(Global("torch._utils", "_rebuild_tensor_v2"),
                      (storage, offset, tuple(obj.shape), tuple(obj._strides), obj.requires_grad,
                       Reduce(Global("collections", "OrderedDict"), ())))

    def write(self, f, pickled):
        with zipfile.ZipFile(f, "w") as archive:
            start = archive.start_dir
            for name, data in self.contents(pickled):
                info = zipfile.ZipInfo(f"{ARCHIVE}/{name}", date_time=(1980, 1, 1, 0, 0, 0))
                # The local header: 30 bytes, the name, a padding field (id "FB", its size, the
                # padding) and, from 1 GiB (forced, so known here), zipfile's 20-byte zip64 field.
                big = len(data) >= 2**30
                header = 30 + len(info.filename.encode()) + 4 + (20 if big else 0)
                pad = -(archive.start_dir - start + header) % _ALIGN
                info.extra = b"FB" + struct.pack("<H", pad) + b"Z" * pad
                with archive.open(info, "w", force_zip64=big) as out:
                    out.write(data)

    def contents(self, pickled):
        """(record name, bytes) in the archive's order; one storage's elements in memory at a time."""
        yield "data.pkl", pickled
        yield "byteorder", b"little"
        yield DEVICES_RECORD, json.dumps({key: t.device for t, _, _, key in self.order}).encode()
        for t, lo, hi, key in self.order:
            span = Tensor(t._storage, (hi - lo,), t.dtype, t.device, (1,), lo) if hi > lo else None
            yield f"data/{key}", span._host_bytes() if span is not None else b""
        yield "version", b"3\n"


# ---- reading ----
class _StorageRef:
    """A storage the pickle names: its record, type, element count and saved location."""

    def __init__(self, key, kind, location, numel):
        self.key, self.kind, self.location, self.numel = key, kind, location, numel
        self.device = self.base = None


class _TensorRef:
    """A tensor as the first reading of the pickle finds it, before any data is read."""
    __slots__ = ("storage", "offset", "size", "stride", "requires_grad")

    def __init__(self, storage, offset, size, stride, requires_grad):
        self.storage, self.offset, self.size, self.stride = storage, offset, size, stride
        self.requires_grad = requires_grad


class _Checkpoint:
    def __init__(self, data, where):
        self.where = where
        try:
            self.zip = zipfile.ZipFile(io.BytesIO(data))
            infos = self.zip.infolist()
        except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, struct.error, UnicodeDecodeError,
                ValueError, OverflowError) as e:
            legacy = " (PyTorch's format from before torch 1.6 is not supported)" if data[:2] == b"\x80\x02" else ""
            self.fail(f"not a PyTorch checkpoint, the zip archive torch.save writes{legacy}: {e}")
        self.records = {}
        for info in infos:
            if info.filename in self.records:
                self.fail(f"the archive holds {info.filename!r} twice")
            self.records[info.filename] = info
        if any(name.endswith("/constants.pkl") for name in self.records):
            self.fail("a TorchScript archive (torch.jit.save), not a torch.save checkpoint")
        pickles = [name for name in self.records if name.count("/") == 1 and name.endswith("/data.pkl")]
        if len(pickles) != 1:
            self.fail(f"{len(pickles)} data.pkl records, where a checkpoint has one")
        self.prefix = pickles[0][:-len("data.pkl")]

    def fail(self, why):
        raise ValueError(f"{self.where}: {why}")

    def record(self, name):
        """A record's bytes (CRC-checked), or None if the archive has none of that name."""
        info = self.records.get(self.prefix + name)
        if info is None:
            return None
        if info.compress_type != zipfile.ZIP_STORED or info.flag_bits & 1:   # and so never inflated past its size
            self.fail(f"record {info.filename!r} is compressed or encrypted (torch.save stores records as they are)")
        try:
            return self.zip.read(info)
        except (zipfile.BadZipFile, EOFError, struct.error) as e:
            self.fail(f"record {info.filename!r} is corrupt: {e}")

    def load(self, map_location):
        order = self.record("byteorder") or b"little"
        if order not in (b"little", b"big"):
            self.fail(f"byteorder record says {bytes(order[:20])!r}, not 'little' or 'big'")
        self.swap = order == b"big"
        self.saved_on = self.devices_record()
        pickled = self.record("data.pkl")
        plan = _Plan()
        names = {id(t): path for path, t in _find(self.unpickle(pickled, plan), _TensorRef)}
        tensors = self.materialize(plan.tensors, names, map_location)
        return self.unpickle(pickled, _Build(tensors))

    def devices_record(self):
        raw = self.record(DEVICES_RECORD)
        if raw is None:
            return {}
        try:
            devices = json.loads(raw)
        except (UnicodeDecodeError, ValueError, RecursionError) as e:
            self.fail(f"{DEVICES_RECORD} is not JSON ({e})")
        if not (isinstance(devices, dict) and all(isinstance(v, str) for v in devices.values())):
            self.fail(f"{DEVICES_RECORD} is not an object of device names")
        return devices

    def unpickle(self, pickled, maker):
        storages = {}

        def persistent_load(pid):
            if len(pid) != 5 or pid[0] != "storage":
                self.fail(f"a persistent id is ({', '.join(_brief(v) for v in pid[:5])}), not "
                          f"('storage', type, key, location, numel)")
            _, kind, key, location, numel = pid
            if not (isinstance(kind, _StorageType) and type(key) is str and type(location) is str
                    and type(numel) is int and numel >= 0):
                self.fail(f"a storage's persistent id is malformed: ({', '.join(_brief(v) for v in pid)})")
            ref = storages.get(key)
            if ref is None:
                info = self.records.get(f"{self.prefix}data/{key}")
                if info is None:
                    self.fail(f"storage {key!r} has no record data/{key}")
                if info.file_size != numel * kind.itemsize:
                    self.fail(f"record data/{key} holds {info.file_size} bytes, but {numel} elements of "
                              f"torch.{kind.name} need {numel * kind.itemsize}")
                ref = storages[key] = _StorageRef(key, kind, self.saved_on.get(key, location), numel)
            elif (ref.kind, ref.numel) != (kind, numel):
                self.fail(f"storage {key!r} is named as torch.{ref.kind.name} of {ref.numel} and as "
                          f"torch.{kind.name} of {numel} elements")
            return ref

        allowed = _allowed_globals(maker)
        return Reader(pickled, f"{self.where}: data.pkl", allowed, persistent_load).load()

    def materialize(self, refs, names, map_location):
        """The tensors of refs, in order, on their devices, after checking all of them."""
        storages = {id(t.storage): t.storage for t in refs}.values()
        for s in storages:
            s.device = self.device_for(s, map_location)
        first_name = {}   # of a tensor on each storage, for errors about the storage's data
        for t in refs:
            name, dtype, s = names.get(id(t), "outside the saved object"), t.storage.kind.dtype, t.storage
            first_name.setdefault(id(s), name)
            if dtype is dtypes.float64 and s.device != "cpu":
                raise TypeError(f"{self.where}: tensor {name} is float64, which the {s.device} device can't hold "
                                f"(WGSL has no f64); load it with map_location='cpu', or save it as float32")
            if t.requires_grad and not dtype.is_floating_point:
                self.fail(f"tensor {name} is {dtype.name} but requires grad")
            if math.prod(t.size) and t.offset + sum((n - 1) * st for n, st in zip(t.size, t.stride)) >= s.numel:
                self.fail(f"tensor {name} (size {list(t.size)}, stride {list(t.stride)}, offset {t.offset}) reaches "
                          f"past the {s.numel} elements of its storage data/{s.key}")
        host = {}   # every storage converted before any is uploaded: a failed load leaves nothing on a device
        for s in storages:
            elements = array.array(s.kind.code, self.record(f"data/{s.key}"))
            if self.swap and s.kind.itemsize > 1:
                elements.byteswap()
            try:
                host[s.key] = s.kind.convert(elements)
            except OverflowError as e:
                raise OverflowError(f"{self.where}: tensor {first_name[id(s)]}: {e}") from None
        for s in storages:
            s.base = frombuffer(host.pop(s.key), s.kind.dtype, device=s.device)
        tensors = []
        for t in refs:
            s = t.storage
            tensor = Tensor(s.base._storage, t.size, s.kind.dtype, s.device, t.stride, t.offset)
            tensors.append(tensor.requires_grad_() if t.requires_grad else tensor)
        return tensors

    def device_for(self, storage, map_location):
        location = storage.location
        if map_location is None:
            return _default_device(location)
        if isinstance(map_location, dict):
            target = map_location.get(location)
            return _default_device(location) if target is None else resolve_device(target)
        if callable(map_location):
            target = map_location(storage, location)
            if target is None:
                return _default_device(location)
            return "cpu" if target is storage else resolve_device(target)
        return resolve_device(map_location)


def _default_device(location):
    """Where a storage saved at location loads without a map_location."""
    if location == "cpu":
        return "cpu"
    if location.startswith("webgpu"):
        return "webgpu"
    return default_device()   # PyTorch's cuda, mps, ...: webgrad's accelerator, where there is one


class _Plan:
    """The first reading: placeholders, collected to be checked and named."""

    def __init__(self):
        self.tensors = []

    def tensor(self, storage, offset, size, stride, requires_grad):
        t = _TensorRef(storage, offset, size, stride, requires_grad)
        self.tensors.append(t)
        return t

    @staticmethod
    def parameter(t, requires_grad):
        t.requires_grad = requires_grad
        return t


class _Build:
    """The second reading: the tensors made from the first, in the same order."""

    def __init__(self, tensors):
        self.next = iter(tensors).__next__

    def tensor(self, *args):
        return self.next()

    @staticmethod
    def parameter(t, requires_grad):
        return t   # its requires_grad was set when it was made


def _allowed_globals(maker):
    """The names a checkpoint's pickle may use, and what each means to the reader."""
    def rebuild_tensor_v2(storage, offset, size, stride, requires_grad, backward_hooks, metadata=None):
        if type(requires_grad) is not bool:
            raise TypeError(f"requires_grad is a {type(requires_grad).__name__}")
        if not isinstance(backward_hooks, dict) or not (metadata is None or isinstance(metadata, dict)):
            raise TypeError("backward hooks and metadata must be dicts")
        return rebuild_tensor(storage, offset, size, stride, requires_grad)

    def rebuild_tensor(storage, offset, size, stride, requires_grad=False):
        if not isinstance(storage, _StorageRef):
            raise TypeError(f"the storage is a {type(storage).__name__}")
        if not (_naturals(size) and _naturals(stride) and len(size) == len(stride)):
            raise ValueError(f"size {_brief(size)} and stride {_brief(stride)} are not tuples of as many "
                             f"non-negative ints")
        if type(offset) is not int or offset < 0:
            raise ValueError(f"storage offset {_brief(offset)} is not a non-negative int")
        return maker.tensor(storage, offset, tuple(size), tuple(stride), requires_grad)

    def rebuild_parameter(data, requires_grad, backward_hooks):
        if not isinstance(data, (_TensorRef, Tensor)) or type(requires_grad) is not bool:
            raise TypeError("a parameter is made of a tensor and a bool")
        return maker.parameter(data, requires_grad)

    def encode(text, encoding):   # how protocol 2 writes bytes
        if type(text) is not str or encoding not in ("latin1", "latin-1"):
            raise TypeError("_codecs.encode is read only as protocol 2 writes bytes (text, 'latin1')")
        return text.encode("latin1")

    def size(dims):
        if not _naturals(dims):
            raise TypeError(f"torch.Size of {_brief(dims)}")
        return Size(dims)

    def set_(items):
        if type(items) is not list:
            raise TypeError(f"set() of a {type(items).__name__}, where protocol 2 writes a list")
        return set(items)

    def complex_(real, imag=0.0):
        if not all(type(v) in (int, float) for v in (real, imag)):
            raise TypeError("complex() of numbers only")
        return complex(real, imag)

    functions = [
        Function("torch._utils._rebuild_tensor_v2", rebuild_tensor_v2),
        Function("torch._utils._rebuild_tensor", rebuild_tensor),
        Function("torch._utils._rebuild_parameter", rebuild_parameter),
        Function("collections.OrderedDict", lambda: OrderedDict()),
        Function("torch.Size", size),
        Function("builtins.set", set_),
        Function("builtins.complex", complex_),
        Function("_codecs.encode", encode),
    ]
    allowed = {f.name: f for f in functions}
    allowed.update((f"torch.{name}", kind) for name, kind in _STORAGE_TYPES.items())
    return allowed


def _naturals(values):
    return type(values) in (tuple, Size) and all(type(v) is int and v >= 0 for v in values)


def _brief(value):
    """A value from a file, for an error message: short, and never a repr of a structure (which may
    nest deeper than repr can go, or be huge)."""
    if type(value) in (int, float, bool, type(None)) or (type(value) is str and len(value) <= 40):
        return repr(value)
    if type(value) in (tuple, Size) and len(value) <= 8 and all(type(v) in (int, bool) for v in value):
        return repr(tuple(value))
    return f"a {type(value).__name__}"


# ---- walking a saved object ----
_CONTAINERS = (dict, OrderedDict, list, tuple, set)


def _find(obj, kind):
    """(path, x) for every x of `kind` inside obj's dicts, lists, tuples and sets, depth first, each
    container once (an object may hold itself); path reads like an index: ['model']['fc.weight']."""
    seen, stack = set(), [((), obj)]
    while stack:
        path, x = stack.pop()
        if isinstance(x, kind):
            yield "".join(_label(step) for step in path) or "(the saved object itself)", x
            continue
        if type(x) not in _CONTAINERS or id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, dict):
            children = [(path + (("key", k),), k) for k in x] + [(path + (("item", k),), v) for k, v in x.items()]
            children += [(path + (("attribute", k),), v) for k, v in getattr(x, "__dict__", {}).items()]
        elif type(x) is set:
            children = [(path + (("member", None),), v) for v in x]
        else:
            children = [(path + (("item", i),), v) for i, v in enumerate(x)]
        stack.extend(reversed(children))


def _label(step):
    how, key = step
    if how == "key":
        return f"(the key {key!r:.60})" if not isinstance(key, (Tensor, _TensorRef)) else "(a key)"
    return {"item": f"[{key!r:.60}]", "attribute": f".{key!s:.60}", "member": "{a member}"}[how]
