"""Fusion of a wg.jit recording's elementwise chains: maps that feed one another become one generated
kernel (DESIGN.md, "fusion under wg.jit").

A recording is a list of dispatches; the map kernels among them (kernels/map.py) say what they
compute (their MapSpec, offsets and scalar words). The pass walks the dispatches in order and grows
groups of maps: a map joins the group that last wrote a buffer it reads when

- both have as many elements (one thread per element runs every member, so a value a member wrote
  is the one the next member reads from the same thread: each buffer a group writes is read and
  written at one place by all its members, the same offset and layout);
- the kernel stays within the buffers a stage may bind and within one parameter block;
- the group may move past the dispatches recorded since its last member: none of them writes a
  buffer the group reads or writes, or reads a buffer the group writes.

The fused kernel runs at the group's last member's place. A member reads its operands from memory,
or from the register that holds what an earlier member wrote there; a buffer the group writes is
stored once, after its last write, unless it is an orphan (nothing outside the recording holds it:
no tensor, output, optimizer state or saved tensor), accessed by the group alone, and written
before it is read: then its value never leaves the kernel. Each member keeps its own expression
with its operands converted as map converts them, so the results are the unfused ones, bit for bit.
The generated source depends only on the structure (ops, shapes, strides, wiring): offsets and
scalars are parameters, and the pipeline is cached by the source.

Epilogues: a producer (kernels/epilogue.py: a kernel whose threads own its result's elements, one
thread an element; _PRODUCERS names the families that read their dispatches as one: an unsplit
matmul or convolution product written densely, a layer or RMS norm's y or dx, a max pool either way,
a pass of a float32 sum) starts a group as a
map does, as its first member: maps join it as above (as many elements as its result, which they
read at offset + i, contiguous, as it writes it), except those writing a buffer it binds, reading
one it writes besides its result, and maps recorded before it that touch its result's buffer (they
saw earlier contents). The group is the producer's kernel with the maps in its store (a
StoreEpilogue): each element goes through the members in the thread that computed it, and the
producer's own result is stored only where something else reads it. A split K's product is left
alone: its pieces are summed by a reduction after it, whose store takes the maps.
"""
import math
import re
import struct
import weakref
from typing import Any, NamedTuple

from ... import dtypes
from .fusion_loss import fold_loss_backward
from .kernels.common import fill
from .kernels.epilogue import StoreEpilogue, has_epilogue, map_functions, with_epilogue
from .kernels.map import load, operand, scalar_operand
from .kernels.matmul import product_producer
from .kernels.norm import norm_producer
from .kernels.params import ParamBlock, u32
from .kernels.pool import pool_producer
from .kernels.reduce import reduce_producer
from .runtime import PARAMS_BYTES, PARAMS_WORDS

# map's alias of the compute type: a fused kernel's members may compute in different types (a
# comparison's bool feeding a float where), so each member's lines spell out its own
_T = re.compile(r"\bT\b")
_F32 = dtypes.float32
# The kernel families whose recorded dispatches may take epilogues: (pipeline key, parameter bytes)
# -> kernels/epilogue.py's Producer, or None where that dispatch cannot.
_PRODUCERS = {"matmul": product_producer, "norm": norm_producer, "pool": pool_producer, "reduce": reduce_producer}


class _Access(NamedTuple):
    """One operand or output of a map: where its elements lie (strides None: at offset + i)."""
    handle: int
    dtype: Any
    offset: int
    shape: tuple
    strides: Any

    @property
    def place(self):
        return (self.offset,) if self.strides is None else (self.offset, self.shape, self.strides)


class _Map(NamedTuple):
    """A recorded map dispatch: its index, MapSpec, output, and per operand an _Access or a scalar word."""
    index: int
    spec: Any
    out: _Access
    operands: tuple

    def accesses(self):
        return [a for a in self.operands if isinstance(a, _Access)] + [self.out]


