"""How a product is tiled (shaders/matmul.wgsl): the prior (a table measured on an H100, and a split
rule for K), and MatmulTuner, which natively on a GPU times the candidate tilings at the first product
of a shape class and keeps the fastest, per adapter, in a JSON file.

A candidate's time is the GPU time of one product alone (webgrad.profiler: timestamp queries, else
each dispatch's wall time waited for), as a training step's dependent products see it, plus
DISPATCH_SECONDS per dispatch: the sum of a split K's pieces costs a dispatch of host time that
the GPU time does not show. (Measured on an H100, bench/NOTES.md: by GPU time alone, 512^3 split K
in 4 for 33 us of GPU instead of 43 and fell from 0.59 to 0.30 of cuBLAS's throughput, its host
time per product 43 -> 82 us; by the wall time of products back to back, independent products
overlapped and the GPT's weight gradient took one piece of 54 tiles, 2.4 ms alone instead of 0.5.)

WEBGRAD_MATMUL_TUNING=0 turns tuning off, =1 on; unset, it is on natively for hardware adapters only:
on a software one each candidate costs seconds of compiles and its timings say nothing of a GPU, and
the page keeps nothing between loads (Pyodide's files go with it; browser storage through the bridge
is not built), so each load would compile every candidate again before the first step.
The cache is $WEBGRAD_CACHE_DIR/matmul-tiles.json, else under $XDG_CACHE_HOME/webgrad or
~/.cache/webgrad."""
import collections
import functools
import json
import math
import os
import sys
import time
import warnings

from .common import groups

# The longest inner dimension one matmul workgroup walks on a software adapter, whose shader loops
# stop after ~65535 iterations (longer products split K).
SOFTWARE_MATMUL_K = 16384
# On a GPU, a product with fewer output tiles than MATMUL_SPLIT_BELOW and a K of at least
# MATMUL_SPLIT_FROM_K splits K (at least MATMUL_MIN_SPLIT_K each) until it has about MATMUL_GROUPS
# workgroups: the MLP's 128x784 @ 784x512 has 64 tiles of 32x32 (H100: 61 us whole, 28 us in 4
# pieces plus their sum), and the GPT's weight gradient 1152x384 out of K = 16,384 has 54 tiles
# of 128x64 each walking all of K. A shorter K is not worth the dispatch that sums the pieces
# (~10 us), nor are 128 tiles (1024^3) the extra pass.
MATMUL_GROUPS = 256
MATMUL_SPLIT_BELOW = 128
MATMUL_SPLIT_FROM_K = 512
MATMUL_MIN_SPLIT_K = 64
# At most this many pieces (a conv's weight gradient, 16x9 outputs over a K of 100k, takes them all).
MATMUL_MAX_SPLITS = 256


