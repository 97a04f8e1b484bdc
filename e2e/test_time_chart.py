"""The "Where the time goes" panel (web/time_chart.js) end to end, in headless Chromium: the toy
playground profiles a few steps on its own once it has trained, MNIST's Profile button asks for a
profile; each panel must show the kernel families and dispatch counts that wg.profiler finds
when a program in the code panel profiles the same steps of the same training (the oracle), with
times above zero whose shares add up to the whole.

One page serves both tests (loading Python is the slow part); its seed is drawn afresh each run."""
import math
import random
import re

import pytest

from e2e.browser import code_text, wait_for
from e2e.conftest import guarded_page, offers_timestamps, pause, printed_json, text, wait_for_text

SEED = random.randrange(100000)


@pytest.fixture(scope="module")
def page(browser, site_url):
    """The toy playground with its first frame drawn."""
    with guarded_page(browser, (1440, 900)) as page:
        page.goto(site_url + f"#seed={SEED}")
        wait_for(page, "document.querySelector('[data-testid=accuracy]').textContent !== '–'", 60)
        yield page


def rows_shown(prefix):
    return f"document.querySelectorAll('[data-testid={prefix}time-bars] [data-family]').length"


def panel(page, prefix):
    """What the panel shows: {families: {name: (ms a step, share, dispatches a step)} in the order
    shown, first and last (the steps profiled), dispatches (a step), note, measure (its statement of
    what was measured)}."""
    shown = page.eval_on_selector(f"[data-testid={prefix}time-bars]", """bars => ({
        first: Number(bars.dataset.first), last: Number(bars.dataset.last), dispatches: Number(bars.dataset.dispatches),
        families: [...bars.querySelectorAll('[data-family]')].map(r => [r.dataset.family,
                   [Number(r.dataset.ms), Number(r.dataset.share), Number(r.dataset.calls)]])})""")
    shown["families"] = dict(shown["families"])
    return {**shown, "note": text(page, f"{prefix}time-note"), "measure": text(page, f"{prefix}time-measure")}


def check(shown, oracle):
    """The panel as shown against the oracle: {calls: {family: dispatches over the steps profiled},
    steps, timestamps: whether it measured GPU timestamps, offered: whether the adapter offers them}."""
    families, steps = shown["families"], shown["last"] - shown["first"] + 1
    assert steps == oracle["steps"], (shown, oracle)
    assert families.keys() == oracle["calls"].keys(), (shown, oracle)
    for name, (_, _, calls) in families.items():
        assert math.isclose(calls * steps, oracle["calls"][name]), (name, shown, oracle)
    assert math.isclose(shown["dispatches"] * steps, sum(oracle["calls"].values())), (shown, oracle)
    assert all(ms > 0 for ms, _, _ in families.values()), shown
    assert math.isclose(sum(share for _, share, _ in families.values()), 1, abs_tol=1e-6), shown
    times = [ms for ms, _, _ in families.values()]
    assert times == sorted(times, reverse=True), shown   # the most time first
    note = shown["note"]
    assert f"{round(shown['dispatches'])} dispatches a step" in note and f"steps {shown['first']}–{shown['last']}" in note, note
    total = float(re.search(r"([\d.]+) ms in all", note)[1])   # as the panel rounds it
    assert math.isclose(sum(times), total, abs_tol=0.5 if total >= 10 else 0.05 if total >= 1 else 0.005), (note, times)
    assert oracle["timestamps"] == oracle["offered"], oracle
    said = "with GPU timestamps" if oracle["timestamps"] else "without GPU timestamps"
    assert said in shown["measure"], shown["measure"]
    if oracle["timestamps"]:   # SwiftShader's timestamps are not rounded: the panel must not say so
        assert "rounds the timestamps" not in shown["measure"], shown["measure"]


def fits_a_phone(page):
    page.set_viewport_size({"width": 390, "height": 844})
    page.wait_for_timeout(300)
    fits = page.evaluate("document.documentElement.scrollWidth <= innerWidth")
    page.set_viewport_size({"width": 1440, "height": 900})
    return fits


def oracle(page, setup, steps, warm, profiled):
    """Runs setup, then warm, then profiled (training steps of it) under wg.profiler, as a program
    in the code panel: {calls, steps, timestamps} as check() takes them."""
    source = setup + f"""
import json
import webgrad as wg
{warm}
with wg.profiler.profile() as prof:
    {profiled}
calls = {{row.key: row.count for row in prof.key_averages(group_by="family")}}
print("ORACLE", json.dumps({{"calls": calls, "steps": {steps}, "timestamps": prof.measure == wg.profiler.TIMESTAMPS}}))
"""
    return {**printed_json(page, source, "ORACLE"), "offered": offers_timestamps(page)}


