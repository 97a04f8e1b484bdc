"""The playground page in headless Chromium, next to the same network natively.

Prints, in one run:
  - seconds from opening the page to its first frame (Pyodide, the wheel, the GPU, kernels), and
    to the first training step after pressing Play;
  - XOR training steps per second (the page's default script for XOR: 2-8-8-2 tanh MLP, Adam,
    batch 16): in the page through its Run button, and natively on webgpu (wgpu-py) and cpu,
    running the very same script text; plus the page's Play rate, which also draws frames.
Each for the page's "Steps run" settings (eagerly, replayed by wg.jit): the script the page writes for each.
Usage: python bench/page.py [--steps 200] [--play-seconds 10] [--stepping eager,replayed] [--browser PATH]
  [--site FOLDER]
"""
import argparse
import os
import sys
import tempfile
import time

from playwright.sync_api import sync_playwright

import webgrad as wg

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from e2e.browser import CHROMIUM, CHROMIUM_ARGS, code_text, serve_in_thread, wait_for, web_module
XOR = "#dataset=xor&noise=0&ratio=50&batch=16&hidden=8,8&activation=tanh&lr=0.03&optimizer=adam&l2=0&seed=1"
TIMING = """
import time
for _ in range(20):       # warm-up: compile the kernels, fill the buffer pool
    train_step()
train_step().item()
start = time.perf_counter()
for _ in range({steps}):
    loss = train_step()
loss.item()               # wait for the GPU
print("STEPS_PER_S", {steps} / (time.perf_counter() - start))
"""


def steps_per_s_natively(source, device):
    out = {}
    exec(compile(source.replace('device = "webgpu"', f'device = "{device}"'), "train.py", "exec"),
         {"__name__": "bench", "print": lambda tag, value: out.setdefault(tag, value)})
    return out["STEPS_PER_S"]


def in_page(browser, url, steps, play_seconds):
    """The page at url: (first frame s, first step s, adapter, Play's steps/s, the timing script, Run's steps/s)."""
    page = browser.new_page()
    start = time.perf_counter()
    page.goto(url)
    wait_for(page, "document.querySelector('[data-testid=accuracy]').textContent !== '–'", 120)
    first_frame = time.perf_counter() - start
    page.click("[data-testid=train]")
    wait_for(page, "Number(document.querySelector('[data-testid=step-count]').textContent) >= 1", 60)
    first_step = time.perf_counter() - start
    adapter = page.text_content("[data-testid=adapter]")

    # Play rate: steps per second including the frames (one batched readback each).
    begin_steps, begin = int(page.text_content("[data-testid=step-count]")), time.perf_counter()
    page.wait_for_timeout(play_seconds * 1000)
    play_rate = (int(page.text_content("[data-testid=step-count]")) - begin_steps) / (time.perf_counter() - begin)
    page.click("[data-testid=pause]")
    wait_for(page, "document.querySelector('[data-testid=status]').textContent === 'Paused'", 30)

    # The page's own script for these settings, less its __main__ block, plus the timing loop.
    script = code_text(page).split('if __name__ == "__main__":')[0]
    source = script + TIMING.format(steps=steps)
    page.fill("[data-testid=code]", source)
    page.click("[data-testid=run-code]")
    wait_for(page, "document.querySelector('[data-testid=output]').textContent.includes('STEPS_PER_S')"
                   " || document.querySelector('[data-testid=status]').textContent.includes('error')", 300)
    output = page.text_content("[data-testid=output]")
    page.close()
    if "STEPS_PER_S" not in output:
        raise SystemExit(f"the timing script failed in the page:\n{output}")
    return first_frame, first_step, adapter, play_rate, source, float(output.split("STEPS_PER_S", 1)[1].split()[0])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--play-seconds", type=float, default=10)
    parser.add_argument("--stepping", default="eager,replayed", help="the page's Steps run settings to measure")
    parser.add_argument("--browser", default=CHROMIUM, help="the Chromium to launch (default: Debian's)")
    parser.add_argument("--site", help="a site built beforehand (web/build.py), where web/node_modules is missing")
    args = parser.parse_args()

    site = args.site or web_module("build").build(tempfile.mkdtemp(prefix="webgrad-site-"))
    server, url = serve_in_thread(site)
    results = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=args.browser, args=CHROMIUM_ARGS)
        for stepping in args.stepping.split(","):
            results[stepping] = in_page(browser, f"{url}{XOR}&stepping={stepping}", args.steps, args.play_seconds)
        browser.close()
    server.shutdown()

    native_adapter = wg.get_backend("webgpu").info["name"]
    print(f"XOR 2-8-8-2 tanh MLP, Adam, batch 16; training steps per second, {args.steps} steps after warm-up:")
    for stepping, (first_frame, first_step, adapter, play_rate, source, page_rate) in results.items():
        native = steps_per_s_natively(source, "webgpu")
        cpu = steps_per_s_natively(source, "cpu")
        print(f"steps run {stepping}: page load to first frame {first_frame:.2f} s, to the first training step "
              f"{first_step:.2f} s (Play pressed as soon as it could be)")
        rows = [(f"page, Run button ({adapter})", page_rate, ""),
                (f"native webgpu ({native_adapter})", native, f"page / native = {page_rate / native:.2f}"),
                ("native cpu (NumPy)", cpu, f"page / cpu = {page_rate / cpu:.2f}"),
                ("page, Play (a frame per chunk of steps)", play_rate, "")]
        for label, rate, ratio in rows:
            print(f"  {label:<48} {rate:8.1f}   {ratio}")


if __name__ == "__main__":
    main()
