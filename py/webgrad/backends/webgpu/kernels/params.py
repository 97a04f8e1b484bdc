"""A kernel's parameter block, declared once by name.

Every dispatch binds (at binding 0) a block of 32-bit words that tells its kernel the sizes,
strides and scalars of this call. A ParamBlock names those words once; the WGSL that reads them
(`params.<name>` for a scalar, `params_<name>(i)` for element i of an array) and the Python that
packs them both come from the declaration, so the two sides cannot disagree on an order.

Layout: the scalars first, in declaration order, as the fields of the struct `Params`; then the
arrays, in declaration order, in the struct's tail. An array's length is an int (fixed when the
kernel is generated) or the name of a scalar field holding it.
"""
import keyword
import struct
from typing import NamedTuple

_F32 = struct.Struct("<f")
_U32 = struct.Struct("<I")
TYPES = ("u32", "i32", "f32")


class Field(NamedTuple):
    name: str
    type: str = "u32"     # a WGSL type of 32 bits: u32, i32 or f32
    length: object = None  # None for a scalar; an int or a scalar field's name for an array


def u32(name, length=None):
    return Field(name, "u32", length)


def i32(name, length=None):
    return Field(name, "i32", length)


def f32(name, length=None):
    return Field(name, "f32", length)


def _f32_bits(value):
    return _U32.unpack(_F32.pack(value))[0]


def _wrong_length(name, items, length_name, length):
    raise ValueError(f"parameter {name!r} has {len(items)} values where its length {length_name!r} is {length}")


class ParamBlock:
    def __init__(self, *fields):
        names = [f.name for f in fields]
        if len(set(names)) != len(names):
            raise ValueError(f"parameter block with repeated field names: {names}")
        for f in fields:
            if not f.name.isidentifier() or keyword.iskeyword(f.name) or f.name.startswith("_") or f.name == "words":
                raise ValueError(f"parameter name {f.name!r} is not a plain identifier (WGSL and Python use it)")
            if f.type not in TYPES:
                raise ValueError(f"parameter {f.name!r}: type {f.type!r} is not one of {TYPES}")
        self.scalars = tuple(f for f in fields if f.length is None)
        self.arrays = tuple(f for f in fields if f.length is not None)
        scalar_names = {f.name for f in self.scalars}
        for f in self.arrays:
            if isinstance(f.length, str) and f.length not in scalar_names:
                raise ValueError(f"array parameter {f.name!r}: its length {f.length!r} names no scalar field")
        self.fields = self.scalars + self.arrays
        self._pack = self._packing_function()

    def __repr__(self):
        return "ParamBlock(" + ", ".join(f"{f.name}: {f.type}" + ("" if f.length is None else f"[{f.length}]")
                                          for f in self.fields) + ")"

    def wgsl(self):
        """The struct Params, the binding `params` and an accessor function per array."""
        members = [f"    {f.name}: {f.type}," for f in self.scalars] + ["    tail: array<u32>,"]
        lines = ["struct Params {", *members, "}",
                 "@group(0) @binding(0) var<storage, read> params: Params;"]
        start = []
        for f in self.arrays:
            at = " + ".join(start + ["i"])
            value = f"params.tail[{at}]" if f.type == "u32" else f"bitcast<{f.type}>(params.tail[{at}])"
            lines.append(f"fn params_{f.name}(i: u32) -> {f.type} {{ return {value}; }}")
            start.append(f"{f.length}u" if isinstance(f.length, int) else f"params.{f.length}")
        return "\n".join(lines)

    def pack(self, **values):
        """The words of one dispatch: every field by name (arrays as sequences)."""
        try:
            return self._pack(**values)
        except TypeError:
            names = {f.name for f in self.fields}
            if set(values) == names:
                raise
            missing = [f.name for f in self.fields if f.name not in values]
            raise TypeError(f"parameter block: missing {missing}, unknown {sorted(set(values) - names)}") from None

    def _packing_function(self):
        """pack's body, written out once per block: one pass that turns the named values into words in
        the layout's order (every dispatch packs its block, so this is on the hot path)."""
        def scalar(f):
            return {"u32": f.name, "i32": f"{f.name} & 0xFFFFFFFF", "f32": f"_f32_bits({f.name})"}[f.type]

        def items(f):
            return {"u32": f.name, "i32": f"[v & 0xFFFFFFFF for v in {f.name}]",
                    "f32": f"[_f32_bits(v) for v in {f.name}]"}[f.type]
        lines = [f"def pack(*, {', '.join(f.name for f in self.fields)}):",
                 f"    words = [{', '.join(scalar(f) for f in self.scalars)}]"]
        for f in self.arrays:
            lines += [f"    if len({f.name}) != {f.length}:",
                      f"        _wrong_length({f.name!r}, {f.name}, {f.length!r}, {f.length})",
                      f"    words += {items(f)}"]
        lines.append("    return words")
        namespace = {"_f32_bits": _f32_bits, "_wrong_length": _wrong_length}
        exec("\n".join(lines), namespace)   # the declaration's own names and types only
        return namespace["pack"]

    def packer(self, **leading):
        """pack() split in two for a hot path: the words of every field but the trailing arrays,
        worked out once, and a function of those arrays (u32 words, in declaration order) that
        gives the whole block."""
        trailing = [f for f in self.arrays if f.name not in leading]
        if tuple(self.arrays[len(self.arrays) - len(trailing):]) != tuple(trailing):
            raise ValueError("packer: the fields left to each call must be the last arrays")
        if any(f.type != "u32" or not isinstance(f.length, int) for f in trailing):
            raise ValueError("packer: the fields left to each call must be u32 arrays of fixed length")
        head = self.pack(**leading, **{f.name: [0] * f.length for f in trailing})
        head = head[:len(head) - sum(f.length for f in trailing)]

        def pack_with(*tails):
            words = list(head)
            for tail in tails:
                words += tail
            return words
        return pack_with

    def scalar_packer(self, **fixed):
        """pack() split the other way from packer(): for a block whose scalars change from call to call
        (an optimizer's learning rate and bias corrections, at each replay) while its arrays stay. The
        fixed fields' words are worked out once; the function returned takes the other scalars by name
        and gives the whole block."""
        free = [f for f in self.fields if f.name not in fixed]
        if any(f.length is not None for f in free):
            raise ValueError("scalar_packer: the fields left to each call must be scalars")
        head = self.pack(**fixed, **{f.name: 0 for f in free})
        floats = [f for f in free if f.type == "f32"]   # their bits in one pack and unpack
        lines = [f"def pack(*, {', '.join(f.name for f in free)}):", "    words = _head.copy()"]
        if floats:
            lines.append(f"    {', '.join(f'words[{self.scalars.index(f)}]' for f in floats)}, = "
                         f"_U32S.unpack(_F32S.pack({', '.join(f.name for f in floats)}))")
        lines += [f"    words[{self.scalars.index(f)}] = {f.name}" + (" & 0xFFFFFFFF" if f.type == "i32" else "")
                  for f in free if f.type != "f32"]
        lines.append("    return words")
        namespace = {"_head": head, "_F32S": struct.Struct(f"<{len(floats)}f"),
                     "_U32S": struct.Struct(f"<{len(floats)}I")}
        exec("\n".join(lines), namespace)   # the declaration's own names and types only
        return namespace["pack"]