def test_the_toy_profiles_itself_after_its_first_steps(page):
    assert "Not profiled yet" in text(page, "time-note")
    page.click("[data-testid=train]")
    wait_for(page, rows_shown("") + " > 0", 60)
    pause(page)
    shown = panel(page, "")
    first, last = shown["first"], shown["last"]
    assert first > 10, f"seed {SEED}: profiled before the model trained 10 steps: {shown}"
    # the controls' script, trained to the steps the page profiled, then those under the profiler
    script = code_text(page).split('if __name__ == "__main__":')[0]
    steps = last - first + 1
    check(shown, oracle(page, script, steps, f"for _ in range({first - 1}): train_step()",
                        f"for _ in range({steps}): train_step()"))
    # Run made a fresh model of the script: the panel waits for a profile of it
    wait_for(page, rows_shown("") + " === 0", 10)
    assert "Not profiled yet" in text(page, "time-note")
    assert fits_a_phone(page)


def test_mnist_profiles_the_next_steps_when_asked(page):
    page.click("[data-testid=tab-mnist]")
    wait_for_text(page, "mnist-status", "Ready", 90, SEED)
    model, batch = page.input_value("#mnist-model"), int(page.input_value("#mnist-batch"))
    page.click("[data-testid=mnist-profile]")
    assert "Press Train" in text(page, "mnist-time-note")
    page.click("[data-testid=mnist-train]")
    wait_for(page, rows_shown("mnist-") + " > 0", 60)
    page.click("[data-testid=mnist-pause]")
    wait_for_text(page, "mnist-status", "Paused", 30, SEED)
    speed = text(page, "mnist-speed")
    assert re.fullmatch(r"\d+\.\d", speed), speed   # profiled steps give no speed
    shown = panel(page, "mnist-")
    # the first step compiles the kernels: never profiled; the next chunk is
    assert shown["first"] == 2, f"seed {SEED}: asked before training, yet profiled {shown}"
    # The oracle: the view's own Trainer, on blank digits of the same shapes (the kernels depend on
    # shapes, not values), one step(count) profiled as the page profiled it; enough digits that no
    # epoch starts there.
    digits, steps = 40 * batch, shown["last"] - shown["first"] + 1
    setup = ("import mnist_view\nimport webgrad as wg\nfrom webgrad.data import MNIST\n"
             f"pixels = wg.zeros({digits}, 28, 28, dtype=wg.uint8, device='webgpu')\n"
             f"digits = MNIST(pixels, wg.randint(0, 10, ({digits},), device='webgpu'))\n"
             f"trainer = mnist_view.Trainer(digits, digits, {model!r}, 0.003, {batch}, 1000, {SEED}, "
             "replayed=False)\n")   # as the page on a software GPU
    page.click("[data-testid=tab-playground]")
    answer = oracle(page, setup, steps, f"trainer.step({steps})", f"trainer.step({steps})")
    page.click("[data-testid=tab-mnist]")
    check(shown, answer)
    assert fits_a_phone(page)


def test_timestamps_rounded_by_the_browser_are_told_apart(page):
    """The panel says when the browser rounds GPU timestamps (Chrome does, to about 100 us, unless
    its WebGPU Developer Features flag is on): step_profile.rounding_us on a profile's own times
    (not rounded here) and on those times as such a browser would give them, each dispatch's begin
    and end rounded down to a step drawn afresh."""
    step_ns = random.randrange(50_000, 150_000)
    source = f"""
import json, random, types
import webgrad as wg
import step_profile
x = wg.randn(64, 32, device="webgpu")
with wg.profiler.profile() as prof:
    for _ in range(3):
        (x @ x.T).relu().sum().item()
def rounded(event, start):
    return event._replace(ns=(start + event.ns) // {step_ns} * {step_ns} - start // {step_ns} * {step_ns})
coarse = [rounded(e, random.randrange(10**9)) for e in prof.events]
print("ROUNDING", json.dumps([prof.measure == wg.profiler.TIMESTAMPS, step_profile.rounding_us(prof),
                              step_profile.rounding_us(types.SimpleNamespace(events=coarse))]))
"""
    page.click("[data-testid=tab-playground]")
    timestamps, exact, coarse = printed_json(page, source, "ROUNDING")
    assert coarse == 0 or round(coarse * 1000) % step_ns == 0, (coarse, step_ns)
    assert timestamps == offers_timestamps(page)
    if timestamps:   # wall times are never asked whether they were rounded
        assert exact is None, exact
