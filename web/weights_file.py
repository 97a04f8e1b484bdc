"""The views' weights files, Python side (runs in the worker, under Pyodide): wg.save and wg.load
take a path (a safetensors file can only be one), so the bytes that come from and go to the page
pass through a file in Pyodide's in-memory file system."""
import os

from pyodide.ffi import to_js

import webgrad as wg

PATH = "/tmp/weights"   # then the suffix, which picks the format: ".pt" or ".safetensors"


def saved(obj, suffix, metadata=None):
    """obj as wg.save writes it to a file named with suffix (metadata: a safetensors file's), as a
    Uint8Array for the page to offer as a download."""
    path = PATH + suffix
    wg.save(obj, path, metadata)
    try:
        with open(path, "rb") as f:
            return to_js(f.read())
    finally:
        os.remove(path)


def loaded(data, name, suffix, device):
    """What wg.load reads onto device from a file the user chose (data: its bytes, a Uint8Array;
    name: its name; suffix as saved takes it). A file that is not one raises wg.load's ValueError,
    naming the file by name."""
    path = PATH + suffix
    with open(path, "wb") as f:
        f.write(data.to_bytes())
    try:
        return wg.load(path, map_location=device)
    except ValueError as e:
        raise ValueError(str(e).replace(path, name)) from None
    finally:
        os.remove(path)