class _Producer(NamedTuple):
    """A recorded producer: its index, kernels/epilogue.py's Producer, its buffers' handles and binding
    modes (its result first) and its result as the maps read it."""
    index: int
    kernel: Any
    handles: tuple
    modes: tuple
    out: _Access


class _Node:
    """A dispatch of the fused recording: a recorded one (index), or a group of maps (members) that
    may follow a producer (its epilogue); what it reads and writes decides whether a group may move
    past it."""

    def __init__(self, index, reads, writes, members=(), producer=None):
        self.index, self.reads, self.writes, self.members = index, set(reads), set(writes), list(members)
        self.producer = producer

    def blocks(self, group):
        return bool(self.writes & (group.reads | group.writes) or self.reads & group.writes)


def orphans(runtime, recording):
    """{handle: Storage} of the recording's buffers that nothing but the recording holds. Found by
    letting go of them all: release() hands those that die back (runtime.adopted)."""
    alive = [weakref.ref(s) for s in recording.storages]
    runtime.adopted = dict.fromkeys(s.handle for s in recording.storages)
    try:
        recording.storages = set()
    finally:
        adopted = {handle: s for handle, s in runtime.adopted.items() if s is not None}
        runtime.adopted = None
    recording.storages = {s for s in (ref() for ref in alive) if s is not None} | set(adopted.values())
    return adopted


def fuse(runtime, recording):
    """Rewrite the recording with its elementwise chains fused, and each cross-entropy's backward of an
    implicit 1 in its forward (fusion_loss.py); returns how many dispatches it saved."""
    maps = {index: _as_map(index, recording.dispatches[index][1], *described)
            for index, described in recording.elementwise.items() if _fusable(described[0])}
    recording.elementwise = {}
    if not maps:
        return fold_loss_backward(runtime, recording)
    fusion = _Fusion(runtime, recording)
    nodes = fusion.group(maps)
    dispatches, params, refresh = [], bytearray(), []
    refreshed = dict(recording.refresh)
    for node in nodes:
        if len(node.members) == 1 and node.producer is None:
            node.index = node.members[0].index
        if node.producer is not None and not node.members:
            node.index = node.producer.index
        if node.index is not None:
            if node.index in refreshed:
                refresh.append((len(dispatches), refreshed[node.index]))
            dispatches.append(recording.dispatches[node.index])
            params += recording.params[node.index * PARAMS_BYTES:(node.index + 1) * PARAMS_BYTES]
            continue
        internal = fusion.internal(node)
        plan = _Plan(node.members, node.writes - internal, node.producer)
        if node.producer is None:
            pipeline, handles, words = _fused_kernel(runtime, plan)
            grid = recording.dispatches[node.members[-1].index][2]
        else:
            pipeline, handles, words = _epilogue_kernel(runtime, plan, node.producer.out.handle not in internal)
            grid = recording.dispatches[node.producer.index][2]
        dispatches.append((pipeline, handles, grid))
        params += struct.pack(f"<{len(words)}I", *words).ljust(PARAMS_BYTES, b"\0")
        recording.storages -= {fusion.dead[h] for h in internal}   # no kernel touches them now: back to the pool
    saved = len(recording.dispatches) - len(dispatches)
    recording.dispatches, recording.params, recording.refresh = dispatches, params, refresh
    return saved + fold_loss_backward(runtime, recording)


def _fusable(spec):
    """float16 maps stay apart: fused members pass values on unrounded, where their own kernels round to
    f16; so do maps into uint8, whose threads write a word of bytes each (kernels/map.py), not an element."""
    return dtypes.float16 not in (spec.compute, spec.out_dtype, *spec.kinds) and spec.out_dtype is not dtypes.uint8


