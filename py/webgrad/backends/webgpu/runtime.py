"""The WebGPU runtime shared by both drivers (native wgpu-py and the browser bridge): the policy, once.

It owns what makes GPU work cheap: compiled pipelines cached by kernel key, a buffer pool by
size class, bind groups cached by what they bind, and a queue of dispatches that is encoded into
one compute pass and one submit when a value is read or the queue is long. Each dispatch's
parameters are one PARAMS_BYTES block in a shared "params arena" buffer, uploaded with the batch;
every kernel binds it at @binding(0) with a dynamic offset, and its storage buffers at
@binding(1), @binding(2), ...

A driver (native.py, browser.py over web/bridge.js) only translates these calls to its WebGPU and
decides nothing; GPU objects stay on its side, named by the integer handles and ids below:
    info, limits (REPORTED_LIMITS, by these names), is_software
    create_buffer(size) -> handle                      size: a multiple of 4
    write_buffer(handle, offset, data)                 offset and len(data): multiples of 4
    read_buffers(regions) -> bytes                     regions: (handle, offset, size) each, word-aligned;
        their bytes back to back, from one copy into one staging buffer and one map (a read of a
        value fetches the index error words with it: index_errors.py)
    destroy_buffer(handle, bind_groups)                the bind groups (ids) that bind it go too
    create_pipeline(label, wgsl, entry, bindings) -> handle   bindings: "read" | "read_write" each;
        label: "family:entry". The browser's returns before the compile ends (the kernels a step
        asks for compile side by side): its submit waits for those it runs, and raises there,
        naming the kernel, when one failed to compile; the native one compiles at once
    create_arena(size)                                 the params arena, replacing the last one
    forget_bind_groups()                               drop every bind group
    features                                           the OPTIONAL_FEATURES the device was granted
    submit(params, new_bind_groups, dispatches, timed=False)   first make the new bind groups, each
        (id, pipeline handle whose layout it has, buffer handles); then upload params at the
        arena's start and run the dispatches, each (pipeline, bind group id, params offset,
        (x, y, z)), in one compute pass and one submit. timed (only with "timestamp-query"):
        each in a pass of its own, waited for; returns each one's GPU nanoseconds
    sync()                                             wait for the submitted work
"""
import functools
import heapq
import struct
from collections import defaultdict

from .bind_groups import BindGroups
from .index_errors import RECORD, IndexErrors
from .recording import Recording
from .words import word_aligned, word_window

PARAMS_BYTES = 256   # one dispatch's parameter block (256 is also the largest legal offset alignment)
PARAMS_WORDS = PARAMS_BYTES // 4
TOO_MANY_WORDS = f"webgpu: kernel parameters exceed {PARAMS_WORDS} words (too many dimensions?)"
PAST_32_BITS = ("webgpu: a kernel parameter does not fit 32 bits (a tensor or view of more than 4,294,967,295 "
                "elements?): WebGPU kernels count and index in 32 bits; split the work into smaller tensors or "
                "use the cpu device")
ARENA_MIN_BYTES = 64 << 10   # 256 dispatches' parameters: eager work (MAX_QUEUED) never grows it
# Raised from the WebGPU defaults to what the adapter offers; nothing else is requested.
RAISED_LIMITS = ("max_storage_buffer_binding_size", "max_buffer_size", "max_storage_buffers_per_shader_stage",
                 "max_compute_workgroup_storage_size", "max_compute_invocations_per_workgroup",
                 "max_compute_workgroup_size_x", "max_compute_workgroup_size_y")
