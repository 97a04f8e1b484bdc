"""End-to-end fixtures: the built site, a local server, Debian's headless Chromium, and pages that
may not reach anything beyond localhost.

Chromium is /usr/bin/chromium (`make test` installs it with apt); Playwright's own browser
downloads are never used. Headless Chromium without a GPU offers WebGPU through SwiftShader.
"""
import contextlib
import importlib.util
import os
import threading
import time
from urllib.parse import urlsplit

import pytest

import playwright.sync_api as playwright_api  # the test extra installs it

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _web_module(name):
    """web/<name>.py, imported by path (web/ is no package, and `build` is also a PyPI name)."""
    spec = importlib.util.spec_from_file_location(f"webgrad_web_{name}", os.path.join(ROOT, "web", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build, serve = _web_module("build"), _web_module("serve")

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--enable-unsafe-webgpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
LOCAL_HOSTS = {"127.0.0.1", "localhost", "[::1]", "::1"}
ARTIFACTS = os.path.join(ROOT, "e2e", "artifacts")


def wait_for(page, condition, timeout_s):
    """Waits until the JavaScript expression condition is truthy in page. It polls with
    page.evaluate (run through DevTools): page.wait_for_function evals the condition inside the
    page, which the server's Content-Security-Policy forbids."""
    deadline = time.monotonic() + timeout_s
    while not page.evaluate(condition):
        if time.monotonic() > deadline:
            raise TimeoutError(f"not true after {timeout_s} s: {condition}")
        page.wait_for_timeout(100)


@pytest.fixture(scope="session")
def site_url(tmp_path_factory):
    """The site built from this checkout (web/, npm packages, a fresh wheel), served on a free port."""
    site = build.build(str(tmp_path_factory.mktemp("site")))
    server = serve.serve(site, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
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

    def guard(route):
        if urlsplit(route.request.url).hostname in LOCAL_HOSTS:
            route.continue_()
        else:
            leaks.append(route.request.url)
            route.abort()

    context.route("**/*", guard)  # also sees the worker's requests
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
