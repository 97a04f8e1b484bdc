"""End-to-end fixtures: the built site, a local server, Debian's headless Chromium (e2e/browser.py),
and pages that may not reach anything beyond localhost."""
import contextlib
import os

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
def guarded_page(browser):
    """The page fixture's page, for fixtures of a wider scope (downloads allowed)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    leaks, errors = [], []
    local_only(context, leaks)
    page = context.new_page()
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: "Content Security Policy" in m.text and errors.append(m.text))
    yield page
    context.close()
    assert not leaks, f"the page tried to reach beyond localhost: {leaks}"
    assert not errors, f"uncaught errors in the page: {errors}"


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
    def save(name):
        os.makedirs(ARTIFACTS, exist_ok=True)
        path = os.path.join(ARTIFACTS, name)
        page.screenshot(path=path, full_page=True)
        return path
    return save
