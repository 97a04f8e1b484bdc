"""wg.save / wg.load: PyTorch's checkpoint format, and safetensors for paths named *.safetensors;
this file routes between them, takes paths and file objects, and turns map_location into devices.

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

Loading never runs code from a file: the pickle is read with a table of the names a checkpoint may
use (tensors, storages, OrderedDict, torch.Size, set, bytes, complex); anything else is a
pickle.UnpicklingError naming it. float64 tensors need map_location='cpu'.

The parts: archive (the zip records), pickle_writer and pickle_reader (the pickle subset),
storage_types (dtype rules), saving (tensors to records), rebuild (what the pickle's names mean),
loading (checks and tensors on devices), walk (naming a tensor by where it sits in the object).
"""
import os

from ..backends import default_device, resolve_device
from . import safetensors
from ._files import open_regular
from .loading import Checkpoint
from .saving import CheckpointWriter


def save(obj, f, metadata=None):
    """Write obj (a state_dict, or a checkpoint of nested dicts, lists and numbers holding tensors)
    to f, a path or a binary file object, in PyTorch's checkpoint format. A path ending in
    .safetensors gets a safetensors file instead (obj a dict of name -> Tensor, with optional
    metadata), as webgrad wrote before it had the checkpoint format."""
    if _is_safetensors_path(f):
        return safetensors.save(obj, f, metadata)
    if metadata is not None:
        raise TypeError("save: metadata is written to .safetensors files only")
    writer = CheckpointWriter(obj)
    if isinstance(f, (str, bytes, os.PathLike)):
        with open(f, "wb") as out:
            writer.write(out)
    else:
        writer.write(f)


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
    return Checkpoint(data, where).load(_placement(map_location))


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


def _placement(map_location):
    """map_location as a function from a storage (its .location the one it was saved at) to the
    device it loads on."""
    def place(storage):
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
    return place


def _default_device(location):
    """Where a storage saved at location loads without a map_location."""
    if location == "cpu":
        return "cpu"
    if location.startswith("webgpu"):
        return "webgpu"
    return default_device()   # PyTorch's cuda, mps, ...: webgrad's accelerator, where there is one
