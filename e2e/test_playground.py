"""The playground page end to end, in headless Chromium (WebGPU on SwiftShader here)."""
import os

from e2e.browser import code_text, code_text_js
from e2e.conftest import ARTIFACTS, offers_timestamps, pause, printed_json, steps, text, wait_for


XOR = "#dataset=xor&noise=0&ratio=50&batch=16&hidden=8,8&activation=tanh&lr=0.03&optimizer=adam&l2=0&seed=1"
SPIRALS = "#dataset=spirals&noise=0&ratio=50&batch=32&hidden=32,32&activation=relu&lr=0.01&optimizer=adam&l2=0&seed=1"


# randn is Box-Muller, sqrt(-2 log(1 - u1)): WGSL only bounds log's error near 1 absolutely (2^-21),
# and the square root turns that into ~1e-4 relative differences between GPUs for small u1.
PARITY_TOLERANCE = {"randn": 1e-3}


def accuracy_at_least(value):
    return f"Number(document.querySelector('[data-testid=accuracy]').textContent) >= {value}"


def test_page_loads_and_shows_the_adapter(page, open_playground):
    open_playground()
    adapter = text(page, "adapter")
    assert adapter not in ("", "—", "none")
    assert "swiftshader" in adapter.lower() or "software" not in adapter  # a real GPU, or SwiftShader saying so
    assert steps(page) == 0
    assert 0 <= float(text(page, "accuracy")) <= 1
    assert "import webgrad as wg" in code_text(page)
    assert page.is_enabled("[data-testid=train]") and page.is_disabled("[data-testid=pause]")
    # a link without "stepping": steps run as suits the adapter (step_settings.js), and the script says so
    stepping = "eager" if adapter.endswith("(software)") else "replayed"
    assert page.input_value("[data-testid=stepping]") == stepping
    assert ("@wg.jit" in code_text(page)) == (stepping == "replayed")


def first_screen(page):
    """Where Play and the output plot are, in CSS px of the page ([top, bottom] each), and on how many
    lines the score's label is written."""
    return page.evaluate("""() => {
        const at = (selector) => { const r = document.querySelector(selector).getBoundingClientRect();
                                   return [r.top + scrollY, r.bottom + scrollY]; };
        const text = document.createRange();
        text.selectNodeContents(document.querySelector('#score-label'));
        return {play: at('[data-testid=train]'), plot: at('#boundary'),
                lines: new Set([...text.getClientRects()].map((r) => Math.round(r.top))).size}; }""")


