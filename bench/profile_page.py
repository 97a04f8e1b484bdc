"""Where a training step's time goes in the page: python bench/profile_page.py [--models mlp,cnn].

Runs, through the page's code panel (so in the worker, under Pyodide), one MNIST training step of
bench/page_mnist.py's setup (batch 128, Adam) three ways after warm-up:
  - as is, synced at the end: the step's wall time;
  - counting the time spent in the bridge's submit (encoding the queued dispatches in JS) and in
    waiting for the GPU; the rest is Python (autograd, ops, queueing) and the readback;
  - with a flush and a wait after every dispatch: each kernel's own time, summed by kernel and
    shape, less a near-empty dispatch's round trip (measured first).
"""
import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from e2e.browser import CHROMIUM, CHROMIUM_ARGS, local_only, serve_in_thread, wait_for, web_module

from playwright.sync_api import sync_playwright

PROFILE_SCRIPT = """
import collections, json, random, time
import webgrad as wg
from webgrad import nn
import webgrad.nn.functional as F

def profile(name, batch=128, warmup=3):
    runtime = wg.get_backend("webgpu").runtime
    driver = runtime.driver
    wg.manual_seed(0)
    rng = random.Random(0)
    x = wg.rand(batch, 1, 28, 28, device="webgpu")
    y = wg.tensor([rng.randrange(10) for _ in range(batch)], dtype=wg.int32, device="webgpu")
    model = nn.MODELS[name](device="webgpu")
    opt = wg.optim.Adam(model.parameters(), lr=1e-3)
    def step():
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    for _ in range(warmup):
        step().item()

    # 1. the step as it runs
    start = time.perf_counter()
    step().item()
    wall = time.perf_counter() - start

    # 2. split: JS submit, GPU wait (sync and readback), the rest
    spent = collections.Counter()
    counts = collections.Counter()
    def timed(kind, fn):
        def wrapper(*args):
            t = time.perf_counter()
            try:
                return fn(*args)
            finally:
                spent[kind] += time.perf_counter() - t
                counts[kind] += 1
        return wrapper
    submit, read, sync = driver.submit, driver.read_buffers, driver.sync
    driver.submit, driver.read_buffers, driver.sync = timed("submit", submit), timed("wait", read), timed("wait", sync)
    dispatches = []
    dispatch = runtime.dispatch
    def counting(pipeline, storages, words, groups, *args, **kwargs):
        dispatches.append(pipeline)
        return dispatch(pipeline, storages, words, groups, *args, **kwargs)
    runtime.dispatch = counting
    start = time.perf_counter()
    step().item()
    split_wall = time.perf_counter() - start
    driver.submit, driver.read_buffers, driver.sync = submit, read, sync

    # 3. each dispatch alone
    names = {handle: key for key, handle in runtime._pipelines.items()}
    def alone(pipeline, storages, words, groups, *args, **kwargs):
        runtime.flush()
        driver.sync()
        t = time.perf_counter()
        dispatch(pipeline, storages, words, groups, *args, **kwargs)
        runtime.flush()
        driver.sync()
        kernels.append((names.get(pipeline, pipeline), tuple(s.nbytes // 4 for s in storages),
                        runtime._grid(groups), time.perf_counter() - t))
    kernels = []
    runtime.dispatch = alone
    step().item()
    runtime.dispatch = dispatch
    # a near-empty dispatch's round trip: the smallest elementwise-sized job's time, repeated
    empty = wg.zeros(1, device="webgpu")
    runtime.flush(); driver.sync()
    t = time.perf_counter()
    for _ in range(20):
        empty = empty + 1
        runtime.flush(); driver.sync()
    round_trip = (time.perf_counter() - t) / 20
    print("PROFILE", json.dumps({"model": name, "wall": wall, "split_wall": split_wall, "spent": spent,
                                 "counts": counts, "dispatches": len(dispatches), "round_trip": round_trip,
                                 "kernels": [(str(k), list(s), list(g), dt) for k, s, g, dt in kernels]}))
"""


def report(p):
    ms = lambda s: f"{1000 * s:8.1f} ms"  # noqa: E731
    print(f"\n== {p['model']}: one training step, batch 128, Adam: {ms(p['wall'])} ({p['dispatches']} dispatches)")
    other = p["split_wall"] - sum(p["spent"].values())
    print(f"  split run {ms(p['split_wall'])}: JS submit {ms(p['spent'].get('submit', 0))} "
          f"({p['counts'].get('submit', 0)} calls), GPU wait {ms(p['spent'].get('wait', 0))} "
          f"({p['counts'].get('wait', 0)} calls), Python and the rest {ms(other)}")
    rt = p["round_trip"]
    kernels = p["kernels"]
    total = sum(dt for *_, dt in kernels)
    print(f"  each dispatch alone: {ms(total)} in all; a near-empty dispatch's round trip {ms(rt)} "
          f"(x{len(kernels)} = {ms(rt * len(kernels))}); kernel time less round trips {ms(total - rt * len(kernels))}")
    by_kernel, by_shape = {}, {}
    for key, sizes, grid, dt in kernels:
        family = key.split("'")[1] if "'" in key else key
        by_kernel.setdefault(family, [0, 0.0])
        by_kernel[family][0] += 1
        by_kernel[family][1] += max(0.0, dt - rt)
        shape = (key, tuple(sizes), tuple(grid))
        by_shape.setdefault(shape, [0, 0.0])
        by_shape[shape][0] += 1
        by_shape[shape][1] += max(0.0, dt - rt)
    print("  by shader (less round trips):")
    for family, (n, dt) in sorted(by_kernel.items(), key=lambda kv: -kv[1][1]):
        print(f"    {family:24s} {n:4d} dispatches {ms(dt)}")
    print("  slowest dispatches (kernel key; buffer sizes in words; grid):")
    for (key, sizes, grid), (n, dt) in sorted(by_shape.items(), key=lambda kv: -kv[1][1])[:12]:
        print(f"    {ms(dt)}  x{n}  {key[:70]}  {list(sizes)}  {list(grid)}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mlp,cnn")
    parser.add_argument("--setup", default="", help="Python run in the page before profiling (as bench/page_mnist.py's)")
    args = parser.parse_args()
    site = web_module("build").build(tempfile.mkdtemp(prefix="webgrad-site-"))
    server, url = serve_in_thread(site)
    leaks = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context()
        local_only(context, leaks)
        page = context.new_page()
        page.goto(url)
        wait_for(page, "() => !document.querySelector('[data-testid=run-code]').disabled", 120)
        for name in args.models.split(","):
            page.fill("[data-testid=code]", PROFILE_SCRIPT + args.setup + f"\nprofile({name!r})\n")
            page.click("[data-testid=run-code]")
            wait_for(page, "() => /PROFILE|Error/.test(document.querySelector('[data-testid=output]').textContent)",
                       600)
            output = page.text_content("[data-testid=output]")
            if "PROFILE" not in output:
                raise SystemExit(f"profiling {name} failed in the page:\n{output}")
            report(json.loads(output.split("PROFILE", 1)[1].splitlines()[0]))
        browser.close()
    server.shutdown()
    if leaks:
        raise SystemExit(f"the page tried to reach beyond localhost: {leaks}")


if __name__ == "__main__":
    main()