def _as_map(index, handles, spec, offsets, scalars):
    tensors = iter(zip(handles[1:], offsets[1:], spec.layouts[1:]))
    words = iter(scalars)

    def operand_access(kind):
        if kind is None:
            return next(words)
        handle, offset, strides = next(tensors)
        return _Access(handle, kind, offset, spec.shape, strides)
    out = _Access(handles[0], spec.out_dtype, offsets[0], spec.shape, spec.layouts[0])
    return _Map(index, spec, out, tuple(operand_access(kind) for kind in spec.kinds))


class _Fusion:
    """One recording's pass: who binds each buffer, and which buffers nothing outside it holds."""

    def __init__(self, runtime, recording):
        self.runtime, self.recording = runtime, recording
        self.dead = orphans(runtime, recording)
        self.uploaded = {storage.handle for storage, _ in recording.writes}
        self.users = {}   # handle -> the indices of the dispatches that bind it
        for index, (_, handles, _) in enumerate(recording.dispatches):
            for handle in handles:
                self.users.setdefault(handle, set()).add(index)

    def internal(self, group):
        """The buffers whose values may stay inside the group's kernel (see the module's doc)."""
        indices = {m.index for m in group.members} | ({group.producer.index} if group.producer else set())
        result = group.producer.out.handle if group.producer else None
        return {h for h in group.writes if h in self.dead and h not in self.uploaded and self.users[h] <= indices
                and (h == result or _written_first(group.members, h))}

    def group(self, maps):
        """The recording's dispatches as nodes, in the order they will run, maps grouped."""
        layout_of = self.runtime._layout_of
        keys = {pipeline: key for key, pipeline in self.runtime._pipelines.items()
                if key[0] in _PRODUCERS and not has_epilogue(key)}
        nodes = []
        for index, (pipeline, handles, _) in enumerate(self.recording.dispatches):
            m = maps.get(index)
            if m is None:
                modes = layout_of[pipeline]
                writes = [h for h, mode in zip(handles, modes) if mode != "read"]
                nodes.append(_Node(index, [h for h in handles if h not in writes], writes,
                                   producer=self.producer(index, keys.get(pipeline), handles, modes)))
                continue
            group = _Node(None, [a.handle for a in m.accesses()[:-1]], [m.out.handle], [m])
            writers = []   # the groups (and producers) that wrote its operands
            for a in m.operands:
                if isinstance(a, _Access):
                    writer = next((n for n in reversed(nodes) if a.handle in n.writes), None)
                    if writer is not None and (writer.members or writer.producer) and writer not in writers:
                        writers.append(writer)
            for writer in sorted(writers, key=nodes.index, reverse=True):
                if writer.producer and group.producer:
                    continue
                at = nodes.index(writer)
                joined = _Node(None, writer.reads | group.reads, writer.writes | group.writes,
                               writer.members + group.members, writer.producer or group.producer)
                if self.joinable(joined) and not any(n.blocks(writer) for n in nodes[at + 1:]):
                    del nodes[at]
                    group = joined
            nodes.append(group)
        return nodes

    def producer(self, index, key, handles, modes):
        """The _Producer of a recorded dispatch, if it is one that may take an epilogue (None otherwise)."""
        if key is None:
            return None
        kernel = _PRODUCERS[key[0]](key, self.recording.params[index * PARAMS_BYTES:(index + 1) * PARAMS_BYTES])
        if kernel is None:
            return None
        return _Producer(index, kernel, handles, modes, _Access(handles[0], _F32, 0, (kernel.numel,), None))

    def joinable(self, group):
        """Whether the group's maps may run as one kernel, one thread per element (in the store of its
        producer, if it has one)."""
        members, producer = group.members, group.producer
        numel = producer.kernel.numel if producer else math.prod(members[0].spec.shape)
        if any(math.prod(m.spec.shape) != numel for m in members):
            return False
        if producer and any(m.out.handle in producer.handles for m in members):
            return False   # a buffer the producer reads (other threads may still read it), or its own result
        others = {h for h, mode in zip(producer.handles[1:], producer.modes[1:]) if mode != "read"} if producer else ()
        if any(a.handle in others for m in members for a in m.accesses()):
            return False   # a buffer it writes besides its result (another thread's element, maybe not yet)
        if producer and any(a.handle == producer.out.handle for m in members if m.index < producer.index
                            for a in m.accesses()):
            return False   # a map recorded before the producer touched that buffer's earlier contents
        seen = {producer.out.handle: (_F32, producer.out.place)} if producer else {}
        for a in (a for m in members for a in m.accesses()):
            key = (a.dtype, a.place) if a.handle in group.writes else a.dtype.wgsl
            if seen.setdefault(a.handle, key) != key:
                return False
        plan = _Plan(members, group.writes - self.internal(group), producer)
        own_buffers = len(producer.handles) if producer else 0
        own_words = len(producer.kernel.words) + 1 if producer else 2   # and the opaque zero (a map's: numel too)
        return (own_buffers + len(plan.bound) < self.runtime.limits["max_storage_buffers_per_shader_stage"]
                and own_words + plan.offsets + plan.scalars <= PARAMS_WORDS)   # (and the params)


