"""Training in the page, next to native webgrad on the same GPU and TF.js 4.22 (WebGPU and WebGL
backends) in the same browser.

Prints, in one run, training steps per second of webgrad's nn.mnist_mlp (784-128-10) and
nn.mnist_cnn (batch 128, Adam, cross-entropy), and of the language-model tab's page-size GPT
(2 layers, 4 heads, 128 wide, block 64, batch 32, AdamW), in headless Chromium (Debian's, or the
one --browser names: ../shared/gpu-browser's launcher puts it on the lent NVIDIA GPU):
  - webgrad in the playground page: the script goes through the page's code panel (Run), so it
    runs in the page's worker under Pyodide as a user's would; eagerly and replayed with wg.jit;
  - the same script natively (wgpu-py) in this process, on this machine's adapter;
  - the MNIST models in TF.js 4.22 (bench/tfjs/, served next to its npm files from
    web/node_modules) on its webgpu and webgl backends (TF.js has no GPT here);
and the ratios: the page's time over native webgrad's (1.0: no cost for being in the page), and
webgrad / TF.js-webgpu and webgrad / TF.js-webgl (above 1: webgrad is faster).
Both sides train on a pool of 4 random batches of MNIST's shape made on the device beforehand;
3 warm-up steps, then one synced step sizes a run of about --seconds, which ends with a readback
of the loss, so queued GPU work is counted. For webgrad, in the page and natively, the table also
splits a step's milliseconds: wall (the run over its steps), host (the steps' Python: ops or the
replay, queueing and submitting; the GPU runs behind it) and GPU (5 more steps under webgrad.profiler,
each dispatch alone: timestamp queries where the adapter has them, else each dispatch's wall time,
marked ~). Where host is near wall the step is bound by the host, where GPU is, by the GPU.
Nothing may load from beyond localhost.
Usage: python bench/page_mnist.py [--models mlp,cnn,gpt] [--seconds 5] [--browser PATH] [--no-native]
  [--no-peer] [--setup PYTHON ...] [--rounds N]
--setup: Python run in the page before each measurement (a tiling to try, say); given more than once,
an A/B: each setup in a fresh page in turn, then TF.js, --rounds times; the table shows each one's best.
On the lent GPU, where web/node_modules is not: build the site and --make-peer-site here, carry
both, and pass --site and --peer-site there.
"""
import argparse
import contextlib
import io
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

def make_batches(name, pool):
    rng = random.Random(0)
    if name == "gpt":   # (x, y): next-character targets of random token windows
        ids = [wg.tensor([[rng.randrange(65) for _ in range(65)] for _ in range(32)], dtype=wg.int32,
                         device="webgpu") for _ in range(pool)]
        return [(w[:, :-1].contiguous(), w[:, 1:].contiguous()) for w in ids]
    return [(wg.rand(128, 1, 28, 28, device="webgpu"),
             wg.tensor([rng.randrange(10) for _ in range(128)], dtype=wg.int32, device="webgpu"))
            for _ in range(pool)]

def make_model(name):
    if name == "gpt":
        model = nn.GPT(nn.GPTConfig(block_size=64, vocab_size=65, n_layer=2, n_head=4, n_embd=128)).to("webgpu")
        return (lambda x, y: model(x, y)[1]), wg.optim.AdamW(model.parameters(), lr=1e-3)
    model = nn.MODELS[name](device="webgpu")
    return (lambda x, y: F.cross_entropy(model(x), y)), wg.optim.Adam(model.parameters(), lr=1e-3)

PROFILED = 5   # steps profiled after the timed ones

