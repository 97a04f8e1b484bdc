"""web/serve.py, the server behind `make play`: it serves the site folder's files and nothing else,
with the page's MIME types, a Content-Security-Policy and the cross-origin isolation headers. Requests go out over a raw socket, so
the client normalises nothing ('..', '%2e', NUL bytes reach the server as written)."""
import importlib.util
import os
import re
import socket
import subprocess
import sys
import threading

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location("webgrad_web_serve", os.path.join(ROOT, "web", "serve.py"))
serve = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(serve)

SECRET = b"outside the site: " + os.urandom(16).hex().encode()

# name -> the Content-Type it must be served with (the type before any '; charset')
TYPES = {"index.html": "text/html", "app.js": "text/javascript", "pyodide/pyodide.mjs": "text/javascript",
         "pyodide/pyodide.asm.wasm": "application/wasm", "style.css": "text/css",
         "pyodide/pyodide-lock.json": "application/json", "webgrad.whl": "application/zip",
         "mnist/train-labels-idx1-ubyte.gz": "application/gzip", "playground.py": "text/x-python",
         "pyodide/python_stdlib.zip": "application/zip", "data.tar": "application/x-tar",
         "UPPER.WASM": "application/wasm", "no-extension": "application/octet-stream"}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A site folder with a file of each type, next to an outside folder holding SECRET, with
    symlinks from the site to it (a file, a folder) and one inside the site."""
    base = tmp_path_factory.mktemp("serve")
    site, outside = base / "site", base / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_bytes(SECRET)
    (outside / "index.html").write_bytes(SECRET)
    for name in TYPES:
        path = site / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(name.encode() + b" " + os.urandom(64))
    (site / "empty-dir").mkdir()
    os.symlink(outside / "secret.txt", site / "secret-link.txt")
    os.symlink(outside, site / "link-out")
    os.symlink("/etc/passwd", site / "passwd")
    os.symlink(site / "style.css", site / "inside-link.css")
    return site, outside


@pytest.fixture(scope="module")
def port(site):
    server = serve.serve(str(site[0]), port=0)
    assert server.server_address[0] == "127.0.0.1", "serve() must bind localhost by default"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def request(port, target, method=b"GET"):
    """(status, headers with lower-case names, body) for one raw HTTP/1.0 request."""
    target = target if isinstance(target, bytes) else target.encode()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(method + b" " + target + b" HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), {k.lower(): v for k, v in headers.items()}, body


@pytest.mark.parametrize("name", list(TYPES))
def test_files_are_served_with_their_type(port, site, name):
    status, headers, body = request(port, "/" + name)
    assert status == 200, (name, status)
    assert body == (site[0] / name).read_bytes()
    assert headers["content-type"].split(";")[0] == TYPES[name], (name, headers["content-type"])
    assert int(headers["content-length"]) == len(body)
    assert "content-encoding" not in headers, "a .gz is the file itself: the page decompresses it"
    assert headers["x-content-type-options"] == "nosniff"
    assert "content-security-policy" in headers


def test_root_serves_index_and_head_sends_no_body(port, site):
    status, headers, body = request(port, "/")
    assert status == 200 and body == (site[0] / "index.html").read_bytes()
    status, headers, body = request(port, "/index.html?v=1#top")
    assert status == 200 and body == (site[0] / "index.html").read_bytes()
    status, headers, body = request(port, "/pyodide/pyodide.asm.wasm", method=b"HEAD")
    assert status == 200 and body == b"" and headers["content-type"] == "application/wasm"
    status, headers, body = request(port, "/inside-link.css")    # a symlink that stays inside is fine
    assert status == 200 and body == (site[0] / "style.css").read_bytes()


LONG = "/" + "a" * 5000, "/" + "a/" * 3000 + "index.html", "/" + "%2e%2e/" * 2000 + "etc/passwd"
BAD = {
    # (target, allowed statuses)
    "parent": ("/../outside/secret.txt", {400}),
    "parent of the root": ("/..", {400}),
    "parent after a folder": ("/pyodide/../../outside/secret.txt", {400}),
    "encoded parent": ("/%2e%2e/outside/secret.txt", {400}),
    "encoded parent upper case": ("/%2E%2E/outside/secret.txt", {400}),
    "encoded slash": ("/%2e%2e%2f..%2foutside%2fsecret.txt", {400}),
    "encoded parent and slash then parent": ("/%2e%2e%2f..", {400}),
    "dot segment": ("/./index.html", {400}),
    "backslash": ("/..%5coutside%5csecret.txt", {400}),
    "raw backslash": ("/..\\outside\\secret.txt", {400}),
    "overlong UTF-8 dots": ("/%c0%ae%c0%ae/outside/secret.txt", {400}),
    "bad UTF-8": ("/%ff%fe", {400}),
    "double slash absolute": ("//etc/passwd", {400, 404}),   # http.server itself turns // into /
    "encoded absolute": ("/%2fetc%2fpasswd", {400}),
    "absolute path": ("/etc/passwd", {404}),
    "absolute path of the outside file": ("{outside}/secret.txt", {404}),
    "absolute path with parents": ("/pyodide/../..{outside}/secret.txt", {400}),
    "absolute-form URL": ("http://127.0.0.1/../outside/secret.txt", {400}),
    "no leading slash": ("outside/secret.txt", {400}),
    "asterisk": ("*", {400}),
    "symlinked file out": ("/secret-link.txt", {404}),
    "symlinked folder out": ("/link-out/secret.txt", {404}),
    "symlinked folder's index": ("/link-out/", {404}),
    "symlink to /etc/passwd": ("/passwd", {404}),
    "folder without index": ("/empty-dir/", {404}),
    "folder without slash": ("/pyodide", {404}),
    "missing file": ("/nope.js", {404}),
    "NUL byte": (b"/index.html\x00.png", {400}),
    "encoded NUL": ("/index.html%00.png", {400}),
    "control character": ("/index.html%0a", {400}),
    "long name": (LONG[0], {404}),
    "deep path": (LONG[1], {404}),
    "many encoded parents": (LONG[2], {400}),
    "longer than a request line": ("/" + "b" * 70000, {400, 404, 414}),
}


@pytest.mark.parametrize("case", list(BAD))
def test_nothing_outside_the_site_is_served(port, site, case):
    target, allowed = BAD[case]
    if isinstance(target, str):
        target = target.replace("{outside}", str(site[1]))
    status, headers, body = request(port, target)
    assert status in allowed, (case, status)
    assert SECRET not in body and b"root:" not in body, case
    status, _, body = request(port, "/app.js")   # and the server lives on
    assert status == 200 and body.startswith(b"app.js ")


def test_only_get_and_head(port):
    for method in (b"POST", b"PUT", b"DELETE"):
        status, _, body = request(port, "/index.html", method=method)
        assert status in (405, 501), (method, status)


def _policy(headers):
    directives = {}
    for part in headers["content-security-policy"].split(";"):
        name, *sources = part.split()
        directives[name] = set(sources)
    return directives


def test_the_policy_keeps_the_page_on_its_origin(port):
    for target in ("/", "/app.js", "/nope.js"):     # errors carry it too
        directives = _policy(request(port, target)[1])
        assert directives["default-src"] == {"'none'"}
        assert directives["script-src"] == {"'self'", "'wasm-unsafe-eval'"}, "no JS eval, no inline script"
        for name in ("connect-src", "worker-src", "style-src"):
            assert directives[name] == {"'self'"}, name
        everything = set().union(*directives.values())
        allowed = {"'self'", "'none'", "'wasm-unsafe-eval'", "'unsafe-inline'", "data:"}
        assert everything <= allowed, f"sources beyond the origin: {everything - allowed}"
        assert "'unsafe-inline'" not in directives["script-src"] | directives["style-src"]


def test_every_response_isolates_the_page(port):
    """COOP and COEP on everything, errors too: a page is cross-origin isolated (and gets the
    SharedArrayBuffer that Stop's interrupt needs) only when its document and its worker's script
    carry them."""
    for target in ("/", "/app.js", "/pyodide/pyodide.asm.wasm", "/nope.js", "/../outside/secret.txt"):
        headers = request(port, target)[1]
        assert headers["cross-origin-opener-policy"] == "same-origin", target
        assert headers["cross-origin-embedder-policy"] == "require-corp", target


def test_the_command_listens_on_localhost_only(site):
    proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "web", "serve.py"), str(site[0]), "--port", "0"],
                            stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        match = re.search(r"http://([^:/]+):(\d+)/", line)
        assert match and match.group(1) == "127.0.0.1", line
        assert request(int(match.group(2)), "/")[0] == 200
    finally:
        proc.terminate()
        proc.wait(10)
