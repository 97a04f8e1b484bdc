"""The restricted pickle reader behind wg.load: the opcodes of pickle protocol 2 that PyTorch
checkpoints use (those webgrad.io.pickle_writer writes among them), read without the pickle
module's object machinery, so reading a file never imports or calls anything it names.

A GLOBAL is looked up in the caller's table of allowed names (anything else raises
pickle.UnpicklingError naming it) and REDUCE calls only Functions from that table. It reads from
bytes in memory, so a length in the stream never sizes an allocation past the data.
"""
import pickle
import struct
from collections import OrderedDict

MAX_TUPLE_DEPTH = 100


class Function:
    """A function the reader lets REDUCE call: a GLOBAL's meaning in the reader's table."""
    __slots__ = ("name", "call")

    def __init__(self, name, call):
        self.name, self.call = name, call


class Reader:
    """Reads one pickle from data (bytes). allowed: full name ('torch.Size') -> the object a GLOBAL
    of that name stands for; REDUCE calls only Functions from it, and a TypeError, ValueError or
    OverflowError from one becomes a ValueError naming it. persistent_load(pid) gives the object
    for a BINPERSID. where names the source in errors."""

    def __init__(self, data, where, allowed, persistent_load):
        self.data, self.where = memoryview(data), where
        self.allowed, self.persistent_load = allowed, persistent_load

    def fail(self, why, error=ValueError):
        raise error(f"{self.where}: {why} (pickle byte {self.pos})")

    def read(self, n):
        if self.pos + n > len(self.data):
            self.fail(f"the pickle ends inside an opcode that needs {n} more bytes")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def line(self):
        end = bytes(self.data[self.pos:self.pos + 256]).find(b"\n")   # module and names are short
        if end < 0:
            self.fail("a GLOBAL's name has no end of line")
        text = self.read(end + 1)[:-1]
        try:
            return bytes(text).decode("ascii")
        except UnicodeDecodeError:
            self.fail(f"a GLOBAL's name is not ASCII: {bytes(text)!r}")

    def load(self):
        self.pos, self.stack, self.marks, self.memo, self.depths = 0, [], [], {}, {}
        while True:
            at = self.pos
            op = self.read(1)[0]
            handler = _OPCODES.get(op)
            if handler is None:
                self.pos = at
                self.fail(f"pickle opcode {bytes([op])!r} is not one that PyTorch checkpoints use "
                          f"(webgrad reads protocol 2 as torch.save writes it)", pickle.UnpicklingError)
            try:
                if handler(self):
                    break
            except IndexError:   # a pop from an empty stack: the opcodes don't build what they use
                self.pos = at
                self.fail(f"opcode {bytes([op])!r} finds too few objects on the stack")
        if self.stack or self.marks:
            self.fail("the pickle leaves objects behind after STOP")
        if self.pos != len(self.data):
            self.fail(f"{len(self.data) - self.pos} bytes follow the pickle's STOP")
        return self.result

    # ---- opcode handlers; a true result means STOP ----
    def op_stop(self):
        self.result = self.stack.pop()
        return True

    def op_proto(self):
        if self.read(1)[0] > pickle.HIGHEST_PROTOCOL:
            self.fail("unknown pickle protocol")

    def pop_mark(self):
        if not self.marks:
            self.fail("an opcode that needs a MARK finds none")
        items, self.stack = self.stack, self.marks.pop()
        return items

    def op_mark(self):
        self.marks.append(self.stack)
        self.stack = []

    def push(self, value):
        self.stack.append(value)

    def op_global(self):
        module, name = self.line(), self.line()
        full = f"{'builtins' if module == '__builtin__' else module}.{name}"   # protocol 2's Python 2 names
        if full not in self.allowed:
            self.fail(f"global {full} is not allowed: webgrad reads tensors, containers and numbers, and "
                      f"never imports or runs what a file names", pickle.UnpicklingError)
        self.push(self.allowed[full])

    def op_reduce(self):
        args, func = self.stack.pop(), self.stack[-1]
        if type(func) is not Function:
            self.fail(f"REDUCE calls a {type(func).__name__}, not an allowed function", pickle.UnpicklingError)
        if type(args) is not tuple:
            self.fail(f"REDUCE's arguments are a {type(args).__name__}, not a tuple")
        try:
            self.stack[-1] = func.call(*args)
        except (TypeError, ValueError, OverflowError) as e:   # wrong arguments in the file
            self.fail(f"bad arguments to {func.name}: {e}")

    def op_build(self):
        state, target = self.stack.pop(), self.stack[-1]
        if type(target) is not OrderedDict or type(state) is not dict or not all(type(k) is str for k in state):
            self.fail(f"BUILD sets attributes of an OrderedDict only (from a dict of names), not of a "
                      f"{type(target).__name__} from a {type(state).__name__}", pickle.UnpicklingError)
        target.__dict__.update(state)

    def op_persid(self):
        pid = self.stack.pop()
        if type(pid) is not tuple:
            self.fail(f"a persistent id is a {type(pid).__name__}, not a tuple")
        self.push(self.persistent_load(pid))

    def op_append(self):
        item = self.stack.pop()
        self.list_target().append(item)

    def op_appends(self):
        items = self.pop_mark()
        self.list_target().extend(items)

    def list_target(self):
        if type(self.stack[-1]) is not list:
            self.fail(f"APPEND adds to lists only, not to a {type(self.stack[-1]).__name__}",
                      pickle.UnpicklingError)
        return self.stack[-1]

    def op_setitem(self):
        value, key = self.stack.pop(), self.stack.pop()
        self.set_items([key, value])

    def op_setitems(self):
        self.set_items(self.pop_mark())

    def set_items(self, items):
        target = self.stack[-1]
        if type(target) not in (dict, OrderedDict):
            self.fail(f"SETITEM sets dict items only, not a {type(target).__name__}'s", pickle.UnpicklingError)
        if len(items) % 2:
            self.fail("SETITEMS has a key without a value")
        for i in range(0, len(items), 2):
            try:
                target[items[i]] = items[i + 1]
            except TypeError:
                self.fail(f"a dict key is a {type(items[i]).__name__}, which is unhashable")

    def op_tuple(self):
        self.push_tuple(self.pop_mark())

    def op_tuple_n(self, n):
        items = self.stack[-n:] if n else []
        if len(items) < n:
            raise IndexError
        del self.stack[len(self.stack) - n:]
        self.push_tuple(items)

    def push_tuple(self, items):
        # Hashing or comparing tuples recurses in C without a depth check: a dict key of tuples
        # nested a million deep (a few bytes each in a pickle) would crash the interpreter.
        depth = 1 + max((self.depths[id(x)][0] for x in items if type(x) is tuple), default=0)
        if depth > MAX_TUPLE_DEPTH:
            self.fail(f"tuples nest more than {MAX_TUPLE_DEPTH} deep")
        t = tuple(items)
        self.depths[id(t)] = (depth, t)   # holding t keeps its id its own
        self.push(t)

    def op_binint(self):
        self.push(struct.unpack("<i", self.read(4))[0])

    def op_binint1(self):
        self.push(self.read(1)[0])

    def op_binint2(self):
        self.push(struct.unpack("<H", self.read(2))[0])

    def op_long1(self):
        self.push(int.from_bytes(self.read(self.read(1)[0]), "little", signed=True))

    def op_binfloat(self):
        self.push(struct.unpack(">d", self.read(8))[0])

    def op_binunicode(self):
        raw = self.read(struct.unpack("<I", self.read(4))[0])
        try:
            self.push(str(raw, "utf-8", "surrogatepass"))
        except UnicodeDecodeError:
            self.fail("a string is not UTF-8")

    def op_put(self, size):
        index = self.read(1)[0] if size == 1 else struct.unpack("<I", self.read(4))[0]
        if not self.stack:
            self.fail("a memo PUT finds an empty stack")
        self.memo[index] = self.stack[-1]

    def op_get(self, size):
        index = self.read(1)[0] if size == 1 else struct.unpack("<I", self.read(4))[0]
        if index not in self.memo:
            self.fail(f"memo entry {index} is read before it is written")
        self.push(self.memo[index])


