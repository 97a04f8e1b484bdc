"""Stop, in headless Chromium: it interrupts the running Python (Pyodide's interrupt buffer, which
needs the server's cross-origin isolation), or ends a worker the interrupt cannot reach and starts
a fresh one; either way within 2 s, keeping the user's code and settings, and the page trains again.
And the page's state said plainly: after a script's error, after Run, and without a GPU adapter."""
import re
import time

from e2e.browser import CHROMIUM, CHROMIUM_ARGS, code_text
from e2e.conftest import wait_for

ENDLESS = "while True:\n    pass\n"
# An await that never ends: Python sits suspended in JavaScript, where no interrupt reaches it.
BLOCKED = "from js import Promise\nfrom pyodide.ffi import run_sync\n\nrun_sync(Promise.new(lambda resolve, reject: None))\n"
STATUS = "document.querySelector('[data-testid=status]').textContent"


def status(page, prefix=""):
    return page.text_content(f"[data-testid={prefix}status]")


def steps(page, testid="step-count"):
    return int(page.text_content(f"[data-testid={testid}]"))


def stop(page, prefix=""):
    """Presses Stop and returns the seconds until the status says what happened."""
    assert page.is_enabled(f"[data-testid={prefix}stop]"), "Stop is off while Python runs"
    start = time.monotonic()
    page.click(f"[data-testid={prefix}stop]")
    wait_for(page, f"document.querySelector('[data-testid={prefix}status]').textContent.startsWith('Stopped')", 10)
    return time.monotonic() - start


def run(page, source):
    page.fill("[data-testid=code]", source)
    page.click("[data-testid=run-code]")


def run_for_a_while(page, source):
    """Runs source and checks it still runs 0.8 s later."""
    run(page, source)
    wait_for(page, f"{STATUS} === 'Running your script…'", 5)
    page.wait_for_timeout(800)
    assert status(page) == "Running your script…", page.text_content("[data-testid=output]")


def trains(page, testid="step-count", prefix=""):
    """Play (or Train) trains: the step count grows."""
    before = steps(page, testid)
    page.click(f"[data-testid={prefix}train]")
    wait_for(page, f"Number(document.querySelector('[data-testid={testid}]').textContent) > {before}", 60)


def test_stop_interrupts_an_endless_script_and_training(page, open_playground, screenshot):
    page.set_viewport_size({"width": 1440, "height": 900})
    open_playground("#dataset=xor")
    script = code_text(page)   # the controls' script
    assert page.evaluate("crossOriginIsolated"), "the server's COOP/COEP headers make the page isolated"
    assert page.is_disabled("[data-testid=stop]"), "nothing runs, nothing to stop"

    run_for_a_while(page, ENDLESS)
    assert stop(page) < 2
    assert re.match(r"Stopped: Python was interrupted at line [12] of your script", status(page)), status(page)
    assert code_text(page) == ENDLESS and page.input_value("[data-testid=dataset]") == "xor"
    wait_for(page, "document.querySelector('[data-testid=stop]').disabled", 5)   # nothing runs now

    # the model drawn before the script is still Play's: it trains, and Stop ends that too
    trains(page)
    wait_for(page, "Number(document.querySelector('[data-testid=step-count]').textContent) >= 30", 60)
    assert stop(page) < 2
    page.wait_for_timeout(500)      # a frame shows the model as Stop left it
    stopped_at = steps(page)
    assert status(page).startswith(f"Stopped at step {stopped_at}; Play goes on"), status(page)
    page.wait_for_timeout(1000)
    assert steps(page) == stopped_at, "training went on after Stop"
    assert page.is_visible("[data-testid=train]") and page.is_enabled("[data-testid=train]")
    assert page.is_hidden("[data-testid=pause]"), "Play and Pause are one toggle"
    screenshot("stopped-1440.png")

    # a long training loop: the script's main block, made to train for a million steps
    long_run = script.replace("range(1, 301)", "range(1, 1_000_001)")
    assert long_run != script
    run_for_a_while(page, long_run)
    page.wait_for_timeout(700)
    assert stop(page) < 2
    assert re.match(r"Stopped: Python was interrupted at line \d+ of your script", status(page)), status(page)
    assert code_text(page) == long_run
    trains(page)