# Optional WebGPU features asked for where the adapter has them (driver.features: those granted).
# timestamp-query: the profiler's GPU times (webgrad.profiler); shader-f16: float16 tensors (WGSL's
# f16, kernels/common.py). Both drivers ask for both.
OPTIONAL_FEATURES = ("timestamp-query", "shader-f16")
# What the runtime and the kernels read of the device's limits: the raised ones and two defaults.
REPORTED_LIMITS = RAISED_LIMITS + ("max_compute_workgroups_per_dimension", "min_storage_buffer_offset_alignment")
# A queue this long is submitted without waiting for a read, so the GPU works while Python queues
# more (a training loop that reads its loss every 10 steps left the GPU idle while it queued 10
# steps: on an H100 the replayed CNN step ran 2.1x PyTorch's speed with 1024, 3.0x with 32 or 128).
MAX_QUEUED = 32
# The pool keeps freed buffers up to the most bytes ever live (a training loop's working set, as
# PyTorch's caching allocator keeps it), and at least this many: capped lower, a step whose
# activations pass it destroyed them and created them again every step (the GPT's 100 MB ones).
POOL_LIMIT = 256 << 20
# Freed buffers return to the pool at a submit (queued work may still read them); an allocation
# finding none of its size submits early once this much waits, so large ops reuse their buffers.
RELEASED_SUBMIT_BYTES = 64 << 20
_F32 = struct.Struct("<f")
_U32 = struct.Struct("<I")
# _BLOCKS[n] packs n parameter words into a whole block, zero-padded
_BLOCKS = [struct.Struct(f"<{n}I{PARAMS_BYTES - 4 * n}x") for n in range(PARAMS_WORDS + 1)]


class DeviceLost(RuntimeError):
    """The GPU device is gone (a driver reset, the browser reclaiming it, device.destroy()); so are
    its buffers, and with them every webgpu tensor."""

    def __init__(self, reason):
        super().__init__(f"webgpu: the GPU device was lost: {reason}; its tensors are gone with it: "
                         f"restart the program (in the playground: reload the page) to recreate the device")


def f32_bits(value):
    return _U32.unpack(_F32.pack(value))[0]


def arena_size(nbytes):
    """The params arena that holds nbytes: a power of two, so that it grows rarely (a new arena
    costs every bind group, as they all bind it)."""
    return max(ARENA_MIN_BYTES, 1 << (nbytes - 1).bit_length())


@functools.lru_cache(maxsize=4096)
def size_class(nbytes):
    """Round up to 256 bytes, then to a quarter of the next power of two, so buffers are reused."""
    nbytes = max(256, (nbytes + 255) & ~255)
    quarter = max(256, 1 << (nbytes.bit_length() - 3))
    return (nbytes + quarter - 1) // quarter * quarter


def _kernel_name(key, entry):
    """A pipeline's name in the profiler's table: its family, what it computes where the key's next
    part names it (map's op, reduce's), and its entry point unless that is main."""
    parts = [key[0]]
    if len(key) > 1 and isinstance(key[1], str) and key[1] != entry:
        parts.append(key[1])
    if entry != "main":
        parts.append(entry)
    return ".".join(parts)


class Storage:
    """A pooled GPU buffer; it goes back to the pool when the last tensor using it dies."""
    __slots__ = ("handle", "nbytes", "runtime", "__weakref__")

    def __init__(self, handle, nbytes, runtime):
        self.handle, self.nbytes, self.runtime = handle, nbytes, runtime

    def __del__(self):
        try:
            self.runtime.release(self)
        except Exception:  # interpreter shutdown: the runtime may already be gone
            pass


