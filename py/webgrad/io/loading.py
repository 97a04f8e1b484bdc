"""Loading a checkpoint: its archive's records, the pickle read twice by the restricted reader, and
the tensors made on their devices.

The first reading makes placeholders, so every tensor is checked (bounds, dtype, device) and named
by where it sits in the object, and every storage converted to its webgrad dtype, before any
device memory is taken: a file that fails to load leaves nothing on a device. The second reading
builds the object with the tensors made. Tensors on one storage load as views of one storage.
"""
import array
import json
import math

from .. import dtypes
from .._tensor import Tensor
from ..ops.creation import frombuffer
from .archive import DEVICES_RECORD, Archive
from .pickle_reader import Reader
from .rebuild import Build, Plan, StorageRef, TensorRef, allowed_globals, brief
from .storage_types import StorageType
from .walk import find


class Checkpoint:
    """A checkpoint file's contents (bytes); where names it in errors."""

    def __init__(self, data, where):
        self.archive = Archive(data, where)
        self.where, self.fail = where, self.archive.fail

    def load(self, place):
        """The saved object, each storage on the device place(StorageRef) names."""
        order = self.archive.read("byteorder") or b"little"
        if order not in (b"little", b"big"):
            self.fail(f"byteorder record says {bytes(order[:20])!r}, not 'little' or 'big'")
        self.swap = order == b"big"
        self.saved_on = self.devices_record()
        pickled = self.archive.read("data.pkl")
        plan = Plan()
        names = {id(t): path for path, t in find(self.unpickle(pickled, plan), TensorRef)}
        tensors = self.materialize(plan.tensors, names, place)
        return self.unpickle(pickled, Build(tensors))

    def devices_record(self):
        raw = self.archive.read(DEVICES_RECORD)
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
                self.fail(f"a persistent id is ({', '.join(brief(v) for v in pid[:5])}), not "
                          f"('storage', type, key, location, numel)")
            _, kind, key, location, numel = pid
            if not (isinstance(kind, StorageType) and type(key) is str and type(location) is str
                    and type(numel) is int and numel >= 0):
                self.fail(f"a storage's persistent id is malformed: ({', '.join(brief(v) for v in pid)})")
            ref = storages.get(key)
            if ref is None:
                size = self.archive.size(f"data/{key}")
                if size is None:
                    self.fail(f"storage {key!r} has no record data/{key}")
                if size != numel * kind.itemsize:
                    self.fail(f"record data/{key} holds {size} bytes, but {numel} elements of "
                              f"torch.{kind.name} need {numel * kind.itemsize}")
                ref = storages[key] = StorageRef(key, kind, self.saved_on.get(key, location), numel)
            elif (ref.kind, ref.numel) != (kind, numel):
                self.fail(f"storage {key!r} is named as torch.{ref.kind.name} of {ref.numel} and as "
                          f"torch.{kind.name} of {numel} elements")
            return ref

        return Reader(pickled, f"{self.where}: data.pkl", allowed_globals(maker), persistent_load).load()

    def materialize(self, refs, names, place):
        """The tensors of refs, in order, on their devices, after checking all of them."""
        storages = {id(t.storage): t.storage for t in refs}.values()
        for s in storages:
            s.device = place(s)
        first_name = {}   # of a tensor on each storage, for errors about the storage's data
        for t in refs:
            name = names.get(id(t), "outside the saved object")
            first_name.setdefault(id(t.storage), name)
            self.check(t, name)
        host = {}   # every storage converted before any is uploaded: a failed load leaves nothing on a device
        for s in storages:
            elements = array.array(s.kind.code, self.archive.read(f"data/{s.key}"))
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

    def check(self, t, name):
        """A TensorRef that the device its storage goes to can hold, and that stays inside its storage."""
        dtype, s = t.storage.kind.dtype, t.storage
        if dtype is dtypes.float64 and s.device != "cpu":
            raise TypeError(f"{self.where}: tensor {name} is float64, which the {s.device} device can't hold "
                            f"(WGSL has no f64); load it with map_location='cpu', or save it as float32")
        if t.requires_grad and not dtype.is_floating_point:
            self.fail(f"tensor {name} is {dtype.name} but requires grad")
        if math.prod(t.size) and t.offset + sum((n - 1) * st for n, st in zip(t.size, t.stride)) >= s.numel:
            self.fail(f"tensor {name} (size {list(t.size)}, stride {list(t.stride)}, offset {t.offset}) reaches "
                      f"past the {s.numel} elements of its storage data/{s.key}")