_OPCODES = {
    ord("."): Reader.op_stop, 0x80: Reader.op_proto, ord("("): Reader.op_mark, ord("c"): Reader.op_global,
    ord("R"): Reader.op_reduce, ord("b"): Reader.op_build, ord("Q"): Reader.op_persid,
    ord("a"): Reader.op_append, ord("e"): Reader.op_appends, ord("s"): Reader.op_setitem,
    ord("u"): Reader.op_setitems, ord("t"): Reader.op_tuple,
    ord(")"): lambda r: r.op_tuple_n(0), 0x85: lambda r: r.op_tuple_n(1), 0x86: lambda r: r.op_tuple_n(2),
    0x87: lambda r: r.op_tuple_n(3),
    ord("N"): lambda r: r.push(None), 0x88: lambda r: r.push(True), 0x89: lambda r: r.push(False),
    ord("]"): lambda r: r.push([]), ord("}"): lambda r: r.push({}),
    ord("J"): Reader.op_binint, ord("K"): Reader.op_binint1, ord("M"): Reader.op_binint2,
    0x8A: Reader.op_long1, ord("G"): Reader.op_binfloat, ord("X"): Reader.op_binunicode,
    ord("q"): lambda r: r.op_put(1), ord("r"): lambda r: r.op_put(4),
    ord("h"): lambda r: r.op_get(1), ord("j"): lambda r: r.op_get(4),
}