def _written_first(members, handle):
    """Whether the first member that touches the buffer writes it without reading it first."""
    for m in members:
        if any(isinstance(a, _Access) and a.handle == handle for a in m.operands):
            return False
        if m.out.handle == handle:
            return True
    return False


class _Plan:
    """Where a fused kernel's members take their operands from, in order: a scalar word, the value
    member k computed (("value", k)) or the producer did (("value", "producer")), or a load; which
    members store their output (the last write of each buffer in `stored`); and the buffers it binds
    (beside a producer's own), in binding order."""

    def __init__(self, members, stored, producer=None):
        self.members, self.producer, self.sources, self.stores, self.bound = members, producer, [], [], []
        last_write = {m.out.handle: k for k, m in enumerate(members)}
        written = {producer.out.handle: "producer"} if producer else {}
        for k, m in enumerate(members):
            sources = []
            for a in m.operands:
                if not isinstance(a, _Access):
                    sources.append(("scalar", a))
                elif a.handle in written:
                    sources.append(("value", written[a.handle]))
                else:
                    sources.append(("load", a))
                    self._bind(a.handle)
            written[m.out.handle] = k
            self.stores.append(m.out.handle in stored and last_write[m.out.handle] == k)
            if self.stores[-1]:
                self._bind(m.out.handle)
            self.sources.append(sources)
        kinds = [kind for sources in self.sources for kind, _ in sources]
        self.scalars = kinds.count("scalar")
        self.offsets = kinds.count("load") + sum(self.stores)

    def _bind(self, handle):
        if handle not in self.bound:
            self.bound.append(handle)


def _fused_kernel(runtime, plan):
    """(pipeline, bound buffer handles, parameter words) of the kernel that runs a _Plan."""
    lines, modes, types, offsets, scalars = _members(plan, "params.zero")
    params = ParamBlock(u32("numel"), u32("zero"), u32("offsets", len(offsets)), u32("scalars", len(scalars)))
    bindings = "\n".join(f"@group(0) @binding({slot + 1}) var<storage, {mode}> buf{slot}: array<{kind}>;"
                         for slot, (mode, kind) in enumerate(zip(modes, types)))
    source = fill("map", params, compute=plan.members[0].spec.compute.wgsl, bindings=bindings,
                  body="\n".join(lines))
    name = "+".join(m.spec.op.name for m in plan.members)
    pipeline = runtime.pipeline(("map", name, source), lambda: source, "main", tuple(modes))
    numel = math.prod(plan.members[0].spec.shape)
    return pipeline, tuple(plan.bound), params.pack(numel=numel, zero=0, offsets=offsets, scalars=scalars)


