"""The playground page's wait from Play to the first training step, in headless Chromium.

Prints, for the toy tab's default script (XOR unless --hash says otherwise), in one run:
  - seconds from opening the page to its first frame, and from pressing Play (--delay seconds
    after the first frame) to the first step shown (the step counter turning 1), measured from
    the test driver, polled every 10 ms;
  - the pipeline compiles the bridge made (web/bridge.js records each as a User Timing measure,
    "webgrad compile <kernel>"), by the time Play is pressed and after it: how many, the sum of their
    durations, and the span from the first start to the last end (compiles overlap when started
    ahead and in parallel).
The peer is the first frame's own wait in the same run; with --tiled, also the same page with every
product on the tiled kernels (a copy of the site whose wheel sets MATMUL_SMALL_MACS to 0, as before
shaders/matmul_small.wgsl), its runs interleaved with the page's.
Usage: python bench/page_first_step.py [--runs 3] [--delay 1] [--tiled]
"""
import argparse
import os
import re
import shutil
import sys
import tempfile
import time
import zipfile

from playwright.sync_api import sync_playwright

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from e2e.browser import CHROMIUM, CHROMIUM_ARGS, serve_in_thread, wait_for, web_module
XOR = "#dataset=xor&noise=0&ratio=50&batch=16&hidden=8,8&activation=tanh&lr=0.03&optimizer=adam&l2=0&seed=1"
FIRST_FRAME = "document.querySelector('[data-testid=accuracy]').textContent !== '–'"
FIRST_STEP = "Number(document.querySelector('[data-testid=step-count]').textContent) >= 1"
COMPILES = ("performance.getEntriesByType('measure').filter((m) => m.name.startsWith('webgrad compile'))"
            ".map((m) => [m.name.slice(16), m.startTime, m.duration])")


def compiles_summary(compiles):
    if not compiles:
        return "0 compiles"
    total = sum(duration for _, _, duration in compiles)
    span = max(start + duration for _, start, duration in compiles) - min(start for _, start, _ in compiles)
    return f"{len(compiles)} compiles, {total / 1000:.2f} s summed, {span / 1000:.2f} s span"


def tiled_only_site(site):
    """A copy of the built site whose wheel routes no product to the small kernel."""
    copy = site.rstrip("/") + "-tiled"
    shutil.copytree(site, copy)
    wheel, name = os.path.join(copy, "webgrad.whl"), "webgrad/backends/webgpu/kernels/matmul.py"
    with zipfile.ZipFile(wheel) as z:
        files = {info.filename: z.read(info) for info in z.infolist()}
    source, count = re.subn(rb"^MATMUL_SMALL_MACS = .*$", b"MATMUL_SMALL_MACS = 0", files[name], flags=re.M)
    if count != 1:
        raise RuntimeError(f"{name}: no MATMUL_SMALL_MACS line to set")
    files[name] = source   # (its RECORD hash goes stale: the page unpacks the wheel unchecked)
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
        for filename, data in files.items():
            z.writestr(filename, data)
    return copy


def one_run(browser, url, delay_s):
    page = browser.new_page()
    start = time.perf_counter()
    page.goto(url)
    wait_for(page, FIRST_FRAME, 180)
    first_frame = time.perf_counter() - start
    page.wait_for_timeout(delay_s * 1000)   # what a person takes to press Play after seeing the page
    [worker] = page.workers
    before = worker.evaluate(COMPILES)
    clicked = time.perf_counter()
    page.click("[data-testid=train]")
    while not page.evaluate(FIRST_STEP):
        if time.perf_counter() - clicked > 120:
            raise TimeoutError("no training step 120 s after Play")
        time.sleep(0.01)
    first_step = time.perf_counter() - clicked
    after = worker.evaluate(COMPILES)[len(before):]
    page.close()
    return first_frame, first_step, before, after


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--hash", default=XOR, help="the page's settings (its URL's #...)")
    parser.add_argument("--delay", type=float, default=1, help="seconds from the first frame to Play")
    parser.add_argument("--list", action="store_true", help="name every compile after Play")
    parser.add_argument("--tiled", action="store_true", help="interleave runs of the page with every product tiled")
    args = parser.parse_args()

    site = web_module("build").build(tempfile.mkdtemp(prefix="webgrad-site-"))
    sites = {"page": site, **({"tiled": tiled_only_site(site)} if args.tiled else {})}
    servers = {name: serve_in_thread(folder) for name, folder in sites.items()}
    waits = {name: [] for name in sites}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for run in range(args.runs):   # a fresh page each run: nothing compiled yet
            for name, (_, url) in servers.items():
                first_frame, first_step, before, after = one_run(browser, url + args.hash, args.delay)
                waits[name].append(first_step)
                print(f"run {run + 1} {name}: open -> first frame {first_frame:.2f} s ({compiles_summary(before)}); "
                      f"Play -> first step {first_step:.2f} s ({compiles_summary(after)} after Play); "
                      f"ratio Play wait / first-frame wait {first_step / first_frame:.3f}")
                if args.list:
                    for kernel, _, duration in after:
                        print(f"    {duration:8.1f} ms  {kernel}")
        browser.close()
    for server, _ in servers.values():
        server.shutdown()
    if args.tiled:
        page, tiled = sorted(waits["page"])[args.runs // 2], sorted(waits["tiled"])[args.runs // 2]
        print(f"median Play -> first step: {page:.2f} s, every product tiled {tiled:.2f} s, ratio {page / tiled:.3f}")


if __name__ == "__main__":
    main()
