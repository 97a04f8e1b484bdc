"""MNIST training in the page, next to TF.js 4.22 (WebGPU and WebGL backends) in the same browser.

Prints, in one run, training steps and images per second of webgrad's nn.mnist_mlp (784-128-10)
and nn.mnist_cnn (batch 128, Adam, cross-entropy) in Debian's headless Chromium:
  - webgrad in the playground page: the script goes through the page's code panel (Run), so it
    runs in the page's worker under Pyodide as a user's would; eagerly and replayed with wg.jit;
  - the same models in TF.js 4.22 (bench/tfjs/, served next to its npm files from web/node_modules)
    on its webgpu and webgl backends;
and the ratios webgrad / TF.js-webgpu and webgrad / TF.js-webgl (above 1: webgrad is faster).
Both sides train on a pool of 4 random batches of MNIST's shape made on the device beforehand;
3 warm-up steps, then one synced step sizes a run of about --seconds, which ends with a readback
of the loss, so queued GPU work is counted. Nothing may load from beyond localhost.
Usage: python bench/page_mnist.py [--models mlp,cnn] [--seconds 5]
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

from playwright.sync_api import sync_playwright

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from e2e.browser import CHROMIUM, CHROMIUM_ARGS, ROOT, local_only, serve_in_thread, wait_for, web_module
TFJS_FILES = ("tfjs/dist/tf.es2017.min.js", "tfjs-backend-webgpu/dist/tf-backend-webgpu.es2017.min.js")
PEER_BACKENDS = ("webgpu", "webgl")

# Run through the page's code panel, with a call of measure() appended; the same loop as
# bench/tfjs/bench.js. Prints one RESULT line.
WEBGRAD_SCRIPT = """
import json, random, time
import webgrad as wg
from webgrad import nn
import webgrad.nn.functional as F

def measure(name, jit, batch=128, pool=4, warmup=3, seconds=5.0, max_steps=200):
    wg.manual_seed(0)
    rng = random.Random(0)
    batches = [(wg.rand(batch, 1, 28, 28, device="webgpu"),
                wg.tensor([rng.randrange(10) for _ in range(batch)], dtype=wg.int32, device="webgpu"))
               for _ in range(pool)]
    model = nn.MODELS[name](device="webgpu")
    opt = wg.optim.Adam(model.parameters(), lr=1e-3)

    def train(x, y):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    run = wg.jit(train) if jit else train
    count = 0
    def step():
        nonlocal count
        count += 1
        return run(*batches[count % pool])

    for _ in range(warmup):    # compiles the kernels, fills the buffer pool (and records, with jit)
        step().item()
    start = time.perf_counter()
    step().item()
    steps = max(2, min(max_steps, round(seconds / (time.perf_counter() - start))))
    start = time.perf_counter()
    for _ in range(steps):
        loss = step()
    value = loss.item()        # waits for the GPU
    elapsed = time.perf_counter() - start
    print("RESULT", json.dumps({"steps": steps, "seconds": elapsed, "loss": value}))
"""


def peer_site():
    """A folder with bench/tfjs/ and the peer's two browser bundles from web/node_modules."""
    folder = tempfile.mkdtemp(prefix="webgrad-peer-")
    shutil.copytree(os.path.join(ROOT, "bench", "tfjs"), folder, dirs_exist_ok=True)
    for f in TFJS_FILES:
        src = os.path.join(ROOT, "web", "node_modules", "@tensorflow", f)
        if not os.path.isfile(src):
            raise SystemExit(f"{src} is missing: run `npm ci` in web/ (make setup does)")
        shutil.copyfile(src, os.path.join(folder, os.path.basename(f)))
    return folder


