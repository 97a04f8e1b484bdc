"""Every view with its steps replayed by wg.jit (the "Steps run" setting, web/step_settings.js; eager
is the default on SwiftShader here, replayed on a GPU), in headless Chromium: from the same seed the
page trains to the same test accuracy, validation loss or toy losses as with eager steps, the language
model's and the toy's scripts in the code panel say @wg.jit, and the choice shows and goes into the
link. The seed is drawn afresh each run (the failure messages name it)."""
import contextlib
import random

import pytest

from e2e.browser import code_text
from e2e.conftest import guarded_page, opened_view, save_screenshot, steps, text, wait_for, wait_for_text

SEED = random.randrange(100000)
VIEWS = {   # view: (its settings but the step's, the id of the result tested at the end, the steps trained)
    "mnist": (f"#view=mnist&model=mlp&lr=0.003&batch=64&steps=100&test=1000&seed={SEED}", "mnist-accuracy", 100),
    "lm": (f"#view=lm&corpus=names&size=tiny&lr=0.01&batch=16&steps=50&every=500&seed={SEED}", "lm-val-loss", 50),
}


def trained(browser, site_url, view, step, shot=None):
    """Train the view for its steps, run `step`ly: (its result at the last step, its code panel's script
    or None, the link it shows), printing its steps a second."""
    settings, result, steps = VIEWS[view]
    with opened_view(browser, f"{site_url}{settings}&step={step}", view, 120, SEED) as page:
        assert page.input_value(f"[data-testid={view}-step]") == step, f"seed {SEED}"
        page.click(f"[data-testid={view}-train]")
        wait_for_text(page, f"{view}-status", "Trained", 240, SEED)
        wait_for(page, f"document.querySelector('[data-testid={result}-at]').textContent === 'at step {steps}'", 90)
        if shot:
            for size in ((1440, 900), (390, 844)):
                save_screenshot(page, f"{shot}-{size[0]}.png", size)
        script = code_text(page, f"{view}-code") if view == "lm" else None
        print(f"{view}, {step} steps: {text(page, f'{view}-speed')} steps/s at the end")
        return float(text(page, result)), script, page.evaluate("location.hash")


@pytest.mark.parametrize("view", VIEWS)
def test_replayed_steps_train_as_eager_ones(browser, site_url, view):
    eager, eager_script, _ = trained(browser, site_url, view, "eager")
    replayed, replayed_script, link = trained(browser, site_url, view, "replayed", shot=f"{view}-replayed")
    print(f"seed {SEED}, {view}: eager {eager}, replayed {replayed}")
    assert replayed == pytest.approx(eager, abs=2e-3), f"seed {SEED}, {view}: eager {eager}, replayed {replayed}"
    assert "step=replayed" in link, f"seed {SEED}: {link}"
    if view == "lm":
        assert "@wg.jit\ndef train_step():" in replayed_script and "wg.jit" not in eager_script, f"seed {SEED}"


# The toy playground: batches of 16 of its 200 training points, 13 an epoch, the last one of 8.
TOY = f"#dataset=xor&batch=16&seed={SEED}"
TOY_CHECKS = (13, 26, 40)   # epoch ends: each batch size's first two steps run the Python, the third replays
TOY_READOUTS = ("loss", "test-loss", "accuracy")


@contextlib.contextmanager
def toy_trained(browser, site_url, stepping, shot):
    """The toy page at a link with stepping=<stepping>, trained with Step: (the page, its readouts at
    each of TOY_CHECKS); screenshots named shot."""
    with guarded_page(browser) as page:
        page.goto(f"{site_url}{TOY}&stepping={stepping}")
        wait_for_text(page, "status", "Ready", 120, SEED)
        assert page.input_value("[data-testid=stepping]") == stepping, f"seed {SEED}"
        readouts = []
        for check in TOY_CHECKS:
            for _ in range(check - steps(page)):
                page.click("[data-testid=step]")
            wait_for(page, f"document.querySelector('[data-testid=step-count]').textContent === '{check}'", 120)
            readouts.append([float(text(page, readout)) for readout in TOY_READOUTS])
        for size in ((1440, 900), (390, 844)):
            save_screenshot(page, f"{shot}-{size[0]}.png", size)
        yield page, readouts


def test_replayed_toy_steps_train_as_eager_ones(browser, site_url):
    with toy_trained(browser, site_url, "replayed", "toy-replayed") as (page, replayed):
        replayed_script, link = code_text(page), page.evaluate("location.hash")
    with toy_trained(browser, site_url, "eager", "toy-eager") as (page, eager):
        eager_script = code_text(page)
        # the control: choosing replayed writes the link's replayed script, and a fresh model from it
        page.select_option("[data-testid=stepping]", "replayed")
        wait_for(page, "document.querySelector('[data-testid=step-count]').textContent === '0'", 60)
        assert code_text(page) == replayed_script and "stepping=replayed" in page.evaluate("location.hash")
    print(f"seed {SEED}, toy at steps {TOY_CHECKS} ({', '.join(TOY_READOUTS)}): eager {eager}, replayed {replayed}")
    assert "wg.jit" not in eager_script and "@wg.jit\ndef update(x, y):" in replayed_script, f"seed {SEED}"
    assert "stepping=replayed" in link, f"seed {SEED}: {link}"
    assert replayed == [pytest.approx(e, abs=2e-3) for e in eager], f"seed {SEED}: eager {eager}, replayed {replayed}"
    assert replayed[0] != replayed[1] != replayed[2], f"seed {SEED}: the readouts never moved: {replayed}"
