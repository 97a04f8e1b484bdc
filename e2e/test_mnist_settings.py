"""The MNIST view's controls say what the model is and does: Train for trains that many steps, a
bad seed is turned back, the test accuracy says which model it is from, a setting changed during a
run asks before throwing the run away, a Stop in another tab leaves this one alone, and Train waits
for a new model to be tested, while the previous model's results show as such.

The tests share one page and run in order (each starts from where the last left the model); its
seed is drawn afresh each run (the failure messages name it)."""
import random
import re

import pytest

from e2e.conftest import opened_view, text, wait_for, wait_for_text

SEED = random.randrange(100000)
LINK = f"#view=mnist&model=mlp&lr=0.003&batch=32&steps=1000&test=1000&seed={SEED}"
TEST_ACCURACY_RGB = (0x0b, 0x3d, 0x63)   # the chart's test accuracy series (web/mnist.js)


@pytest.fixture(scope="module")
def page(browser, site_url):
    with opened_view(browser, site_url + LINK, "mnist", 120, SEED) as page:
        wait_for(page, "document.querySelector('[data-testid=mnist-accuracy]').textContent !== '–'", 60)
        yield page


def status(page):
    return text(page, "mnist-status")


def bar(page):
    """The progress bar and step count, read at once: (value, max, step count)."""
    return tuple(page.evaluate("""[document.querySelector('[data-testid=mnist-progress]').value,
        document.querySelector('[data-testid=mnist-progress]').max,
        Number(document.querySelector('[data-testid=mnist-step-count]').textContent)]"""))


def train_to_the_end(page):
    """Presses Train and reads the bar until the run has ended: every reading taken during it."""
    page.click("[data-testid=mnist-train]")
    wait_for(page, "document.querySelector('[data-testid=mnist-status]').textContent === 'Training…'", 30)
    seen = []
    while status(page) == "Training…":
        seen.append(bar(page))
        page.wait_for_timeout(200)
    wait_for_text(page, "mnist-status", "Trained", 5, SEED)
    return seen


def train_until_the_accuracy_is_behind(page):
    """Presses Train, if no run goes on, and waits until the step count has passed that of a test
    after step 0."""
    if status(page) != "Training…":
        page.click("[data-testid=mnist-train]")
    wait_for(page, "(at => at && 0 < Number(at[1]) && Number(at[1]) < Number(document.querySelector('[data-testid=mnist-step-count]')"
                   ".textContent))(/at step (\\d+)/.exec(document.querySelector('[data-testid=mnist-accuracy-at]')"
                   ".textContent))", 120)


def test_an_untrained_model_says_so(page):
    assert text(page, "mnist-accuracy-at") == "at step 0, before training"
    assert text(page, "prediction") == "draw a digit"


def test_a_bad_seed_goes_back_to_the_one_in_use(page):
    for bad in ("-3", "100000", "1.5"):
        page.fill("#mnist-seed", bad)
        page.press("#mnist-seed", "Tab")   # commits the field: its change event
        assert page.input_value("#mnist-seed") == str(SEED), f"seed {SEED}: {bad} stays in the field"
        assert status(page) == f"The seed is a whole number from 0 to 99999: still {SEED}"
        assert page.url.endswith(f"&seed={SEED}")


def test_train_for_is_what_the_next_train_runs(page):
    page.select_option("#mnist-steps", "100")   # the link said 1000
    assert bar(page) == (0, 100, 0)
    seen = train_to_the_end(page)
    assert bar(page) == (100, 100, 100), f"seed {SEED}: {status(page)}"
    assert status(page) == "Trained 100 steps: press Train for 100 more"
    assert all(value == steps and top == 100 for value, top, steps in seen), seen

    page.select_option("#mnist-steps", "150")
    assert status(page) == "Trained 100 steps: press Train for 150 more"
    assert bar(page) == (0, 150, 100)
    seen = train_to_the_end(page)
    assert bar(page) == (150, 150, 250), f"seed {SEED}: {status(page)}"
    assert all(value == steps - 100 and top == 150 for value, top, steps in seen), seen
    assert any(0 < value < 150 for value, _, _ in seen), "the bar was read during the run"


def test_the_chart_draws_test_accuracy_only_where_it_was_measured(page):
    """Dots at the tests, no line across the steps between them: the longest horizontal run of the
    test accuracy's colour on the chart is one dot wide."""
    columns = page.evaluate("""(rgb) => {
        const canvas = document.querySelector('#mnist-chart canvas');
        const { data, width, height } = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height);
        const near = (i) => rgb.every((c, k) => Math.abs(data[i + k] - c) <= 16) && data[i + 3] > 200;
        return Array.from({ length: width }, (_, x) => {
            for (let y = 0; y < height; y++) if (near(4 * (y * width + x))) return true;
            return false;
        });
    }""", list(TEST_ACCURACY_RGB))
    runs = [len(run) for run in "".join("x" if c else " " for c in columns).split()]
    scale = page.evaluate("devicePixelRatio")
    assert len(runs) >= 3, f"a dot for each test (steps 0, 100, 250 at least): {runs}"
    assert max(runs) <= 24 * scale, f"a line joins the tests: {runs}"   # two dots may touch (a test, then the run's last)


