"""The page tells the truth about its state, in headless Chromium (WebGPU on SwiftShader here): a
software GPU is named and the MNIST view picks sizes that answer in seconds; a test accuracy or a
validation loss older than the step count says from which step it is; bad settings in a link are
corrected in the address bar with a notice naming each; every tab fits a phone's 390 px.

One page serves the tests that need Python (loading it is the slow part); the links' tests need
none. Random values (seeds, bad settings) are drawn afresh each run; the failures name them."""
import random
import re
from urllib.parse import parse_qsl, urlsplit

import pytest

from e2e.conftest import guarded_page, opened_view, save_screenshot, text, wait_for, wait_for_text

SEED = random.randrange(100000)
MNIST = f"#view=mnist&model=mlp&lr=0.003&batch=64&steps=1000&seed={SEED}"
AT_STEP = re.compile(r"at step (\d+)")
WIDE, PHONE = (1440, 900), (390, 844)


@pytest.fixture(scope="module")
def page(browser, site_url):
    """The MNIST view of a fresh page, its first test shown."""
    with opened_view(browser, site_url + MNIST, "mnist", 120, SEED, WIDE) as page:
        wait_for(page, "document.querySelector('[data-testid=mnist-accuracy]').textContent !== '–'", 60)
        yield page


def is_software(page):
    return "(software)" in text(page, "adapter")


def test_a_software_gpu_is_named_and_the_model_tested_on_1000_digits(page):
    software = is_software(page)
    assert page.is_visible("[data-testid=mnist-adapter-note]") == software
    tested = int(re.search(r"of (\d+) test digits", page.text_content("#mnist-accuracy-of")).group(1))
    assert page.input_value("#mnist-test") == str(tested) == ("1000" if software else "10000")
    if software:
        assert "software GPU" in text(page, "mnist-adapter-note")
        assert "slow here" in page.text_content("#mnist-model option[value=cnn]")
    # the confusion matrix counts the same digits
    cells = page.eval_on_selector_all("[data-testid=confusion] td", "cells => cells.map(c => Number(c.textContent))")
    assert sum(cells) == tested


def test_labels_say_what_they_count(page):
    steps = page.eval_on_selector_all("#mnist-steps option", "options => options.map(o => o.textContent)")
    assert all(re.fullmatch(r"\d+", s) for s in steps), steps   # numbers of steps, no "first 1000"
    assert page.eval_on_selector_all("#mnist-test option", "options => options.map(o => o.textContent)") == \
        ["first 1000", "all 10,000"]
    legend = page.text_content("#mnist-chart .u-legend")
    for series in ("training loss (left axis)", "training accuracy (right)", "test accuracy (right)"):
        assert series in legend, legend


def _age(page, view, readout):
    """(the step count, the step the readout says it is from, whether it is greyed) in a view."""
    step, said, greyed = page.evaluate(f"""[document.querySelector('[data-testid={view}-step-count]').textContent,
        document.querySelector('[data-testid={readout}-at]').textContent,
        document.querySelector('[data-testid={readout}]').classList.contains('stale')]""")
    return int(step), int(AT_STEP.search(said).group(1)), greyed


def _train_until_stale(page, view, readout, pause):
    """Train; the readout, measured every few seconds, must say its step, greyed once the step count
    has gone past it; after a Pause (pause: True) it is the last step's again."""
    page.click(f"[data-testid={view}-train]")
    seen = []
    while not seen or seen[-1][1] == seen[-1][0]:
        assert "rror" not in text(page, f"{view}-status"), text(page, f"{view}-status")
        seen.append(_age(page, view, readout))
        page.wait_for_timeout(100)
        assert len(seen) < 600, f"seed {SEED}: the {readout} never fell behind the step count: {seen[-3:]}"
    step, at, greyed = seen[-1]
    assert at < step and greyed, seen[-1]
    assert all(at <= step and greyed == (at < step) for step, at, greyed in seen), seen
    if not pause:
        return
    page.click(f"[data-testid={view}-pause]")
    wait_for(page, f"document.querySelector('[data-testid={view}-train]').hidden === false", 120)
    wait_for(page, f"document.querySelector('[data-testid={readout}-at]').textContent === "
                   f"'at step ' + document.querySelector('[data-testid={view}-step-count]').textContent", 60)
    step, at, greyed = _age(page, view, readout)
    assert step == at > 0 and not greyed, (step, at, greyed)


def test_a_stale_test_accuracy_says_from_which_step(page):
    _train_until_stale(page, "mnist", "mnist-accuracy", pause=True)