def test_a_tab_opened_while_a_script_runs_waits_for_it_and_stop_still_interrupts(page, open_playground):
    """The MNIST tab, opened for the first time while the toy's script loops, queues its start behind
    the script and says so; Stop then interrupts the script as it would have without the visit,
    rather than restarting Python (and losing every model) after its second of grace."""
    open_playground("#dataset=xor")
    run_for_a_while(page, ENDLESS)
    page.click("[data-testid=tab-mnist]")
    page.wait_for_timeout(500)
    assert status(page, "mnist-") == "Waiting for your running script: press Stop to end it", status(page, "mnist-")
    page.click("[data-testid=tab-playground]")
    assert stop(page) < 2
    page.wait_for_timeout(1500)     # past Stop's grace: a restart would have said so by now
    assert re.match(r"Stopped: Python was interrupted at line [12] of your script", status(page)), status(page)
    trains(page)                    # the model drawn before the script is still there
    page.click("[data-testid=pause]")
    # the MNIST start was queued before the Stop, so it was dropped with the script: the tab says how to go on
    page.click("[data-testid=tab-mnist]")
    assert status(page, "mnist-") == "Stopped before the model was ready: press Reset to make one", status(page, "mnist-")
    page.click("[data-testid=mnist-reset]")
    wait_for(page, "document.querySelector('[data-testid=mnist-status]').textContent.startsWith('Ready')", 120)


def test_a_script_raising_keyboardinterrupt_itself_leaves_the_page_working(page, open_playground):
    """A KeyboardInterrupt that no Stop sent (the script raised it) ends the script, and the worker
    goes on hearing the page: it waits for a Stop's message only after a Stop's interrupt."""
    open_playground("#dataset=xor")
    run(page, "print('before')\nraise KeyboardInterrupt\n")
    wait_for(page, f"{STATUS} !== 'Running your script…'", 30)
    run(page, "print('the next run', 6 * 7)\n")
    wait_for(page, "document.querySelector('[data-testid=output]').textContent.includes('the next run 42')", 30)
    trains(page)


def test_stop_restarts_python_that_no_interrupt_reaches(page, site_url, screenshot):
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(site_url + "#dataset=xor&hidden=5")
    # WebGPU is checked before Python loads: the adapter shows while Python is still on its way
    wait_for(page, "document.querySelector('[data-testid=adapter]').textContent !== '—'", 30)
    assert not status(page).startswith("Ready"), status(page)
    wait_for(page, f"{STATUS}.startsWith('Ready')", 90)
    assert page.text_content("[data-testid=accuracy]") != "–", "Ready came before the model was drawn"
    run_for_a_while(page, BLOCKED)
    assert stop(page) < 2.5     # one second of grace for the interrupt, then a fresh worker
    assert status(page).startswith("Stopped: Python did not stop within a second, so it is restarting"), status(page)
    screenshot("restarted-390.png")
    wait_for(page, f"{STATUS}.startsWith('Ready')", 90)
    # the code and the settings stay; the fresh worker draws the controls' model, and Play trains it
    assert code_text(page) == BLOCKED
    assert page.input_value("[data-testid=dataset]") == "xor" and page.input_value("#hidden") == "5"
    assert page.text_content("#shape") == "2 → 5 → 2 units"
    trains(page)


def test_after_a_script_error_play_trains_the_model_drawn_and_run_counts_its_steps(page, open_playground, screenshot):
    page.set_viewport_size({"width": 390, "height": 844})
    open_playground("#dataset=xor")
    script = code_text(page)
    run(page, script.replace("def train_step():", "def train_step():\n    1 / 0"))
    wait_for(page, f"{STATUS}.startsWith('Your script raised')", 30)
    assert "ZeroDivisionError" in page.text_content("[data-testid=output]")
    assert status(page) == ("Your script raised an error (see below): Play trains the model drawn, "
                            "from the last script that worked"), status(page)
    screenshot("script-error-390.png")
    trains(page)      # the controls' model, the one drawn: Play does not sit there doing nothing
    page.click("[data-testid=pause]")
    wait_for(page, f"{STATUS} === 'Paused'", 10)

    # Run runs the script as python train.py would: a fresh model, trained by its main block's 300
    # steps, which the step count shows
    page.fill("[data-testid=code]", script)
    page.click("[data-testid=run-code]")
    wait_for(page, f"{STATUS}.startsWith('Your script ran')", 60)
    assert steps(page) == 300
    assert "step 300:" in page.text_content("[data-testid=output]")


