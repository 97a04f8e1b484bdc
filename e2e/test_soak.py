"""A soak of the page in headless Chromium: 10,000 training steps keep the GPU memory webgrad holds
flat (the worker's webgrad.memory_stats(), which the page shows in its header) and the page answers
clicks all along. The model is a small MLP (one hidden layer of 3 units, batches of 8) so that the
steps come fast on a software adapter; Play runs them in chunks of up to 512 between frames."""
import time

from e2e.conftest import wait_for

SOAK_STEPS = 10_000
WARM_STEPS = 500    # by then every buffer the loop needs exists (Adam's state, the pool's sizes)
SETTINGS = "#dataset=xor&hidden=3&batch=8&seed=3"


def steps(page):
    return int(page.text_content("[data-testid=step-count]"))


def memory(page):
    """(live bytes, pooled bytes) as the header shows them."""
    box = page.query_selector("[data-testid=gpu-memory]")
    return int(box.get_attribute("data-live")), int(box.get_attribute("data-pool"))


def answer_ms(page):
    """How long the page takes to run a task and draw a frame: a blocked main thread shows here."""
    return page.evaluate("new Promise((resolve) => { const t0 = performance.now();"
                         " requestAnimationFrame(() => setTimeout(() => resolve(performance.now() - t0), 0)); })")


def test_ten_thousand_steps_keep_memory_flat_and_the_page_answering(page, open_playground, screenshot):
    page.set_viewport_size({"width": 1440, "height": 900})
    open_playground(SETTINGS)
    page.click("[data-testid=train]")
    wait_for(page, f"Number(document.querySelector('[data-testid=step-count]').textContent) >= {WARM_STEPS}", 120)
    page.wait_for_timeout(1100)    # the header's figures come at most once a second
    warm = memory(page)
    samples, answers = [], []
    start, start_steps = time.monotonic(), steps(page)
    while steps(page) < SOAK_STEPS:
        assert time.monotonic() - start < 300, f"only {steps(page)} steps after 5 minutes"
        page.wait_for_timeout(1000)
        samples.append(memory(page))
        answers.append(answer_ms(page))
    rate = (steps(page) - start_steps) / (time.monotonic() - start)

    lives = {live for live, _ in samples}
    assert lives == {warm[0]}, f"live GPU memory moved during the soak: {warm[0]} bytes warm, then {sorted(lives)}"
    assert max(pool for _, pool in samples) <= max(warm[1], samples[0][1]), \
        f"the buffer pool grew during the soak: {warm[1]} bytes warm, then {[pool for _, pool in samples]}"
    assert max(answers) < 500, f"the page took {max(answers):.0f} ms to answer while training ({rate:.0f} steps/s)"

    # a click answers at once: Pause ends training at the chunk under way
    page.click("[data-testid=pause]")
    wait_for(page, "document.querySelector('[data-testid=status]').textContent === 'Paused'", 5)
    stopped = steps(page)
    page.wait_for_timeout(800)
    assert steps(page) == stopped and stopped >= SOAK_STEPS
    screenshot("soak-1440.png")
    print(f"soak: {stopped} steps, {rate:.0f} steps/s, live {warm[0]} bytes, pool {warm[1]} bytes, "
          f"slowest answer {max(answers):.0f} ms")
