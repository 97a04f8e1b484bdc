"""What every driver of the page shares (the e2e fixtures and the page benchmarks): the site's
build and serve modules, Debian's headless Chromium with WebGPU, a guard that keeps a browser
context on localhost, and waiting on a condition in a page.

Chromium is /usr/bin/chromium (`make setup` installs it with apt); Playwright's own browser
downloads are never used. Headless Chromium without a GPU offers WebGPU through SwiftShader.
"""
import importlib.util
import os
import threading
import time
from urllib.parse import urlsplit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--enable-unsafe-webgpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
LOCAL_HOSTS = {"127.0.0.1", "localhost", "[::1]", "::1"}


def web_module(name):
    """web/<name>.py, imported by path (web/ is no package, and `build` is also a PyPI name)."""
    spec = importlib.util.spec_from_file_location(f"webgrad_web_{name}", os.path.join(ROOT, "web", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def serve_in_thread(folder):
    """web/serve.py's server for folder on a free localhost port: (server, its URL)."""
    server = web_module("serve").serve(folder, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def local_only(context, leaks):
    """Aborts, and appends to leaks, every request of the context (its workers' too) beyond localhost."""
    def guard(route):
        if urlsplit(route.request.url).hostname in LOCAL_HOSTS:
            route.continue_()
        else:
            leaks.append(route.request.url)
            route.abort()
    context.route("**/*", guard)


def code_text_js(panel="code"):
    """A JavaScript expression for the text in a code panel's editor (web/editor.js), panel being
    the id of the element that holds it ("code", "lm-code"). Type into the panel with
    page.fill("[data-testid=code]", text): the editor's editable element carries the test id."""
    return f"import('./editor.js').then((editor) => editor.textOf(document.getElementById({panel!r})))"


def code_text(page, panel="code"):
    """The text in a code panel's editor, as code_text_js says."""
    return page.evaluate(code_text_js(panel))


def wait_for(page, condition, timeout_s):
    """Waits until the JavaScript expression condition is truthy in page. It polls with
    page.evaluate (run through DevTools): page.wait_for_function evals the condition inside the
    page, which the server's Content-Security-Policy forbids."""
    deadline = time.monotonic() + timeout_s
    while not page.evaluate(condition):
        if time.monotonic() > deadline:
            raise TimeoutError(f"not true after {timeout_s} s: {condition}")
        page.wait_for_timeout(100)
