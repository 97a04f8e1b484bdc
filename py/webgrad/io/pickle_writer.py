"""The pickle writer behind wg.save: the part of pickle protocol 2 that PyTorch checkpoints use,
written without the pickle module.

It writes None, bool, int, float, str, bytes, complex, tuple, list, dict, OrderedDict (with its
attributes, as a state_dict's `_metadata`), set, and what the caller's `reduce` hook turns other
objects into (Global / Reduce / Persistent). Its opcodes are the ones PyTorch's weights-only reader
(and webgrad.io.pickle_reader) accepts, and it names only globals that reader allows, so
`torch.load(weights_only=True)` reads it.
"""
import struct
from collections import OrderedDict


# ---- what a reduce hook returns ----
class Global:
    """A module-level name (`torch._utils._rebuild_tensor_v2`), written as a GLOBAL opcode."""
    __slots__ = ("module", "name")

    def __init__(self, module, name):
        self.module, self.name = module, name


class Reduce:
    """func(*args) when read: func a Global, args a tuple."""
    __slots__ = ("func", "args")

    def __init__(self, func, args):
        self.func, self.args = func, args


class Persistent:
    """A persistent id (PyTorch's ('storage', type, key, location, numel) tuples)."""
    __slots__ = ("pid",)

    def __init__(self, pid):
        self.pid = pid


# ---- the writer ----
class Unsupported(TypeError):
    """An object the writer can't save; path lists the steps leading to it: ('item', key or index),
    ('key', key) for a dict key itself, ('attribute', name) for an OrderedDict's attribute."""

    def __init__(self, obj):
        super().__init__(type(obj))
        self.obj, self.path = obj, []


def dump(obj, reduce=lambda obj: None):
    """The protocol-2 pickle of obj. reduce(x) may turn an object into a Global, Reduce or
    Persistent (or return None to leave it to the writer)."""
    writer = _Writer(reduce)
    writer.out += b"\x80\x02"
    writer.save(obj)
    writer.out += b"."
    return bytes(writer.out)


class _Writer:
    def __init__(self, reduce):
        self.reduce = reduce
        self.out = bytearray()
        # id(obj) or a global's (module, name) -> (memo index, obj): holding obj keeps its id from
        # being reused by a later temporary (the argument tuples made here) while the pickle is written
        self.memo = {}
        self.building = set()   # ids of tuples being written (a tuple that holds itself can't be read back)

    def put(self, key, obj):
        index = len(self.memo)
        self.memo[key] = (index, obj)
        self.out += b"q" + bytes([index]) if index < 256 else b"r" + struct.pack("<I", index)

    def get(self, key):
        index = self.memo[key][0]
        self.out += b"h" + bytes([index]) if index < 256 else b"j" + struct.pack("<I", index)

    def save(self, obj):
        kind = type(obj)
        if obj is None:
            self.out += b"N"
        elif kind is bool:
            self.out += b"\x88" if obj else b"\x89"
        elif kind is int:
            self.save_int(obj)
        elif kind is float:
            self.out += b"G" + struct.pack(">d", obj)
        elif kind is str:
            raw = obj.encode("utf-8", "surrogatepass")
            self.out += b"X" + struct.pack("<I", len(raw)) + raw
        elif id(obj) in self.memo:
            self.get(id(obj))
        elif kind is bytes:   # as protocol 2 writes bytes: _codecs.encode(latin-1 text, 'latin1')
            self.save_reduce(Reduce(Global("_codecs", "encode"), (obj.decode("latin1"), "latin1")), obj)
        elif kind is complex:
            self.save_reduce(Reduce(Global("builtins", "complex"), (obj.real, obj.imag)), obj)
        elif kind is tuple:
            self.save_tuple(obj)
        elif kind is list:
            self.out += b"]"
            self.put(id(obj), obj)
            self.save_items(obj, b"e", enumerate(obj))
        elif kind is dict:
            self.out += b"}"
            self.put(id(obj), obj)
            self.save_items(obj, b"u", obj.items())
        elif kind is OrderedDict:
            self.save_reduce(Reduce(Global("collections", "OrderedDict"), ()), obj)
            self.save_items(obj, b"u", obj.items())
            if obj.__dict__:   # a state_dict's _metadata
                self.out += b"}"
                self.save_items(obj.__dict__, b"u", obj.__dict__.items(), "attribute")
                self.out += b"b"
        elif kind is set:
            self.save_reduce(Reduce(Global("builtins", "set"), (list(obj),)), obj)
        else:
            self.save_reduced(obj)

    def save_reduced(self, obj):
        reduced = obj if isinstance(obj, (Global, Reduce, Persistent)) else self.reduce(obj)
        if isinstance(reduced, Global):
            key = (reduced.module, reduced.name)
            if key in self.memo:
                self.get(key)
            else:
                self.out += b"c" + f"{reduced.module}\n{reduced.name}\n".encode()
                self.put(key, reduced)
        elif isinstance(reduced, Reduce):
            self.save_reduce(reduced, obj)
        elif isinstance(reduced, Persistent):
            self.save(reduced.pid)
            self.out += b"Q"
        else:
            raise Unsupported(obj)

    def save_int(self, n):
        if 0 <= n < 256:
            self.out += b"K" + bytes([n])
        elif 0 <= n < 65536:
            self.out += b"M" + struct.pack("<H", n)
        elif -2**31 <= n < 2**31:
            self.out += b"J" + struct.pack("<i", n)
        else:
            raw = n.to_bytes(n.bit_length() // 8 + 1, "little", signed=True)
            if len(raw) > 255:
                raise OverflowError(f"an int of {len(raw)} bytes is too large to save (at most 255)")
            self.out += b"\x8a" + bytes([len(raw)]) + raw

    def save_tuple(self, obj):
        if id(obj) in self.building:
            raise ValueError("a tuple that contains itself can't be saved")
        self.building.add(id(obj))
        if len(obj) > 3:
            self.out += b"("
        for i, item in enumerate(obj):
            self.save_child(item, ("item", i))
        self.out += b")\x85\x86\x87"[len(obj):len(obj) + 1] if len(obj) <= 3 else b"t"
        self.building.discard(id(obj))
        self.put(id(obj), obj)

    def save_items(self, obj, opcode, items, how="item"):
        """A container's items after MARK, then APPENDS (b'e') or SETITEMS (b'u')."""
        if not obj:
            return
        self.out += b"("
        for key, value in items:
            if opcode == b"u":
                self.save_child(key, ("key", key))
            self.save_child(value, (how, key))
        self.out += opcode

    def save_reduce(self, reduced, obj):
        self.save_reduced(reduced.func)
        self.save(reduced.args)
        self.out += b"R"
        self.put(id(obj), obj)

    def save_child(self, obj, step):
        try:
            self.save(obj)
        except Unsupported as e:
            e.path.insert(0, step)
            raise
