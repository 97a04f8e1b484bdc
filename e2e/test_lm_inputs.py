"""The language-model view with what a new user gives it, in headless Chromium (WebGPU on SwiftShader
here): a text of their own that makes no model before any model exists, and the large model on a
software GPU, which warns up front, shows its slow validation batch by batch, and gives way to a
smaller size chosen meanwhile. Each test opens its own page (a model made elsewhere would change
what they check)."""
import random
import time

from e2e.browser import code_text
from e2e.conftest import guarded_page, save_screenshot, text, wait_for, wait_for_text

SEED = random.randrange(100000)
BUTTONS = ("train", "generate", "download", "run-code", "reset", "upload")


def status_is(page, pattern, timeout_s):
    """Waits until the status matches the regular expression pattern (an error fails the wait)."""
    wait_for_text(page, "lm-status", pattern, timeout_s, SEED)


def enabled(page):
    return {b: page.is_enabled(f"[data-testid=lm-{b}]") for b in BUTTONS}


def test_a_text_that_makes_no_model_leaves_nothing_to_press(browser, site_url):
    with guarded_page(browser) as page:
        page.goto(site_url + f"#view=lm&corpus=custom&size=tiny&seed={SEED}")
        status_is(page, "Paste a text", 120)
        assert page.is_disabled("[data-testid=lm-use-text]"), "an empty box has nothing to use"
        assert "Paste a text" in page.get_attribute("[data-testid=lm-use-text]", "title")
        before = enabled(page)
        assert not any(before.values()), before

        page.fill("[data-testid=lm-text]", "a")
        page.click("[data-testid=lm-use-text]")
        wait_for(page, "document.querySelector('[data-testid=lm-status]').classList.contains('error')", 60)
        said = text(page, "lm-status")
        assert said.startswith("The text is too short: 1 character; this model needs at least 180"), said
        assert enabled(page) == before, "no model: still nothing to train, sample, download or run"
        assert page.input_value("[data-testid=lm-prompt]") == "" and "prompt=" not in page.url, "a rejected text's prompt"
        assert code_text(page, "lm-code") == ""

        own = "It was the best of times, it was the worst of times.\n" * 40
        page.fill("[data-testid=lm-text]", own)
        page.click("[data-testid=lm-use-text]")
        status_is(page, "Ready", 120)
        assert all(enabled(page).values()) and page.input_value("[data-testid=lm-prompt]") == "It was the b"


def option_fits(page):
    """Whether the size menu shows its chosen option whole: the text's width, in the menu's font, and
    the room the menu leaves it beside its arrow."""
    return page.eval_on_selector("[data-testid=lm-size]", """(s) => {
        const style = getComputedStyle(s);
        const context = document.createElement('canvas').getContext('2d');
        context.font = `${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
        const room = s.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight) - 20;
        return context.measureText(s.selectedOptions[0].text).width <= room;
    }""")


def test_the_large_model_warns_shows_its_progress_and_gives_way(browser, site_url):
    with guarded_page(browser, (1440, 900)) as page:
        page.goto(site_url + f"#view=lm&corpus=names&size=large&seed={SEED}")
        status_is(page, "Testing the model on the validation text: 0 of 10 batches", 180)
        software = "(software)" in text(page, "adapter")
        assert page.is_visible("[data-testid=lm-adapter-note]") == software
        if software:   # said up front, and the menu says it too
            assert "Medium and Large are far slower here" in text(page, "lm-adapter-note")
            assert "warn" in page.get_attribute("[data-testid=lm-adapter-note]", "class")
            assert page.eval_on_selector("[data-testid=lm-size]", "s => s.selectedOptions[0].text").endswith("(slow here)")
        assert page.get_attribute("[data-testid=lm-size]", "title") == "6 layers, 6 heads, width 192, block 128"
        # what would wait behind the test is off; what asks for another model, which it gives way to, is on
        assert enabled(page) == {"train": False, "generate": False, "download": False,
                                 "run-code": True, "reset": True, "upload": True}, enabled(page)
        for size in ((1440, 900), (390, 844)):
            save_screenshot(page, f"lm-large-{size[0]}.png", size)
            assert option_fits(page), f"the size menu cuts its option short at {size[0]} px"
        page.set_viewport_size({"width": 1440, "height": 900})

        # On a software GPU each batch takes the large model most of a minute: the page goes on
        # counting them, and a smaller size chosen meanwhile waits for the batch under way at most.
        status_is(page, "(1|2) of 10 batches|Ready", 240)
        chosen = time.monotonic()
        page.select_option("[data-testid=lm-size]", "tiny")
        status_is(page, "Ready", 200)
        waited = time.monotonic() - chosen
        assert page.text_content("#lm-about").count("1 layer, 2 heads") == 1, "the tiny model's account"
        assert text(page, "lm-val-loss") != "–" and all(enabled(page).values()), enabled(page)
        print(f"seed {SEED}: the tiny model was ready {waited:.0f} s after it was chosen")