def test_a_stale_validation_loss_says_from_which_step(page):
    page.click("[data-testid=tab-lm]")
    wait_for_text(page, "lm-status", "Ready", 120, SEED)
    assert text(page, "lm-val-loss-at") == "at step 0"
    _train_until_stale(page, "lm", "lm-val-loss", pause=False)   # the next test's tab switch pauses it


def test_every_tab_fits_a_phone(page):
    """At 390x844 no tab scrolls sideways (checked in the DOM); screenshots of each at both sizes."""
    for tab in ("playground", "mnist", "lm"):
        page.click(f"[data-testid=tab-{tab}]")
        save_screenshot(page, f"tab-{tab}-1440.png", WIDE)
        save_screenshot(page, f"tab-{tab}-390.png", PHONE)
        wider = page.evaluate("""Array.from(document.querySelectorAll('body *'))
            .filter((e) => e.getClientRects().length && e.getBoundingClientRect().right > innerWidth + 0.5)
            .slice(0, 5).map((e) => `${e.tagName.toLowerCase()}#${e.id}.${e.className}`)""")
        overflow = page.evaluate("document.documentElement.scrollWidth - innerWidth")
        assert overflow <= 0, f"the {tab} tab scrolls sideways by {overflow} px at 390 px wide: {wider}"
    page.set_viewport_size(dict(zip(("width", "height"), WIDE)))


def test_the_cnn_warns_that_it_is_slow_here(page):
    """Last: choosing the CNN makes a fresh model."""
    page.click("[data-testid=tab-mnist]")
    page.select_option("[data-testid=mnist-model]", "cnn")
    if is_software(page):
        assert "The CNN is slower here" in text(page, "mnist-adapter-note")
        assert "warn" in page.get_attribute("[data-testid=mnist-adapter-note]", "class")
    else:
        assert page.is_hidden("[data-testid=mnist-adapter-note]")


# ---- links with bad settings: no Python needed

PREFIX = {"playground": "", "mnist": "mnist-", "lm": "lm-"}   # a setting's control is #<prefix><key>


def _bad_links():
    r = random.Random(SEED)
    seed = str(r.randrange(100000, 10**7))
    return {
        "playground": ({"dataset": "xor", "lr": f"-{r.randrange(1, 100)}", "hidden": str(r.randrange(65, 10**5)),
                        "seed": seed}, ["lr", "hidden", "seed"]),
        "mnist": ({"view": "mnist", "model": "cnn", "lr": f"-{r.randrange(1, 100)}",
                   "batch": str(r.randrange(257, 10**4)), "seed": seed}, ["lr", "batch", "seed"]),
        "lm": ({"view": "lm", "corpus": "shakespeare", "lr": "-1", "topk": str(r.randrange(21, 100)), "seed": seed,
                "temperature": str(r.randrange(3, 100))}, ["lr", "topk", "seed", "temperature"]),
    }


def _controls(page, tab, keys):
    return {key: page.input_value(f"#{PREFIX[tab]}{key}").replace(" ", "") for key in keys}


@pytest.mark.parametrize("tab", ["playground", "mnist", "lm"])
def test_bad_link_values_are_corrected_in_the_address_bar(tab, browser, site_url):
    given, bad = _bad_links()[tab]
    link = "#" + "&".join(f"{k}={v}" for k, v in given.items() if k not in bad)
    with guarded_page(browser) as clean:   # the oracle: the settings of a link without the bad ones
        clean.goto(site_url + link)
        expected = _controls(clean, tab, bad)
        assert not clean.is_visible("[data-testid=url-notice]")
    with guarded_page(browser) as page:
        page.goto(site_url + link + "".join(f"&{k}={given[k]}" for k in bad) + "&colour=blue")
        fixed = dict(parse_qsl(urlsplit(page.url).fragment))
        notice = text(page, "url-notice")
        assert page.is_visible("[data-testid=url-notice]")
        assert _controls(page, tab, bad) == expected, f"seed {SEED}"
        for key in bad:
            assert fixed[key] == expected[key], f"{key}: the address bar says {fixed}, the controls {expected}"
            assert f"{key}={given[key]} is not" in notice, notice
        for key in set(given) - set(bad):
            assert fixed[key] == given[key], f"{key}: a good setting was lost: {fixed}"
        assert "“colour” is no setting here" in notice and "colour" not in fixed
        page.click("#url-notice-close")
        assert not page.is_visible("[data-testid=url-notice]")
