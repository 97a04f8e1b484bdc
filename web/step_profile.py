"""The page's "Where the time goes" panel, Python side (runs in the worker, under Pyodide): a few
training steps run under webgrad.profiler and summed by kernel family, per step. Each view hands
over its own step function (playground.Session.step, mnist_view.Trainer.step, lm_view.Session.step);
web/time_chart.js draws the result.
"""
import functools
import json
import math

from pyodide.ffi import to_js

from webgrad import profiler

# Chrome rounds GPU timestamps down to a coarse step against timing attacks (100 us, its WebGPU
# Developer Features flag turns that off), which leaves every dispatch's time a multiple of the
# step. Times read at full resolution share no divisor near this large.
ROUNDED_FROM_NS = 1000


def rounding_us(profile):
    """The step (us) that the profile's GPU timestamps were rounded to, 0 where every dispatch read
    0 (all were shorter than the step), or None where they were not rounded."""
    step = functools.reduce(math.gcd, (event.ns for event in profile.events), 0)
    return None if not profile.events or 0 < step < ROUNDED_FROM_NS else step / 1000


def profiled(step, count):
    """step(count), run under webgrad.profiler: a JS array [what step returned, the profile as JSON].

    The profile: {steps: count, timestamps: whether GPU timestamps measured it (else each dispatch's
    wall time, submitted alone and waited for), rounding_us: rounding_us(profile) where timestamps
    measured it, dispatches: per step, families: [{name, ms, calls}, per step, the most time first]};
    or {error} when no profile could be opened (the steps then train unprofiled, so the page's
    training goes on either way).
    """
    try:
        profile = profiler.profile()
        profile.__enter__()
    except RuntimeError as e:   # a profile that the user's script left open, say
        return to_js([step(count), json.dumps({"error": f"Could not profile: {e}"})])
    try:
        result = step(count)
    finally:
        profile.__exit__(None, None, None)
    rows = sorted(profile.key_averages(group_by="family"), key=lambda row: -row.gpu_time_total)
    timestamps = profile.measure == profiler.TIMESTAMPS
    summary = {
        "steps": count,
        "timestamps": timestamps,
        "rounding_us": rounding_us(profile) if timestamps else None,
        "dispatches": sum(row.count for row in rows) / count,
        "families": [{"name": row.key, "ms": row.gpu_time_total / 1000 / count, "calls": row.count / count}
                     for row in rows],
    }
    return to_js([result, json.dumps(summary)])
