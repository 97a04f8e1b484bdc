"""End-to-end fixtures: the built site, a local server, Debian's headless Chromium (e2e/browser.py),
and pages that may not reach anything beyond localhost."""
import contextlib
import json
import os
import re

import pytest

import playwright.sync_api as playwright_api  # the test extra installs it

from e2e.browser import CHROMIUM, CHROMIUM_ARGS, ROOT, local_only, serve_in_thread, wait_for, web_module

ARTIFACTS = os.path.join(ROOT, "e2e", "artifacts")


@pytest.fixture(scope="session")
def site_url(tmp_path_factory):
    """The site built from this checkout (web/, npm packages, a fresh wheel), served on a free port."""
    server, url = serve_in_thread(web_module("build").build(str(tmp_path_factory.mktemp("site"))))
    yield url
    server.shutdown()


@pytest.fixture(scope="session")
def browser():
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs it (apt-get install chromium)")
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser):
    """A fresh page whose requests beyond localhost are aborted and fail the test, as do page errors
    and anything the server's Content-Security-Policy blocks (web/serve.py sends it)."""
    with guarded_page(browser) as page:
        yield page


@contextlib.contextmanager
def guarded_page(browser, size=(1400, 1000)):
    """The page fixture's page, for fixtures of a wider scope (downloads allowed); size: the viewport's
    (width, height)."""
    context = browser.new_context(viewport=dict(zip(("width", "height"), size)), accept_downloads=True)
    leaks, errors = [], []
    local_only(context, leaks)
    page = context.new_page()
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: "Content Security Policy" in m.text and errors.append(m.text))
    yield page
    context.close()
    assert not leaks, f"the page tried to reach beyond localhost: {leaks}"
    assert not errors, f"uncaught errors in the page: {errors}"


@contextlib.contextmanager
def opened_view(browser, url, view, timeout_s, seed, size=(1400, 1000)):
    """A guarded_page at url (a link to the view "mnist" or "lm"), once the view's status says Ready."""
    with guarded_page(browser, size) as page:
        page.goto(url)
        wait_for_text(page, f"{view}-status", "Ready", timeout_s, seed)
        yield page


def text(page, testid):
    """The text of the element with that data-testid."""
    return page.text_content(f"[data-testid={testid}]")


def ran_output(page, source, marker, timeout_s=45):
    """Runs source in the playground's code panel (Run) until it prints marker (or fails) and returns
    the output panel's text, which must hold marker."""
    page.fill("[data-testid=code]", source)
    page.click("[data-testid=run-code]")
    wait_for(page, f"document.querySelector('[data-testid=output]').textContent.includes({marker!r})"
                   f" || document.querySelector('[data-testid=status]').textContent.includes('error')", timeout_s)
    out = text(page, "output")
    assert marker in out, out
    return out


def printed_json(page, source, marker, timeout_s=45):
    """Runs source in the playground's code panel (Run) and returns the JSON it prints after marker
    (source ends with print(marker, json.dumps(...)))."""
    out = ran_output(page, source, marker, timeout_s)
    return json.loads(out.split(marker, 1)[1].strip().splitlines()[0])


def run_in_page_and_natively(page, program, page_args, native_args):
    """program's run(*args), run in the page's code panel with page_args and here with native_args:
    (the page's result, as JSON gives it back; the native one)."""
    in_page = printed_json(page, f"{program}\nimport json\nprint('RESULT', json.dumps(run(*{tuple(page_args)!r})))\n",
                           "RESULT")
    native = {}
    exec(program, native)
    return in_page, native["run"](*native_args)


def offers_timestamps(page):
    """Whether the page's WebGPU adapter offers "timestamp-query", asked apart from webgrad."""
    return page.evaluate("navigator.gpu.requestAdapter().then((a) => a.features.has('timestamp-query'))")


def wait_for_text(page, testid, pattern, timeout_s, seed):
    """Waits until the text of the element with that data-testid matches the regular expression
    pattern or names an error, and fails (naming the test's random seed) unless it matches, and,
    where pattern is not about an error, names none."""
    wait_for(page, f"/{pattern}|rror/.test(document.querySelector('[data-testid={testid}]').textContent)", timeout_s)
    said = text(page, testid)
    assert re.search(pattern, said) and ("rror" not in said or "rror" in pattern), f"seed {seed}: {said}"


def steps(page):
    """The playground's step count."""
    return int(text(page, "step-count"))


def pause(page):
    """Clicks the playground's Pause and waits until its status says so."""
    page.click("[data-testid=pause]")
    wait_for(page, "document.querySelector('[data-testid=status]').textContent === 'Paused'", 10)


def save_screenshot(page, name, size=None):
    """The whole page saved as e2e/artifacts/<name>; size: (width, height) to set the viewport to first."""
    if size:
        page.set_viewport_size(dict(zip(("width", "height"), size)))
        page.wait_for_timeout(300)   # the charts and the heat map follow the new width
    os.makedirs(ARTIFACTS, exist_ok=True)
    path = os.path.join(ARTIFACTS, name)
    page.screenshot(path=path, full_page=True)
    return path


@pytest.fixture
def open_playground(page, site_url):
    """open_playground(settings="") loads the page (settings: a URL hash) and waits for its first frame."""
    def open_(settings="", on=page):
        on.goto(site_url + settings)
        wait_for(on, "document.querySelector('[data-testid=accuracy]').textContent !== '–'"
                     " || /Error|No WebGPU/.test(document.querySelector('[data-testid=status]').textContent)", 60)
        status = on.text_content("[data-testid=status]")
        assert "Error" not in status and "No WebGPU" not in status, (status, on.text_content("[data-testid=output]"))
        return on
    return open_


@pytest.fixture
def screenshot(page):
    """screenshot(name) saves the whole page as e2e/artifacts/<name>."""
    return lambda name: save_screenshot(page, name)