# The controls' script's batches, each read slowly in Python (as a loader from files would): a
# chunk of Play spends nearly all its time inside this generator.
SLOW_BATCHES = """def batches():
    while True:  # epoch after epoch
        for batch in loader:
            ready_at = time.perf_counter() + 0.3
            while time.perf_counter() < ready_at:
                pass
            yield batch
"""


def test_stop_during_play_leaves_the_scripts_batch_generator_working(page, open_playground):
    """Stop lands where Play's Python waits for the GPU, not at any bytecode of it: an interrupt
    inside the script's batch generator would end that generator for good (Python ends a generator
    that an exception leaves), and every step after it would raise StopIteration."""
    open_playground("#dataset=xor")
    script = code_text(page)
    slow = ("import time\n" + script.replace('def batches():\n    while True:  # epoch after epoch\n'
                                               '        yield from loader\n', SLOW_BATCHES)
            .replace("range(1, 301)", "range(1, 2)"))   # Run's main block: one step
    assert SLOW_BATCHES in slow and "range(1, 2)" in slow
    run(page, slow)
    wait_for(page, f"{STATUS}.startsWith('Your script ran')", 30)
    for stops in range(4):   # each Stop most likely comes while the generator reads a batch
        before = steps(page)
        page.click("[data-testid=train]")
        # training again (a step count that catches up with Stop's last step is not enough), or an error
        wait_for(page, f"({STATUS} === 'Training…' && Number(document.querySelector('[data-testid=step-count]')"
                       f".textContent) > {before}) || /^(Error|Paused)/.test({STATUS})", 30)
        assert status(page) == "Training…", (stops, status(page), page.text_content("[data-testid=output]"))
        if stops < 3:
            page.wait_for_timeout(400)
            assert stop(page) < 2
            assert status(page).startswith("Stopped at step"), status(page)


def test_stop_in_the_mnist_tab(page, site_url, screenshot):
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(site_url + "#view=mnist&model=mlp&test=1000")
    wait_for(page, "document.querySelector('[data-testid=mnist-status]').textContent.startsWith('Ready')", 120)
    page.click("[data-testid=mnist-train]")
    wait_for(page, "Number(document.querySelector('[data-testid=mnist-step-count]').textContent) >= 20", 60)
    assert stop(page, "mnist-") < 2
    assert status(page, "mnist-") == "Stopped: press Train to go on"
    screenshot("mnist-stopped-1440.png")
    stopped_at = steps(page, "mnist-step-count")
    page.wait_for_timeout(800)
    assert steps(page, "mnist-step-count") == stopped_at, "training went on after Stop"
    trains(page, "mnist-step-count", "mnist-")


def test_a_browser_without_a_gpu_adapter_hears_so_before_python_loads(browser, site_url):
    # Chromium without --enable-unsafe-webgpu on Linux: navigator.gpu exists, but offers no adapter
    bare = browser.browser_type.launch(executable_path=CHROMIUM,
                                       args=[a for a in CHROMIUM_ARGS if a != "--enable-unsafe-webgpu"])
    try:
        page = bare.new_page()
        start = time.monotonic()
        page.goto(site_url)
        wait_for(page, "document.querySelector('[data-testid=status]').textContent === 'No WebGPU in this browser'", 10)
        assert time.monotonic() - start < 4, "the page loaded Python before it looked for a GPU"
        assert page.text_content("#nogpu-reason") == "WebGPU is on, but the browser offered no GPU adapter."
        assert page.is_visible("#nogpu")
    finally:
        bare.close()