def _epilogue_kernel(runtime, plan, stores_result):
    """(pipeline, bound buffer handles, parameter words) of a producer whose store runs a _Plan."""
    lines, modes, types, offsets, scalars = _members(plan, "params_zero(0u)")
    store = ["    out[i] = value;"] if stores_result else []
    function = "\n".join([map_functions(), "fn store_epilogue(i: u32, value: f32) {", *store, *lines, "}"])
    epilogue = StoreEpilogue(function, tuple(zip(modes, types)), len(offsets), len(scalars), stores_result)
    producer = plan.producer
    return with_epilogue(runtime, producer.kernel, producer.handles, producer.modes, epilogue, plan.bound,
                         [0, *offsets, *scalars])


def _members(plan, zero):
    """The WGSL lines that run a _Plan's members on element i (the coordinates of its strided
    accesses, each member's value and the stores), the bound buffers' modes and element types, and
    the offsets and scalar words those lines read (zero: WGSL of the opaque zero)."""
    modes = ["read"] * len(plan.bound)
    types = [None] * len(plan.bound)
    offsets, scalars, coordinates, body = [], [], {}, []

    def buffer(a, mode):
        slot = plan.bound.index(a.handle)
        types[slot] = a.dtype.wgsl
        if mode != "read":
            modes[slot] = mode
        return f"buf{slot}"

    def position(a):
        offsets.append(a.offset)
        at = f"params_offsets({len(offsets) - 1}u)"
        if a.strides is None:
            return f"{at} + i"
        c = coordinates.setdefault(a.shape, f"s{len(coordinates)}")
        terms = [f"{c}_{d} * {stride & 0xFFFFFFFF}u" for d, (size, stride) in enumerate(zip(a.shape, a.strides))
                 if size != 1 and stride != 0]
        return " + ".join([at] + terms)

    for k, (m, sources, store) in enumerate(zip(plan.members, plan.sources, plan.stores)):
        lines = []
        for n, (x, (kind, source)) in enumerate(zip("abc", sources)):
            if kind == "scalar":
                scalars.append(source)
                lines.append(f"let {x} = {scalar_operand(len(scalars) - 1, m.spec.compute)};")
            elif kind == "value" and source == "producer":
                lines.append(f"let {x} = {operand(m.spec.op, n, _opaque('value', _F32, zero))};")
            elif kind == "value":
                value = _opaque(f"v{source}", plan.members[source].spec.out_dtype, zero)
                lines.append(f"let {x} = {operand(m.spec.op, n, value)};")
            else:
                lines.append(f"let at_{x} = {position(source)};")
                value = load(source.dtype, buffer(source, "read"), f"at_{x}")
                lines.append(f"let {x} = {operand(m.spec.op, n, value)};")
        lines.append(f"v{k} = {m.spec.op.wgsl};")
        body += [f"    var v{k}: {m.spec.out_dtype.wgsl};", "    {",
                 *(f"        {_T.sub(m.spec.compute.wgsl, line)}" for line in lines), "    }"]
        if store:
            body.append(f"    {buffer(m.out, 'read_write')}[{position(m.out)}] = v{k};")
    head = []
    for shape, c in coordinates.items():
        head.append(f"    var {c}_rest = i;")
        for d in range(len(shape) - 1, 0, -1):
            head.append(f"    let {c}_{d} = {c}_rest % {shape[d]}u;")
            head.append(f"    {c}_rest /= {shape[d]}u;")
        head.append(f"    let {c}_0 = {c}_rest;")
    return head + body, modes, types, offsets, scalars


def _opaque(value, dtype, zero):
    """WGSL: a float a member computed, as the next member reads it: its bits plus a parameter that is
    0 at run time but unknown to the compiler, which then cannot fuse the two members' operations
    (a multiply and the next add into one FMA, as NVIDIA's does) where separate kernels round twice.
    An add, not a XOR: a value passed on through an identity would be XORed twice and fold back."""
    if dtype.wgsl != "f32":
        return value
    return f"bitcast<f32>(bitcast<u32>({value}) + {zero})"