def test_the_first_screen_shows_play_and_the_plot_on_a_laptop_and_a_phone(page, open_playground):
    """As in the TensorFlow Playground, the picture is the point: on a phone too, the page opens on
    Play and (at least the top half of) the plot, and the score's label, "(untrained)" and all,
    takes one line. Screenshots of the first screen at both sizes."""
    for width, height in ((1440, 900), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        open_playground("#dataset=xor")
        for regression in (False, True):
            if regression:
                page.select_option("[data-testid=problem]", "regression")
                wait_for(page, "document.querySelector('#score-label').textContent === 'Test R² (untrained)'", 30)
            else:
                assert page.text_content("#score-label") == "Test accuracy (untrained)"
                os.makedirs(ARTIFACTS, exist_ok=True)
                page.screenshot(path=os.path.join(ARTIFACTS, f"playground-first-screen-{width}.png"))
            shown = first_screen(page)
            assert shown["play"][1] <= height, (width, shown)
            top, bottom = shown["plot"]
            assert top + (bottom - top) / 2 <= height, f"the plot's top half is below the first screen: {width}, {shown}"
            assert shown["lines"] == 1, f"the score's label wraps at {width} px: {shown}"
        assert page.evaluate("document.documentElement.scrollWidth <= innerWidth"), f"scrolls sideways at {width} px"
        page.goto("about:blank")


def test_xor_trains_to_full_test_accuracy(page, open_playground, screenshot):
    open_playground(XOR)
    page.click("[data-testid=train]")
    wait_for(page, accuracy_at_least(1.0), 45)
    assert steps(page) <= 1500, "XOR should reach test accuracy 1.0 within 1500 steps"
    assert float(text(page, "loss")) < 0.1
    pause(page)
    screenshot("xor-trained.png")


def test_spirals_improve_markedly(page, open_playground, screenshot):
    open_playground(SPIRALS)
    start_loss = float(text(page, "test-loss"))
    start_accuracy = float(text(page, "accuracy"))
    page.click("[data-testid=train]")
    wait_for(page, accuracy_at_least(0.9), 45)
    pause(page)
    assert float(text(page, "test-loss")) < start_loss / 2
    assert float(text(page, "accuracy")) >= start_accuracy + 0.3
    screenshot("spirals-trained.png")


def test_pause_stops_and_reset_starts_over(page, open_playground):
    open_playground(XOR)
    page.click("[data-testid=train]")
    wait_for(page, "Number(document.querySelector('[data-testid=step-count]').textContent) >= 20", 30)
    pause(page)
    paused_at = steps(page)
    page.wait_for_timeout(1500)
    assert steps(page) == paused_at, "the step count moved while paused"
    assert page.is_enabled("[data-testid=train]")

    page.click("[data-testid=reset]")
    wait_for(page, "document.querySelector('[data-testid=step-count]').textContent === '0'", 10)
    fresh_loss = text(page, "test-loss")
    page.click("[data-testid=step]")
    wait_for(page, "document.querySelector('[data-testid=step-count]').textContent === '1'", 10)

    page.goto("about:blank")  # a fresh page with the same link starts from the same model
    open_playground(XOR)
    assert text(page, "test-loss") == fresh_loss


def test_a_link_reproduces_settings_and_run(page, open_playground):
    settings = "#dataset=spirals&noise=20&ratio=70&batch=8&hidden=6,5&activation=relu&lr=0.01&optimizer=sgd&l2=0.001&seed=7"
    open_playground(settings)
    assert page.input_value("[data-testid=dataset]") == "spirals"
    for control, value in {"noise": "20", "ratio": "70", "batch": "8", "hidden": "6, 5", "activation": "relu",
                           "lr": "0.01", "optimizer": "sgd", "l2": "0.001", "seed": "7"}.items():
        assert page.input_value(f"#{control}") == value, control
    code = code_text(page)
    for fragment in ("wg.data.spirals(", "noise=0.2", "test_ratio=0.3", "seed=7", "batch_size=8",
                     'nn.mlp([len(FEATURES), 6, 5, 2], activation="relu"', "optim.SGD(", "lr=0.01", "weight_decay=0.001"):
        assert fragment in code, fragment

    def five_steps(p):
        for _ in range(5):
            p.click("[data-testid=step]")
        wait_for(p, "document.querySelector('[data-testid=step-count]').textContent === '5'", 20)
        return [text(p, k) for k in ("loss", "test-loss", "accuracy")]

    first = five_steps(page)
    other = page.context.new_page()  # the same guarded context
    try:
        open_playground(settings, on=other)
        assert five_steps(other) == first
    finally:
        other.close()

    # and a changed control lands in the link
    page.select_option("[data-testid=dataset]", "gaussians")
    wait_for(page, "location.hash.includes('dataset=gaussians')", 5)
    assert "seed=7" in page.url and "wg.data.gaussians(" in code_text(page)


def test_edited_code_runs_and_prints(page, open_playground):
    open_playground()
    page.fill("[data-testid=code]", "import webgrad as wg\n"
                                    "x = wg.tensor([1.0, 2.0, 3.0], device='webgpu')\n"
                                    "print('sum of squares:', (x * x).sum().item())\n")
    page.click("[data-testid=run-code]")
    wait_for(page, "document.querySelector('[data-testid=output]').textContent.includes('sum of squares: 14.0')", 20)

    page.fill("[data-testid=code]", "print('before')\n1 / 0\n")
    page.click("[data-testid=run-code]")
    wait_for(page, "document.querySelector('[data-testid=output]').textContent.includes('ZeroDivisionError')", 20)
    assert "before" in text(page, "output")
    assert "error" in text(page, "status").lower()

    # the generated script runs as a script, and Play goes on from the model it trained
    page.select_option("[data-testid=dataset]", "xor")
    page.click("[data-testid=replace-code-replace]")   # the code is edited: the page asks first
    wait_for(page, f"{code_text_js()}.then((code) => code.includes('wg.data.xor('))", 5)
    page.click("[data-testid=run-code]")
    wait_for(page, "document.querySelector('[data-testid=output]').textContent.includes('step 300:')", 45)
    assert "Error" not in text(page, "status")


def test_input_says_it_cannot_read_and_a_last_partial_line_shows_with_its_run(page, open_playground):
    """No keyboard reaches Python in the page: input() raises an error that names it (not Pyodide's
    I/O error from a prompt() that workers lack), and a run's last line printed without a newline
    shows with that run, not at the start of the next one's output."""
    console_errors = []
    page.on("console", lambda m: m.type == "error" and console_errors.append(m.text))
    open_playground()
    page.fill("[data-testid=code]", "print('first line')\nprint('no newline', end='')\n")
    page.click("[data-testid=run-code]")
    wait_for(page, "document.querySelector('[data-testid=output]').textContent.includes('no newline')", 20)
    out = text(page, "output")
    assert out.startswith("first line\n") and out.endswith("\nno newline\n"), out   # between them: Play's note

    page.fill("[data-testid=code]", "import sys\nprint('stdin holds', repr(sys.stdin.read()))\nname = input('name? ')\n")
    page.click("[data-testid=run-code]")
    wait_for(page, "document.querySelector('[data-testid=output]').textContent.includes('Traceback')", 20)
    out = text(page, "output")
    assert out.startswith("stdin holds ''\n"), out
    assert 'File "train.py", line 3' in out and "EOFError: input() cannot read in this page" in out, out
    assert "no newline" not in out and "name?" not in out, out
    assert text(page, "status").startswith("Your script raised an error"), text(page, "status")
    assert not console_errors, console_errors


def test_pytorch_code_runs_as_written(page, open_playground):
    """`import torch` in a code panel gives webgrad (the worker installs webgrad.torch_alias),
    torch.profiler included: the page's driver times the dispatches with GPU timestamps where the
    adapter offers them, else each alone by wall time, and says which."""
    open_playground()
    page.fill("[data-testid=code]", "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
                                    "layer = nn.Linear(2, 3)\nx = torch.ones(4, 2)\n"
                                    "with torch.profiler.profile() as prof:\n"
                                    "    y = F.relu(layer(x))\n"
                                    "print('shape', list(y.shape), torch.tensor([1.0, 2.0]).sum().item(), x.device)\n"
                                    "print(prof.key_averages(group_by='family').table())\n")
    page.click("[data-testid=run-code]")
    wait_for(page, "/Measured|Error/.test(document.querySelector('[data-testid=output]').textContent)", 20)
    output = text(page, "output")
    assert "shape [4, 3] 3.0 webgpu" in output, output
    families = {line.split()[0] for line in output.splitlines() if line.startswith(("matmul", "map"))}
    measured = ("Measured: GPU time (timestamp queries)" if offers_timestamps(page)
                else "Measured: wall time of each dispatch")
    assert families == {"matmul", "map"} and measured in output, output


def test_kernel_parity_with_native(page, open_playground):
    """The op suite in the page (browser WebGPU) against the same suite natively (wgpu-py)."""
    with open(os.path.join(os.path.dirname(__file__), "parity_suite.py")) as f:
        suite = f.read()
    open_playground()
    in_page = printed_json(page, suite + "\nimport json\nprint('PARITY', json.dumps(run('webgpu')))\n", "PARITY")

    from e2e import parity_suite
    native = parity_suite.run("webgpu")   # `make test` installs lavapipe, so native webgpu exists
    assert in_page.keys() == native.keys()
    bad = {}
    for name in native:
        assert len(in_page[name]) == len(native[name]), name
        tolerance = PARITY_TOLERANCE.get(name, 1e-5)
        worst = max(abs(p - n) / (1 + abs(n)) for p, n in zip(in_page[name], native[name]))
        if worst > tolerance:
            bad[name] = worst
    assert not bad, f"the page and native differ (relative to 1 + |native|): {bad}"


def test_without_webgpu_the_page_says_how_to_get_it(page, site_url):
    page.add_init_script("delete Navigator.prototype.gpu")
    page.goto(site_url)
    page.wait_for_selector("#nogpu", state="visible", timeout=10_000)
    assert "No WebGPU" in text(page, "status")
    assert "enable-unsafe-webgpu" in page.text_content("#nogpu")
    assert page.is_disabled("[data-testid=train]") and page.is_disabled("[data-testid=run-code]")
    page.select_option("[data-testid=dataset]", "xor")  # the controls still work (and raise nothing)
    assert "dataset=xor" in page.url


def test_a_lost_device_is_reported_with_a_reload(page, open_playground):
    open_playground()
    # destroy the device under Python, as a driver reset would; the next op must fail clearly
    page.fill("[data-testid=code]", "import webgrad as wg\nfrom webgrad_bridge import bridge\n"
                                    "x = wg.ones(4, device='webgpu')\nbridge.device.destroy()\n"
                                    "print('sum', (x + 1).sum().item())\n")
    page.click("[data-testid=run-code]")
    page.wait_for_selector("#gpu-lost", state="visible", timeout=20_000)
    assert "reload" in text(page, "status").lower()
    assert "destroyed" in page.text_content("#gpu-lost-reason").lower()
    assert "sum" not in text(page, "output")
    with page.expect_navigation():
        page.click("#gpu-lost-reload")
    wait_for(page, "document.querySelector('[data-testid=adapter]').textContent.length > 1", 60)
    assert page.is_hidden("#gpu-lost")