def webgrad_in_page(browser, url, leaks, models, seconds):
    """{(model, 'eager' | 'jit'): result} from the page's code panel; and the page's adapter name."""
    context = browser.new_context()
    local_only(context, leaks)
    page = context.new_page()
    page.goto(url)
    wait_for(page, "() => !document.querySelector('[data-testid=run-code]').disabled"
                     " || /Error|No WebGPU/.test(document.querySelector('[data-testid=status]').textContent)", 120)
    adapter = page.text_content("[data-testid=adapter]")
    results = {}
    for name in models:
        for mode in ("eager", "jit"):
            page.fill("[data-testid=code]", WEBGRAD_SCRIPT + f"measure({name!r}, {mode == 'jit'}, seconds={seconds})\n")
            page.click("[data-testid=run-code]")
            wait_for(page, "() => /RESULT|Error/.test(document.querySelector('[data-testid=output]').textContent)"
                             " || /error/i.test(document.querySelector('[data-testid=status]').textContent)", 600)
            output = page.text_content("[data-testid=output]")
            if "RESULT" not in output:
                raise SystemExit(f"webgrad's {name} ({mode}) failed in the page:\n{output}")
            results[name, mode] = json.loads(output.split("RESULT", 1)[1].splitlines()[0])
            print(f"  webgrad {name} {mode}: {rate(results[name, mode]):.2f} steps/s", flush=True)
    context.close()
    return results, adapter


def peer_in_page(browser, url, leaks, models, seconds):
    """{(model, backend): result} from bench/tfjs/, a fresh page for each backend."""
    results = {}
    for backend in PEER_BACKENDS:
        context = browser.new_context()
        local_only(context, leaks)
        page = context.new_page()
        page.goto(url)
        for name in models:
            results[name, backend] = page.evaluate("([b, n, s]) => measureTraining(b, n, {seconds: s})",
                                                   [backend, name, seconds])
            if results[name, backend]["backend"] != backend:
                raise SystemExit(f"TF.js ran on {results[name, backend]['backend']}, not {backend}")
            print(f"  TF.js {name} {backend}: {rate(results[name, backend]):.2f} steps/s", flush=True)
        context.close()
    return results


def rate(result):
    return result["steps"] / result["seconds"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mlp,cnn", help="comma-separated: mlp,cnn")
    parser.add_argument("--seconds", type=float, default=5.0, help="time each measurement for about this long")
    args = parser.parse_args()
    models = args.models.split(",")

    site = web_module("build").build(tempfile.mkdtemp(prefix="webgrad-site-"))
    site_server, site_url = serve_in_thread(site)
    peer_server, peer_url = serve_in_thread(peer_site())
    leaks = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            print(f"Chromium {browser.version}, headless", flush=True)
            ours, adapter = webgrad_in_page(browser, site_url, leaks, models, args.seconds)
            peer = peer_in_page(browser, peer_url, leaks, models, args.seconds)
            browser.close()
    finally:   # a blocked request can also surface as a page that never finishes: say so either way
        site_server.shutdown()
        peer_server.shutdown()
        if leaks:
            raise SystemExit(f"a page tried to reach beyond localhost: {leaks}")

    version = next(iter(peer.values()))["version"]
    print("\nMNIST training in the page, batch 128, Adam (random batches of MNIST's shape)")
    print(f"webgrad's adapter: {adapter}")
    for backend in PEER_BACKENDS:
        print(f"TF.js {version} {backend}: {next(r['device'] for (_, b), r in peer.items() if b == backend)}")
    print(f"{'model':5s} {'runner':22s} {'steps/s':>8s} {'images/s':>9s} {'steps':>6s}   "
          f"{'/ TF.js-webgpu':>14s} {'/ TF.js-webgl':>14s}")
    for name in models:
        rows = [(f"webgrad, {mode}", ours[name, mode], True) for mode in ("eager", "jit")]
        rows += [(f"TF.js {backend}", peer[name, backend], False) for backend in PEER_BACKENDS]
        for label, result, ratios in rows:
            ratio = " ".join(f"{rate(result) / rate(peer[name, b]):14.2f}" for b in PEER_BACKENDS) if ratios else ""
            print(f"{name:5s} {label:22s} {rate(result):8.2f} {128 * rate(result):9.0f} {result['steps']:6d}   {ratio}")


if __name__ == "__main__":
    main()
