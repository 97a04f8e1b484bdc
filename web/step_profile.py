"""The page's "Where the time goes" panel, Python side (runs in the worker, under Pyodide): a few
training steps run under webgrad.profiler and summed by kernel family, per step. Each view hands
over its own step function (playground.Session.step, mnist_view.Trainer.step, lm_view.Session.step);
web/time_chart.js draws the result.
"""
import json

from pyodide.ffi import to_js

from webgrad import profiler


def profiled(step, count):
    """step(count), run under webgrad.profiler: a JS array [what step returned, the profile as JSON].

    The profile: {steps: count, timestamps: whether GPU timestamps measured it (else each dispatch's
    wall time, submitted alone and waited for), dispatches: per step, families: [{name, ms, calls},
    per step, the most time first]}; or {error} when no profile could be opened (the steps then
    train unprofiled, so the page's training goes on either way).
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
    summary = {
        "steps": count,
        "timestamps": profile.measure == profiler.TIMESTAMPS,
        "dispatches": sum(row.count for row in rows) / count,
        "families": [{"name": row.key, "ms": row.gpu_time_total / 1000 / count, "calls": row.count / count}
                     for row in rows],
    }
    return to_js([result, json.dumps(summary)])