class Runtime:
    def __init__(self, driver):
        self.driver = driver
        self.limits = driver.limits
        self.features = frozenset(getattr(driver, "features", ()))
        self._pipelines = {}
        # size class -> buffer handles ready for reuse, a heap: the lowest goes first, so a loop that
        # frees and asks for the same sizes each step gets the same buffers each step, and its
        # dispatches find their bind groups made (handed out last-freed-first, the buffers rotated
        # and an eager GPT step made ~160 new groups)
        self._free = defaultdict(list)
        self._asked = {}                   # size class -> when it was last allocated (the count of allocs then)
        self._allocs = 0
        self._released = []                # freed since the last submit: queued work may still use them
        self._released_bytes = 0
        self._queue = []                   # (pipeline, bind group id, params offset, grid)
        self._params = bytearray()
        self._recording = None
        self._gpu_idle = True              # nothing submitted since a read waited for all the work
        self.adopted = None                # {handle: None} while fusion.orphans() looks for a recording's orphans
        self._layout_of = {}               # pipeline -> its bindings: kernels of one layout share bind groups
        self.kernel_names = {}             # pipeline -> (kernel's name, its family): the profiler's rows
        self.profiler = None               # a webgrad.profiler.profile while one is open: it submits
        self.bind_groups = BindGroups()
        self._arena_bytes = ARENA_MIN_BYTES
        driver.create_arena(ARENA_MIN_BYTES)
        self.live_buffers = self.live_bytes = self.pool_bytes = self.peak_bytes = 0
        # A tensor's buffer is bound whole by the kernels that read it, so it may be no larger.
        self.max_tensor_bytes = min(self.limits["max_storage_buffer_binding_size"], self.limits["max_buffer_size"])
        self._max_groups = self.limits["max_compute_workgroups_per_dimension"]
        # Freed buffers kept for reuse, at most this many bytes (None: POOL_LIMIT's rule); the rest are destroyed.
        self.pool_limit = None
        self.index_errors = IndexErrors(self.alloc(RECORD.size), driver)   # kernels that check indices bind it

    # ---- buffers ----
    def check_fits(self, nbytes, what=None):
        """Raises if a buffer of nbytes is larger than a kernel can bind; what() names the tensor."""
        limit = self.max_tensor_bytes
        if nbytes > limit:
            tensor = what() if what else f"a tensor of {nbytes} bytes"
            raise RuntimeError(
                f"webgpu: {tensor} needs {nbytes} bytes ({nbytes / 2**20:.1f} MiB), more than the "
                f"{limit} bytes ({limit / 2**20:.1f} MiB) this adapter lets a kernel bind "
                f"(maxStorageBufferBindingSize {self.limits['max_storage_buffer_binding_size']}, "
                f"maxBufferSize {self.limits['max_buffer_size']}); split it into smaller tensors or "
                f"use the cpu device")

    def alloc(self, nbytes, what=None):
        """A buffer of at least nbytes. Larger than a kernel can bind raises here (check_fits), before
        any GPU call; what() names the tensor in that error."""
        self.check_fits(nbytes, what)
        limit = self.max_tensor_bytes
        size = size_class(nbytes)
        if size > limit:
            size = (nbytes + 255) & ~255
        self._allocs += 1
        self._asked[size] = self._allocs
        free = self._free[size]
        if not free and self._released_bytes >= RELEASED_SUBMIT_BYTES:
            self.flush()
        if free:
            handle = heapq.heappop(free)
            self.pool_bytes -= size
        else:
            handle = self.driver.create_buffer(size)
        self.live_buffers += 1
        self.live_bytes += size
        if self.live_bytes > self.peak_bytes:
            self.peak_bytes = self.live_bytes
        if self._recording is not None:   # fresh: nothing the recording reads (Recording.made)
            self._recording.made.add(handle)
        return Storage(handle, size, self)

    def release(self, storage):
        if self.adopted is not None and storage.handle in self.adopted:   # fusion.orphans(): the recording keeps it
            self.adopted[storage.handle] = Storage(storage.handle, storage.nbytes, self)
            return
        self.live_buffers -= 1
        self.live_bytes -= storage.nbytes
        self._released.append((storage.nbytes, storage.handle))
        self._released_bytes += storage.nbytes

    def write(self, storage, data):
        if self._recording is not None:
            self._recording.writes.append((storage, bytes(data)))
            self._recording.storages.add(storage)
        self._upload(storage.handle, data)

    def _upload(self, handle, data):
        """Write data at the buffer's start, widened to whole words (all WebGPU writes)."""
        start, data = word_aligned(0, data, lambda at: self.driver.read_buffers([(handle, at, 4)]))
        if data:
            self.driver.write_buffer(handle, start, data)

    def read(self, storage, offset, nbytes):
        if self._recording is not None:
            raise RuntimeError("webgrad.jit: a jitted function cannot read tensor values (.item(), .tolist(), "
                               ".numpy(), printing) while it is recorded: the replays would not read them; "
                               "return the tensor and read it after the call")
        self.flush()
        if nbytes == 0:
            return b""
        start, size = word_window(offset, nbytes)
        data = self.driver.read_buffers([(storage.handle, start, size), self.index_errors.region])
        self._gpu_idle = True
        self.index_errors.raise_recorded(data[size:])
        return data[offset - start: offset - start + nbytes]

    def empty_pool(self):
        self.flush()
        for handles in self._free.values():
            for handle in handles:
                self._destroy(handle)
        self._free.clear()
        self.pool_bytes = 0

    def _destroy(self, handle):
        self.driver.destroy_buffer(handle, self.bind_groups.forget_buffer(handle))

    # ---- kernels ----
    def pipeline(self, key, make_source, entry="main", bindings=("read_write", "read")):
        handle = self._pipelines.get(key)
        if handle is None:
            label = f"{key[0]}:{entry}"
            try:
                handle = self.driver.create_pipeline(label, make_source(), entry, bindings)
            except DeviceLost:
                raise
            except RuntimeError as e:   # the compiler's diagnostic, with which kernel it was
                raise RuntimeError(f"webgpu: kernel {key} (shaders/{key[0]}.wgsl, entry point '{entry}') "
                                   f"failed to compile:\n{e}") from None
            self._pipelines[key] = handle
            self.kernel_names[handle] = (_kernel_name(key, entry), key[0])
            self._layout_of[handle] = tuple(bindings)
        return handle

    def dispatch(self, pipeline, storages, words, groups, refresh=None, elementwise=None):
        """Queue one dispatch of `groups` workgroups (a count, or an (x, y, z) grid); words: its parameter
        words, or its whole block as bytes. refresh, when given, recomputes the words for each replay (host
        state: an optimizer's step count, the random generator's position). elementwise: a map's, for fusion.py."""
        if type(words) is not bytes:   # (map's kernels pack their blocks whole: kernels/map.py)
            if len(words) > PARAMS_WORDS:
                raise RuntimeError(TOO_MANY_WORDS)
            try:
                words = _BLOCKS[len(words)].pack(*words)
            except struct.error:
                raise RuntimeError(PAST_32_BITS) from None
        offset = len(self._params)
        if offset + PARAMS_BYTES > self._arena_bytes:
            self._grow_arena(PARAMS_BYTES)
            offset = len(self._params)   # 0: the queue went with the old arena
        self._params += words
        handles = tuple([s.handle for s in storages])
        grid = (groups, 1, 1) if type(groups) is int and groups <= self._max_groups else self._grid(groups)
        key, bind_groups = (self._layout_of[pipeline], handles), self.bind_groups
        self._queue.append((pipeline, bind_groups.ids.get(key) or bind_groups.add(key, pipeline), offset, grid))
        if self._recording is not None:
            recording = self._recording
            if refresh is not None:
                recording.refresh.append((len(recording.dispatches), refresh))
            if elementwise is not None:
                recording.elementwise[len(recording.dispatches)] = elementwise
            recording.dispatches.append((pipeline, handles, grid))
            recording.params += self._params[offset:]
            recording.storages.update(storages)
        if len(self._queue) >= MAX_QUEUED:
            self.flush()

    def _grid(self, groups):
        per_dim = self._max_groups
        if isinstance(groups, tuple):
            if max(groups) > per_dim:
                raise RuntimeError(f"webgpu: grid {groups} exceeds {per_dim} workgroups per dimension")
            return groups
        if groups <= per_dim:
            return (groups, 1, 1)
        rows = -(-groups // per_dim)
        if rows > per_dim:
            raise RuntimeError(f"webgpu: {groups} workgroups exceed what one dispatch can address")
        return (per_dim, rows, 1)

    def _grow_arena(self, nbytes):
        """Room for nbytes more parameters: a larger arena. The queued work binds the current one, so
        it is submitted first; the new one holds both, so that a loop queuing the same finds room."""
        needed = len(self._params) + nbytes
        self.flush()
        self._arena_bytes = arena_size(needed)
        self._forget_bind_groups()   # they bind the old arena
        self.driver.create_arena(self._arena_bytes)

    def _forget_bind_groups(self):
        self.bind_groups.clear()
        self.driver.forget_bind_groups()

    def flush(self):
        if self._queue:
            submit = self.driver.submit if self.profiler is None else self.profiler.submit
            submit(bytes(self._params), self.bind_groups.take_new(), self._queue)
            self._queue, self._params, self._gpu_idle = [], bytearray(), False
            if len(self.bind_groups) > self.bind_groups.kept:
                self._forget_bind_groups()
        # submitted: later work (and buffer uploads, which the queue orders after it) may reuse these;
        # taken before pooling, so an interrupt (the page's Stop) in the loop cannot pool one twice
        released, self._released, self._released_bytes = self._released, [], 0
        for size, handle in released:
            heapq.heappush(self._free[size], handle)
            self.pool_bytes += size
        if self.pool_bytes > self.pool_cap():
            self._trim_pool()

    def pool_cap(self):
        return self.pool_limit if self.pool_limit is not None else max(POOL_LIMIT, self.peak_bytes)

    def _trim_pool(self):
        """Destroy pooled buffers (WebGPU frees them once submitted work is done) until the pool is
        within its limit, starting with the sizes asked for least recently: destroying the buffers
        a loop is about to ask for again would make it create new ones every time."""
        cap = self.pool_cap()
        for size in sorted(self._free, key=lambda s: self._asked.get(s, 0)):
            handles = self._free[size]
            handles.sort()   # (still a heap) the highest go, the ones alloc would take last
            while handles and self.pool_bytes > cap:
                self._destroy(handles.pop())
                self.pool_bytes -= size
            if self.pool_bytes <= cap:
                return

    def sync(self):
        self.flush()
        self.driver.sync()

    # ---- record and replay ----
    @property
    def is_recording(self):
        return self._recording is not None

    def start_recording(self):
        if self._recording is not None:
            raise RuntimeError("webgrad.jit: a recording is already under way (jitted functions do not nest)")
        self._recording = Recording()

    def stop_recording(self):
        recording, self._recording = self._recording, None
        return recording

    def replay(self, recording):
        """Queue a recording's work again: the same kernels on the same buffers, fresh words where it
        asked for them; submitted at once where a read left the GPU idle (so it waits for one step)."""
        for storage, data in recording.writes:
            self._upload(storage.handle, data)
        if len(self._params) + len(recording.params) > self._arena_bytes:
            self._grow_arena(len(recording.params))
        base = len(self._params)
        self._params += recording.params
        for index, words_fn in recording.refresh:
            words = words_fn()
            _BLOCKS[len(words)].pack_into(self._params, base + index * PARAMS_BYTES, *words)
        bind_groups, queue = self.bind_groups, self._queue
        if recording.queued is None or recording.queued[0] != bind_groups.generation:   # (the groups started over)
            recording.queued = (bind_groups.generation, [None] * len(recording.dispatches))
            recording.rebound = range(len(recording.dispatches))
        entries = recording.queued[1]
        for i in recording.rebound:   # the groups of what is new since the last replay
            pipeline, handles, grid = recording.dispatches[i]
            key = (self._layout_of[pipeline], handles)
            entries[i] = (pipeline, bind_groups.ids.get(key) or bind_groups.add(key, pipeline), i * PARAMS_BYTES, grid)
        recording.rebound = ()
        queue.extend(entries if not base else [(pipeline, group, base + offset, grid)
                                               for pipeline, group, offset, grid in entries])
        if self._gpu_idle or len(queue) >= MAX_QUEUED:
            self.flush()

    def memory_stats(self):
        """Bytes are whole buffers (tensors get a size class: see size_class). live: held by
        tensors (or a jit recording), and the index error words; pool: freed, kept for reuse; peak:
        the most ever live."""
        return {"live_buffers": self.live_buffers, "live_bytes": self.live_bytes,
                "pool_buffers": sum(len(handles) for handles in self._free.values()),
                "pool_bytes": self.pool_bytes, "pool_limit": self.pool_cap(), "peak_bytes": self.peak_bytes}