class MatmulTiles(collections.namedtuple("MatmulTiles", "wx wy tm tn bk")):
    """A matmul kernel's shape (shaders/matmul.wgsl): wx x wy threads, each computing tm x tn
    outputs, stepping bk along K."""

    @property
    def staged(self):   # BK 1: shaders/matmul_small.wgsl, which reads the operands where they are
        return self.bk > 1

    @property
    def workgroup_bytes(self):   # two halves of padded A and B slices, vec4 rows
        return 2 * self.bk * (self.wy * self.tm // 4 + 1 + self.wx * self.tn // 4 + 1) * 16 if self.staged else 0


# Measured on an H100 over Vulkan (bench/matmul.py --sweep, bench/NOTES.md): by outputs over all
# batches, the largest output tile that still gives the GPU enough work and wastes at most half a
# tile on each matrix's edges; the middle size's long side follows the output's (M > N: 128 x 64).
# It and the smallest fit WebGPU's default 16 KiB of workgroup memory, the largest does not.
_MATMUL_BY_SIZE = ((2048 * 2048, MatmulTiles(16, 16, 8, 8, 8)),    # 128 x 128
                   (384 * 1024, MatmulTiles(16, 8, 8, 8, 8)),      # 64 x 128
                   (0, MatmulTiles(8, 8, 4, 4, 16)))               # 32 x 32
# A CPU rasterizer (SwiftShader, lavapipe): few workgroups run at once, each lane's loads are separate
# and a barrier switches between the workgroup's 4-lane coroutines, so the most multiply-adds per
# staged read win: 64 x 64 tiles of 8x8 per thread took the page's MLP step from ~14 to ~29 steps/s;
# 32 x 32 and 16 x 16 tiles, 4x4 per thread, 64 x 128, and workgroups of one subgroup measured
# slower, BK 4 as fast as 8 and half the compile (bench/NOTES.md, "MNIST in the page against TF.js
# WebGL"). By the output's short side, so that a conv's 16 or 32 channels do not fill a 64-row tile
# with zeros: 64, 32 or 16 along it. Every product takes them unstaged (BK 1, shaders/matmul_small.wgsl):
# each lane's read is a gather, from workgroup memory too, so staging only adds reads and barriers once
# the addresses are worked out before the loop (the MLP step ~1.25x, bench/NOTES.md, "MNIST MLP in the
# page without staging"), a convolution's windows without a division in it; then _fitted to the output
# (the page's CNN step 1.6-2.2x, "MNIST CNN in the page: convolution windows read unstaged").
_MATMUL_SOFTWARE = ((33, MatmulTiles(8, 8, 8, 8, 1)),     # 64 x 64
                    (17, MatmulTiles(16, 4, 8, 8, 1)),    # 32 x 128
                    (0, MatmulTiles(16, 2, 8, 8, 1)))     # 16 x 128


def _oriented(tiles, m, n):
    """tiles with its long side along the output's (the table's tiles are wider than tall)."""
    return tiles if m <= n else tiles._replace(wx=tiles.wy, wy=tiles.wx, tm=tiles.tn, tn=tiles.tm)


def _fitted(tiles, m, n):
    """Unstaged tiles trimmed to the output: as many workgroups along each side as the tiles give,
    each with as few threads as cover its share (a 16 x 9 weight gradient in one 16 x 16 tile, not
    128 x 16; 196 columns in two 104 wide, not 128), since an unstaged thread's reads do not depend
    on its neighbours'."""
    rows, cols = groups(m, groups(m, tiles.wy * tiles.tm)), groups(n, groups(n, tiles.wx * tiles.tn))
    return tiles._replace(wy=groups(rows, tiles.tm), wx=groups(cols, tiles.tn))


def matmul_tiles(m, n, batch, is_software, workgroup_limit=16384):
    """A product's tiles."""
    if is_software:
        return _fitted(_oriented(next(tiles for least, tiles in _MATMUL_SOFTWARE if min(m, n) >= least), m, n), m, n)
    oriented = ((least, _oriented(tiles, m, n)) for least, tiles in _MATMUL_BY_SIZE)
    fits = (tiles for least, tiles in oriented
            if batch * m * n >= least and tiles.workgroup_bytes <= workgroup_limit
            and 2 * m >= tiles.wy * tiles.tm and 2 * n >= tiles.wx * tiles.tn)
    return next(fits, _MATMUL_BY_SIZE[-1][1])


def matmul_splits(m, n, k, batch, tiles, is_software):
    """How many pieces of K one product is split into (see shaders/matmul.wgsl)."""
    if is_software:
        return -(-k // SOFTWARE_MATMUL_K)
    workgroups = groups(m, tiles.wy * tiles.tm) * groups(n, tiles.wx * tiles.tn) * batch
    if k < MATMUL_SPLIT_FROM_K or workgroups >= MATMUL_SPLIT_BELOW:
        return 1
    return max(1, min(-(-MATMUL_GROUPS // workgroups), k // MATMUL_MIN_SPLIT_K, MATMUL_MAX_SPLITS))


# ---- tuning

# The tilings a tuner tries besides the prior's (each oriented to the output as the table's are):
# the table's three, 64 x 64 at 4x4 and at 8x8 per thread, and the 8x8 ones' smaller tiles stepping
# 16 along K (half the barriers; 128 x 128 measured slower so); for short sides (a convolution's 16
# channels), 16 x 64 and 32 x 32 stepping 8 along K (the MNIST CNN's input gradient, K = 288 through
# window loaders, ran 1.3-5x faster so than at 32 x 32 stepping 16 in three noisy runs,
# bench/NOTES.md). The smallest comes last.
TUNED_TILES = (MatmulTiles(16, 16, 8, 8, 8), MatmulTiles(16, 8, 8, 8, 8), MatmulTiles(16, 8, 8, 8, 16),
               MatmulTiles(16, 16, 4, 4, 16), MatmulTiles(8, 8, 8, 8, 8), MatmulTiles(8, 8, 8, 8, 16),
               MatmulTiles(16, 4, 4, 4, 8), MatmulTiles(8, 8, 4, 4, 8), MatmulTiles(8, 8, 4, 4, 16))
# Smaller products (multiply-adds over all batches) are launch-bound: every candidate takes what a
# dispatch takes, so they keep the prior (a toy model's products, tuning nothing in ~20 compiles each).
TUNED_FROM_MACS = 1 << 20
# K splits tried besides the rule's: every count up to TUNED_MAX_SPLITS where each piece keeps
# TUNED_MIN_SPLIT_K of K and the pieces stay under TUNED_MAX_GROUPS workgroups (more only fill a GPU
# that is already full). Every count, not powers of two: a GPU runs a fixed number of workgroups at
# once, and the count that fills its waves wins (an H100's GPT weight gradient of 36 tiles ran 13%
# faster in 7 pieces, 252 workgroups in one wave, than in 8, a wave and a tail; bench/NOTES.md).
TUNED_MAX_SPLITS = 16
TUNED_MIN_SPLIT_K = 128
TUNED_MAX_GROUPS = 1024
# Of the candidates within TUNED_MARGIN of the fastest, the first (the prior is first) is kept: near-ties
# are ranked by noise, and would flip between starts (bench/NOTES.md: two caches, a 0.3% tie, two picks).
TUNED_MARGIN = 0.03
# Each candidate runs once (its compile), then TUNING_RUNS times in turns with the others; its least time counts.
TUNING_RUNS = 3
# Before its candidates are timed, a class's prior runs back to back for this long: a GPU idle for a
# moment runs slow until its clock comes up, and an H100 timed a model's first products so at 1.8-3x
# their time in a step (the later ones near it), which ranked the tiles wrongly (bench/NOTES.md).
TUNING_WARM_SECONDS = 0.1
WARM_RUNS_QUEUED = 4   # between two waits, so that the GPU never idles in the warm-up
# What a dispatch costs besides its GPU time: ~40 us of host time for a split K's sum in an eager
# product (512^3 on an H100), ~10 us of drain in a replayed step.
DISPATCH_SECONDS = 20e-6
CACHE_FILE = "matmul-tiles.json"
CACHE_FORMAT = 1
# Choices are kept per adapter and revision of shaders/matmul.wgsl and its timing: times taken with an
# earlier kernel or timer say little of this one (revision 2 dropped the branch around the next step's
# loads; 3 times the candidates in turns, where one at a time ranked them by a moving clock; 4 tries
# every split count; 5 warms the GPU first).
MATMUL_TUNING_REVISION = 5


def tuning_enabled(is_software):
    setting = os.environ.get("WEBGRAD_MATMUL_TUNING", "")
    if setting not in ("", "0", "1"):
        raise ValueError(f"WEBGRAD_MATMUL_TUNING must be 0 or 1, not {setting!r}")
    return setting == "1" if setting else not is_software and sys.platform != "emscripten"


def cache_path():
    """The tuning cache's file natively, None in the page (nothing there outlives the page)."""
    if sys.platform == "emscripten":
        return None
    folder = os.environ.get("WEBGRAD_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "webgrad")
    return os.path.join(folder, CACHE_FILE)


def _bucket(size):
    """A size's class: rounded up to a multiple of a quarter of the power of two at or below it
    (1000 -> 1024, 1152 -> 1280, 1536 -> 1536: the GPT's 1152- and 1536-wide weight gradients
    measured best with other tiles)."""
    step = 1 << max(0, size.bit_length() - 3)
    return -(-size // step) * step


def shape_class(m, n, k, batch, layouts):
    """A product's key in the cache: its sizes' classes and its operands' layouts (form, staging
    order, vec4 reads), which change what the kernel does per element."""
    return f"{_bucket(m)}x{_bucket(n)}x{_bucket(k)}x{_bucket(batch)} {layouts}"


class MatmulTuner:
    """Chooses each product's (tiles, splits): the prior where tuning is off, else the fastest
    candidate, timed once per shape class and adapter, remembered in the cache file.
    timer(candidate, run) -> seconds of one run() of that candidate (tests pass fake ones); the
    default: its GPU time alone plus DISPATCH_SECONDS per dispatch."""

    def __init__(self, runtime, info, is_software, enabled=None, path="default", timer=None):
        self.runtime, self.is_software = runtime, is_software
        self.enabled = tuning_enabled(is_software) if enabled is None else enabled
        self.path = cache_path() if path == "default" else path
        self.adapter = (f"{info.get('name', '?')} | {info.get('driver', '')} | {info.get('backend', '')}"
                        f" | matmul r{MATMUL_TUNING_REVISION}")
        self.timer = timer or _gpu_seconds
        self.warm_seconds = TUNING_WARM_SECONDS if timer is None else 0.0   # (a fake timer needs no warm GPU)
        self.limit = runtime.limits["max_compute_workgroup_storage_size"]
        self._choices = None   # shape class -> (tiles, splits) on this adapter, from the file and since
        self.chosen = {}       # (sizes, layouts, prior) -> (tiles, splits): one dict read per product
        self.timings = {}      # shape class -> {candidate: seconds}, of the classes this tuner timed

    def choose(self, m, n, k, batch, layouts, prior, run):
        """(tiles, splits) for a product; run(tiles, splits) queues it with them (the candidates'
        timing runs). layouts: hashable, what of the operands' layout the kernel depends on."""
        if not self.enabled or batch * m * n * k < TUNED_FROM_MACS:
            return prior
        memo = (m, n, k, batch, layouts, prior)
        chosen = self.chosen.get(memo)
        if chosen is None:
            chosen = self._lookup_or_tune(m, n, k, batch, layouts, prior, run)
            if chosen is None:
                return prior   # not the time to tune (a profile is open): ask again next time
            self.chosen[memo] = chosen
        return chosen

    def candidates(self, m, n, k, batch, prior):
        """The prior, then each of TUNED_TILES that fits the adapter's workgroup memory, with the
        split rule's pieces and every other count up to TUNED_MAX_SPLITS that leaves enough K per piece."""
        found = [prior]
        max_groups = self.runtime.limits["max_compute_workgroups_per_dimension"]
        least = -(-k // SOFTWARE_MATMUL_K) if self.is_software else 1
        for t in (_oriented(t, m, n) for t in TUNED_TILES):
            oversized = (2 * m < t.wy * t.tm or 2 * n < t.wx * t.tn) and t != TUNED_TILES[-1]
            if t.workgroup_bytes > self.limit or oversized:
                continue   # (nor a tile over twice the output's side but the smallest, as in the table)
            workgroups = groups(m, t.wy * t.tm) * groups(n, t.wx * t.tn) * batch
            splits = {matmul_splits(m, n, k, batch, t, self.is_software)}
            splits |= {s for s in range(1, TUNED_MAX_SPLITS + 1)
                       if s == 1 or (k // s >= TUNED_MIN_SPLIT_K and workgroups * s <= TUNED_MAX_GROUPS)}
            found += [(t, s) for s in sorted(splits) if s >= least and batch * s <= max_groups]
        return list(dict.fromkeys(found))

    def _lookup_or_tune(self, m, n, k, batch, layouts, prior, run):
        if self._choices is None:
            self._choices = self._load()
        key = shape_class(m, n, k, batch, layouts)
        cached = self._choices.get(key)
        if cached is not None:
            return cached
        runtime = self.runtime
        # Not while a profile is open (its timings would be the profile's), nor inside a wg.jit
        # recording (the candidates' runs would be recorded; its warm-up calls tune the shapes).
        if runtime.profiler is not None or runtime.adopted is not None or runtime.is_recording:
            return None
        times = self._time(self.candidates(m, n, k, batch, prior), run)
        fastest = min(times.values())
        chosen = next(c for c, seconds in times.items() if seconds <= fastest * (1 + TUNED_MARGIN))
        self.timings[key] = times
        self._choices[key] = chosen
        self._save(key, chosen)
        return chosen

    def _time(self, candidates, run):
        """Each candidate's least time of TUNING_RUNS, taken in turns (one run of each, then the
        next round) once all have run once (their compiles) and the GPU is warm (TUNING_WARM_SECONDS):
        a GPU's clock moves while it runs (an H100's between 810 and 1980 MHz within a minute,
        bench/NOTES.md), and candidates timed one after the other were ranked by the clock of their
        moment as much as by their tiles."""
        runs = {candidate: functools.partial(run, *candidate) for candidate in candidates}
        for queue in runs.values():
            queue()
        warm_until = time.perf_counter() + self.warm_seconds
        while time.perf_counter() < warm_until:
            for _ in range(WARM_RUNS_QUEUED):
                runs[candidates[0]]()
            self.runtime.sync()
        times = dict.fromkeys(candidates, math.inf)
        for _ in range(TUNING_RUNS):
            for candidate, queue in runs.items():
                times[candidate] = min(times[candidate], self.timer(candidate, queue))
        return times

    # ---- the cache file: {"format": 1, "adapters": {adapter: {shape class: [*tiles, splits]}}}

    def _read(self):
        if self.path is None or not os.path.exists(self.path):
            return {}
        with open(self.path) as f:
            data = json.load(f)
        adapters = data.get("adapters") if isinstance(data, dict) and data.get("format") == CACHE_FORMAT else None
        if not isinstance(adapters, dict):
            raise ValueError(f"not a format-{CACHE_FORMAT} tuning cache")
        return adapters

    def _load(self):
        """This adapter's choices in the cache file; a file that cannot be read is ignored with a
        warning (and replaced at the next save), as are entries this device cannot run."""
        try:
            entries = self._read().get(self.adapter, {})
            choices = {key: self._entry(value) for key, value in entries.items()}
        except (OSError, ValueError, TypeError, AttributeError) as e:
            warnings.warn(f"webgrad: ignoring the matmul tuning cache {self.path}: {e}", RuntimeWarning, stacklevel=4)
            return {}
        return {key: choice for key, choice in choices.items() if choice is not None}

    def _entry(self, value):
        *fields, splits = value
        if len(fields) != len(MatmulTiles._fields) or not all(type(v) is int for v in value):
            raise ValueError(f"entry {value!r} is not {len(MatmulTiles._fields)} tile fields and a split")
        tiles = MatmulTiles(*(int(v) for v in fields))
        return (tiles, int(splits)) if tiles.workgroup_bytes <= self.limit and splits >= 1 else None

    def _save(self, key, chosen):
        if self.path is None:
            return
        try:
            try:
                adapters = self._read()
            except (ValueError, TypeError):
                adapters = {}   # corrupt: rewritten whole (the warning was given at load)
            ours = adapters.get(self.adapter)
            adapters[self.adapter] = {**(ours if isinstance(ours, dict) else {}), key: [*chosen[0], chosen[1]]}
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            partial = f"{self.path}.{os.getpid()}"
            with open(partial, "w") as f:
                json.dump({"format": CACHE_FORMAT, "adapters": adapters}, f, indent=1)
            os.replace(partial, self.path)   # whole or not at all, if two processes save at once
        except OSError as e:
            warnings.warn(f"webgrad: could not save the matmul tuning cache {self.path}: {e}", RuntimeWarning,
                          stacklevel=4)
            self.path = None


def _gpu_seconds(candidate, run):
    from .... import profiler
    with profiler.profile() as prof:
        run()
    return prof.total_us() / 1e6 + DISPATCH_SECONDS * len(prof.events)
