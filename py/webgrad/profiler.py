"""webgrad.profiler: where a program's GPU time goes, per kernel and per kernel family.

    with wg.profiler.profile() as prof:
        with wg.profiler.record_function("step"):
            train_step(x, y)
    print(prof.key_averages().table(sort_by="gpu_time_total", row_limit=10))
    print(prof.key_averages(group_by="family").table())

While a profile is open the webgpu runtime hands it each batch of queued work to submit. Where the
adapter has the "timestamp-query" feature, each dispatch runs in a compute pass of its own that
writes a timestamp as it begins and ends: its GPU time, without the launch and the drain between
dispatches that a normal run overlaps. Without the feature each dispatch is submitted alone and
waited for, and its wall time (submit, run, wait) is what the table shows; `prof.measure` says
which. Either way the work is serialised, so a profiled program runs slower than it does alone.
"""
import contextlib
import enum
import time
from collections import namedtuple

from . import backends

# one dispatch: its kernel, the kernel's family (its shaders/<family>.wgsl), the record_function
# ranges open when it ran (outermost first, joined by "/"), and its time in nanoseconds
KernelEvent = namedtuple("KernelEvent", "name family range ns")

TIMESTAMPS = "GPU time (timestamp queries)"
WALL = "wall time of each dispatch submitted alone and waited for (no timestamp-query here)"
# the most dispatches timed in one submit: two timestamps each, within a query set's 4096
TIMED_PER_SUBMIT = 1024
GROUPS = {"kernel": lambda e: e.name, "family": lambda e: e.family, "range": lambda e: e.range}
SORT_KEYS = {"gpu_time_total": lambda r: -r.gpu_time_total, "gpu_time_avg": lambda r: -r.gpu_time,
             "count": lambda r: -r.count, "name": lambda r: r.key}
# torch.profiler's names for the same columns
SORT_KEYS.update({alias: SORT_KEYS["gpu_time_total"] for alias in
                  ("cuda_time_total", "device_time_total", "self_cuda_time_total", "self_device_time_total")})


class ProfilerActivity(enum.Enum):
    """torch.profiler's activities; a profile here always times the webgpu device's kernels."""
    CPU = "cpu"
    CUDA = "cuda"


class profile:
    """Collects the GPU time of every dispatch queued on the webgpu device while open. activities
    is accepted as torch.profiler takes it (a PyTorch program runs unchanged); the GPU's kernels
    are what is timed either way."""

    def __init__(self, activities=None):
        for activity in activities or ():
            if not isinstance(activity, ProfilerActivity):
                raise TypeError(f"profile: activities holds ProfilerActivity members, not {activity!r}")
        self.runtime = backends.get_backend("webgpu").runtime
        self.events = []
        self.ranges = []
        granted = getattr(self.runtime.driver, "features", ())
        self.measure = TIMESTAMPS if "timestamp-query" in granted else WALL

    def __enter__(self):
        if self.runtime.profiler is not None:
            raise RuntimeError("webgrad.profiler: a profile is already open (profiles do not nest)")
        self.runtime.flush()   # work queued before the profile is not the profile's
        self.runtime.profiler = self
        return self

    def __exit__(self, *exc):
        try:
            self.runtime.flush()
        finally:
            self.runtime.profiler = None
        return False

    def submit(self, params, new_bind_groups, dispatches):
        """The runtime's submit while the profile is open: the same work, timed."""
        names, driver = self.runtime.kernel_names, self.runtime.driver
        where = "/".join(self.ranges) or "(no range)"
        if self.measure == TIMESTAMPS:
            times = []
            for start in range(0, len(dispatches), TIMED_PER_SUBMIT):
                times += driver.submit(params, new_bind_groups if start == 0 else [],
                                       dispatches[start:start + TIMED_PER_SUBMIT], True)
        else:
            times = []
            for i, one in enumerate(dispatches):
                began = time.perf_counter_ns()
                driver.submit(params, new_bind_groups if i == 0 else [], [one])
                driver.sync()
                times.append(time.perf_counter_ns() - began)
        for (pipeline, *_), ns in zip(dispatches, times):
            self.events.append(KernelEvent(*names[pipeline], where, ns))

    def key_averages(self, group_by="kernel"):
        """The events summed by kernel (the default), by family, or by record_function range."""
        if group_by not in GROUPS:
            raise ValueError(f"key_averages: group_by must be one of {sorted(GROUPS)}, not {group_by!r}")
        key_of, rows = GROUPS[group_by], {}
        for event in self.events:
            row = rows.setdefault(key_of(event), KernelStats(key_of(event), group_by))
            row.count += 1
            row.gpu_time_total += event.ns / 1000
        return EventList(rows.values(), self.measure)

    def total_us(self):
        return sum(e.ns for e in self.events) / 1000


class KernelStats:
    """One row of a table: its key (a kernel, family or range) and its times in microseconds."""

    def __init__(self, key, kind):
        self.key, self.kind, self.count, self.gpu_time_total = key, kind, 0, 0.0

    @property
    def gpu_time(self):
        return self.gpu_time_total / self.count

    def __repr__(self):
        return f"<{self.kind} {self.key}: {self.count} calls, {self.gpu_time_total:.1f} us>"


class EventList(list):
    def __init__(self, rows, measure):
        super().__init__(rows)
        self.measure = measure

    def table(self, sort_by="gpu_time_total", row_limit=100):
        if sort_by not in SORT_KEYS:
            raise ValueError(f"table: sort_by must be one of {sorted(SORT_KEYS)}, not {sort_by!r}")
        rows = sorted(self, key=SORT_KEYS[sort_by])
        total = sum(r.gpu_time_total for r in rows) or 1.0
        kind = rows[0].kind.capitalize() if rows else "Kernel"
        width = max([len(kind)] + [len(str(r.key)) for r in rows[:row_limit]])
        lines = [f"{kind:<{width}}  {'GPU total':>12}  {'GPU %':>6}  {'GPU avg':>11}  {'Calls':>6}"]
        lines.append("-" * len(lines[0]))
        for r in rows[:row_limit]:
            lines.append(f"{r.key:<{width}}  {_us(r.gpu_time_total):>12}  {100 * r.gpu_time_total / total:>5.1f}%"
                         f"  {_us(r.gpu_time):>11}  {r.count:>6}")
        lines.append("-" * len(lines[0]))
        lines.append(f"{'Total':<{width}}  {_us(sum(r.gpu_time_total for r in rows)):>12}  "
                     f"{'':>6}  {'':>11}  {sum(r.count for r in rows):>6}")
        lines.append(f"Measured: {self.measure}.")
        return "\n".join(lines)


def _us(us):
    return f"{us / 1000:.3f} ms" if us >= 1000 else f"{us:.1f} us"


@contextlib.contextmanager
def record_function(name):
    """Labels the dispatches queued inside it (their `range`) in the open profile, if any."""
    webgpu = backends._backends.get("webgpu")   # a range never starts a device
    runtime = webgpu and webgpu.runtime
    profiler = runtime and runtime.profiler
    if profiler is None:
        yield
        return
    runtime.flush()   # what was queued before belongs to the enclosing range
    profiler.ranges.append(str(name))
    try:
        yield
    finally:
        runtime.flush()
        profiler.ranges.pop()