def measure(name, jit, pool=4, warmup=3, seconds=5.0, max_steps=200):
    wg.manual_seed(0)
    batches = make_batches(name, pool)
    loss_of, opt = make_model(name)

    def train(x, y):
        loss = loss_of(x, y)
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

    start = time.perf_counter()
    for i in range(warmup):    # compiles the kernels, fills the buffer pool (and records, with jit)
        step().item()
        if i == 0:
            first = time.perf_counter() - start   # the first step, with its compiles
    start = time.perf_counter()
    step().item()
    steps = max(2, min(max_steps, round(seconds / (time.perf_counter() - start))))
    start = host = time.perf_counter()
    for _ in range(steps):
        loss = step()
    host = time.perf_counter() - host   # the steps' Python, queueing and submits (the GPU runs behind)
    value = loss.item()        # waits for the GPU
    elapsed = time.perf_counter() - start
    with wg.profiler.profile() as prof:   # each dispatch alone: the GPU's own time a step
        for _ in range(PROFILED):
            step()
    print("RESULT", json.dumps({"steps": steps, "seconds": elapsed, "loss": value, "first": first,
                                "host": host / steps, "gpu": prof.total_us() / 1e6 / PROFILED,
                                "timestamps": prof.measure == wg.profiler.TIMESTAMPS}))
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


def webgrad_in_page(browser, url, leaks, models, seconds, setup=""):
    """{(model, 'eager' | 'jit'): result} from the page's code panel, each run after the Python in
    setup (e.g. a tiling to try); and the page's adapter name."""
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
            page.fill("[data-testid=code]", WEBGRAD_SCRIPT + setup + f"\nmeasure({name!r}, {mode == 'jit'}, seconds={seconds})\n")
            page.click("[data-testid=run-code]")
            wait_for(page, "() => /RESULT|Error/.test(document.querySelector('[data-testid=output]').textContent)"
                             " || /error/i.test(document.querySelector('[data-testid=status]').textContent)", 600)
            output = page.text_content("[data-testid=output]")
            if "RESULT" not in output:
                raise SystemExit(f"webgrad's {name} ({mode}) failed in the page:\n{output}")
            results[name, mode] = json.loads(output.split("RESULT", 1)[1].splitlines()[0])
            print(f"  webgrad {name} {mode}: {rate(results[name, mode]):.2f} steps/s, loss {results[name, mode]['loss']:.4f}"
                  f" (first step {results[name, mode]['first']:.2f} s, with its compiles)", flush=True)
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


def webgrad_natively(models, seconds):
    """{(model, 'eager' | 'jit'): result} of the same script run here, natively; and the adapter."""
    namespace = {}
    exec(WEBGRAD_SCRIPT, namespace)
    results = {}
    for name in models:
        for mode in ("eager", "jit"):
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                namespace["measure"](name, mode == "jit", seconds=seconds)
            results[name, mode] = json.loads(printed.getvalue().split("RESULT", 1)[1].splitlines()[0])
            print(f"  native webgrad {name} {mode}: {rate(results[name, mode]):.2f} steps/s", flush=True)
    return results, namespace["wg"].get_backend("webgpu").runtime.driver.info["name"]


def rate(result):
    return result["steps"] / result["seconds"]