def test_a_stop_in_another_tab_leaves_this_one_alone(page):
    before = status(page)
    page.click("[data-testid=tab-playground]")
    page.fill("[data-testid=code]", "while True:\n    pass\n")
    page.click("[data-testid=run-code]")
    wait_for(page, "!document.querySelector('[data-testid=stop]').disabled", 30)
    page.click("[data-testid=stop]")
    wait_for(page, "document.querySelector('[data-testid=status]').textContent.startsWith('Stopped')", 10)
    wait_for(page, "document.querySelector('[data-testid=stop]').disabled", 5)   # every tab has heard the Stop
    page.click("[data-testid=tab-mnist]")
    assert status(page) == before


def test_a_setting_changed_during_a_run_asks_before_a_fresh_model(page):
    page.select_option("#mnist-steps", "1000")   # a run long enough to answer the dialog twice
    page.click("[data-testid=mnist-train]")
    wait_for(page, "Number(document.querySelector('[data-testid=mnist-step-count]').textContent) > 255", 60)
    page.select_option("[data-testid=mnist-model]", "cnn")
    wait_for(page, "document.querySelector('[data-testid=mnist-discard]').open", 5)
    assert "You changed “Model” while the model trains." in text(page, "mnist-discard")
    page.click("[data-testid=mnist-discard-no]")
    assert page.input_value("[data-testid=mnist-model]") == "mlp" and "model=mlp" in page.url
    steps = int(text(page, "mnist-step-count"))
    wait_for(page, f"Number(document.querySelector('[data-testid=mnist-step-count]').textContent) > {steps}", 30)
    assert status(page) == "Training…"

    page.select_option("#mnist-lr", "0.001")
    wait_for(page, "document.querySelector('[data-testid=mnist-discard]').open", 5)
    page.click("[data-testid=mnist-discard-yes]")
    wait_for(page, "document.querySelector('[data-testid=mnist-accuracy-at]').textContent === 'at step 0, before training'", 60)
    wait_for_text(page, "mnist-status", "Ready", 60, SEED)
    assert "lr=0.001" in page.url and text(page, "mnist-step-count") == "0"


def test_after_stop_the_test_accuracy_says_it_is_older_than_the_model(page):
    train_until_the_accuracy_is_behind(page)
    page.click("[data-testid=mnist-stop]")
    wait_for_text(page, "mnist-status", "Stopped", 10, SEED)
    steps = int(text(page, "mnist-step-count"))
    said = text(page, "mnist-accuracy-at")
    at = int(re.match(r"at step (\d+)", said).group(1))
    assert at < steps, f"seed {SEED}: a test came before the Stop landed: {said} at step {steps}"
    assert said == f"at step {at} (not tested since; the model is at step {steps})"


def test_train_is_off_until_a_new_model_is_tested(page):
    """A new model is tested before Train may start it (the CNN, on a software GPU, for seconds):
    until then Train and Download are off, as pressed they would wait behind the test saying
    nothing, and the status says what goes on; the previous model's test accuracy and test digits
    stay in view, dimmed, and the accuracy says whose they are. Then Train trains it."""
    page.select_option("[data-testid=mnist-model]", "cnn")
    seen = []   # (Train off, Download off, the status, (accuracy, digits) dimmed, the accuracy's caption)
    for _ in range(1200):
        seen.append(tuple(page.evaluate("""[document.querySelector('[data-testid=mnist-train]').disabled,
            document.querySelector('[data-testid=mnist-download]').disabled,
            document.querySelector('[data-testid=mnist-status]').textContent,
            ['mnist-accuracy', 'digits'].map((id) => document.querySelector(`[data-testid=${id}]`).classList.contains('stale')),
            document.querySelector('[data-testid=mnist-accuracy-at]').textContent]""")))
        if not seen[-1][0] and seen[-1][2].startswith("Ready") or "rror" in seen[-1][2]:
            break
        page.wait_for_timeout(50)
    ready = seen.pop()
    assert ready == (False, False, "Ready: press Train", [False, False], "at step 0, before training"), \
        f"seed {SEED}: {ready}"
    assert all(train_off and download_off for train_off, download_off, *_ in seen), f"seed {SEED}: {seen}"
    assert any(said == "Testing the new model on 1,000 digits…" for _, _, said, *_ in seen), seen
    current_looking = [r for r in seen if r[3:] != ([True, True], "previous model: testing the new one…")]
    assert not current_looking, f"seed {SEED}: the previous model's results look current: {current_looking[:3]}"

    page.click("[data-testid=mnist-train]")
    wait_for(page, "Number(document.querySelector('[data-testid=mnist-step-count]').textContent) > 0", 60)
    assert status(page) == "Training…"
    page.click("[data-testid=mnist-pause]")
    wait_for_text(page, "mnist-status", "Paused", 30, SEED)
    assert float(text(page, "mnist-loss")) > 0