# what one step trains on: images (MNIST, batch 128) or tokens (the GPT, 32 x 64)
ITEMS = {"mlp": (128, "images"), "cnn": (128, "images"), "gpt": (32 * 64, "tokens")}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mlp,cnn,gpt", help="comma-separated: mlp,cnn,gpt")
    parser.add_argument("--seconds", type=float, default=5.0, help="time each measurement for about this long")
    parser.add_argument("--browser", default=CHROMIUM, help="the Chromium to launch (default: Debian's)")
    parser.add_argument("--no-native", action="store_true", help="skip native webgrad (no wgpu-py here)")
    parser.add_argument("--setup", action="append", default=[], help="Python run in the page (not natively) before "
                        "each measurement, e.g. a software tiling to try: 'from webgrad.backends.webgpu.kernels import "
                        "matmul_tuning as t; t._MATMUL_SOFTWARE = ((0, t.MatmulTiles(8, 8, 4, 4, 16)),)'; again for an A/B")
    parser.add_argument("--rounds", type=int, default=1, help="measure the setups and TF.js in turn this many times")
    parser.add_argument("--no-peer", action="store_true", help="skip TF.js")
    parser.add_argument("--site", help="a site built beforehand (web/build.py), where web/node_modules is missing")
    parser.add_argument("--peer-site", help="peer_site()'s folder made beforehand (--make-peer-site)")
    parser.add_argument("--make-peer-site", metavar="FOLDER", help="only copy the peer's files into FOLDER")
    args = parser.parse_args()
    models = args.models.split(",")
    setups = args.setup or [""]
    ours, peer = {}, {}   # (setup's index, model, mode) and (model, backend) -> the best result of the rounds
    peer_models = [] if args.no_peer else [m for m in models if m != "gpt"]

    if args.make_peer_site:
        shutil.copytree(peer_site(), args.make_peer_site, dirs_exist_ok=True)
        return
    site = args.site or web_module("build").build(tempfile.mkdtemp(prefix="webgrad-site-"))
    site_server, site_url = serve_in_thread(site)
    peer_server, peer_url = serve_in_thread(args.peer_site or peer_site()) if peer_models else (None, None)
    leaks = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=args.browser, args=CHROMIUM_ARGS)
            print(f"Chromium {browser.version}, headless ({args.browser})", flush=True)
            for round_ in range(args.rounds):
                for i, setup in enumerate(setups):
                    print(f"round {round_ + 1}, setup {i + 1}: {setup or '(none)'}", flush=True)
                    results, adapter = webgrad_in_page(browser, site_url, leaks, models, args.seconds, setup)
                    for (name, mode), result in results.items():   # each setup's best of the rounds
                        if (i, name, mode) not in ours or rate(result) > rate(ours[i, name, mode]):
                            ours[i, name, mode] = result
                # the peer in each round too: this host's load moves every rate from minute to minute
                for key, result in (peer_in_page(browser, peer_url, leaks, peer_models, args.seconds)
                                    if peer_models else {}).items():
                    if key not in peer or rate(result) > rate(peer[key]):
                        peer[key] = result
            browser.close()
    finally:   # a blocked request can also surface as a page that never finishes: say so either way
        site_server.shutdown()
        if peer_server:
            peer_server.shutdown()
        if leaks:
            raise SystemExit(f"a page tried to reach beyond localhost: {leaks}")
    native, native_adapter = ({}, None) if args.no_native else webgrad_natively(models, args.seconds)

    print("\nTraining in the page (MNIST: batch 128, Adam, random batches of MNIST's shape; "
          "GPT: 2 layers, 4 heads, 128 wide, block 64, batch 32, AdamW)")
    print(f"webgrad's adapter in the page: {adapter}; natively: {native_adapter or 'not measured'}")
    if peer:
        version = next(iter(peer.values()))["version"]
        for backend in PEER_BACKENDS:
            print(f"TF.js {version} {backend}: {next(r['device'] for (_, b), r in peer.items() if b == backend)}")
    print(f"{'model':5s} {'runner':22s} {'steps/s':>8s} {'items/s':>9s} {'steps':>6s}   {'time / native':>13s} "
          f"{'/ TF.js-webgpu':>14s} {'/ TF.js-webgl':>14s}   ms a step: wall / host / GPU")
    for name in models:
        per_step, items = ITEMS[name]
        rows = [(f"webgrad page{f' #{i + 1}' if len(setups) > 1 else ''}, {mode}", ours[i, name, mode], mode)
                for i in range(len(setups)) for mode in ("eager", "jit")]
        rows += [(f"webgrad native, {mode}", native[name, mode], None) for mode in ("eager", "jit") if native]
        rows += [(f"TF.js {backend}", peer[name, backend], None) for backend in PEER_BACKENDS if (name, backend) in peer]
        for label, result, mode in rows:
            slower = f"{rate(native[name, mode]) / rate(result):13.2f}" if mode and native else f"{'':13s}"
            ratio = " ".join(f"{rate(result) / rate(peer[name, b]):14.2f}" for b in PEER_BACKENDS
                             if (name, b) in peer) if label.startswith("webgrad") else ""
            split = "" if "host" not in result else (
                f"   {1e3 / rate(result):.3f} / {1e3 * result['host']:.3f} / "
                f"{'' if result['timestamps'] else '~'}{1e3 * result['gpu']:.3f}")
            print(f"{name:5s} {label:22s} {rate(result):8.2f} {per_step * rate(result):9.0f} {result['steps']:6d}   "
                  f"{slower} {ratio:29s}{split}")
        print(f"{'':5s} (items: {items})")


if __name__ == "__main__":
    main()
