"""Serve a built site folder on localhost: python web/serve.py [SITE] [--port 8000] [--host 127.0.0.1].

A static file server (the standard library's) that serves the regular files under SITE and
nothing else: no '..', no symlinks out of it, no directory listings. Each file goes out with a
fixed MIME type by its extension (WebAssembly must be application/wasm to stream-compile, module
scripts text/javascript; .gz is application/gzip with no Content-Encoding, because the page
decompresses those files itself), no caching (a rebuilt site is picked up on reload), and a
Content-Security-Policy that lets the page load only from its own origin, and the two headers
that make the page cross-origin isolated (COOP and COEP): only then does the browser give it
SharedArrayBuffer, which the Stop button's interrupt of the running Python needs (worker.js).
"""
import argparse
import functools
import http.server
import os
from urllib.parse import unquote

MIME = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
        ".mjs": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
        ".json": "application/json", ".map": "application/json", ".py": "text/x-python; charset=utf-8",
        ".txt": "text/plain; charset=utf-8", ".wasm": "application/wasm", ".whl": "application/zip",
        ".zip": "application/zip", ".tar": "application/x-tar", ".gz": "application/gzip",
        ".svg": "image/svg+xml", ".png": "image/png", ".ico": "image/x-icon"}
DEFAULT_MIME = "application/octet-stream"

# Everything from this origin only. Pyodide compiles WebAssembly ('wasm-unsafe-eval'; no JS eval)
# and runs in a module worker from this origin; the page's favicon is a data: URL; the network
# diagram sets style attributes (style-src-attr), while style sheets still come only from here.
CSP = ("default-src 'none'; script-src 'self' 'wasm-unsafe-eval'; worker-src 'self'; connect-src 'self'; "
       "style-src 'self'; style-src-attr 'unsafe-inline'; img-src 'self' data:; font-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
# Cross-origin isolation: a window of its own (no opener from another origin), and nothing embedded
# that does not opt in (everything here comes from this origin, so everything loads).
ISOLATION = {"Cross-Origin-Opener-Policy": "same-origin", "Cross-Origin-Embedder-Policy": "require-corp"}


def resolve(root, target):
    """The real path of the regular file under root that a request target names, or an HTTP
    status: 400 for a path no page asks for ('.' or '..' or empty segments, backslashes, control
    characters, bad UTF-8), 404 for anything that is not a regular file inside root once
    symlinks are followed. root must be a real path. A path ending in '/' means its index.html."""
    path = target.split("?", 1)[0].split("#", 1)[0]
    try:
        path = unquote(path, errors="strict")
    except UnicodeDecodeError:
        return 400
    segments = path.split("/")
    if segments[0] != "" or any(ord(c) < 0x20 or c in "\\\x7f" for c in path):
        return 400
    segments = segments[1:]
    if segments[-1] == "":
        segments[-1] = "index.html"
    if any(s in ("", ".", "..") for s in segments):
        return 400
    real = os.path.realpath(os.path.join(root, *segments))
    if os.path.commonpath([root, real]) != root or not os.path.isfile(real):
        return 404
    return real


class SiteHandler(http.server.SimpleHTTPRequestHandler):
    def send_head(self):
        """Headers for the file the request names (and the open file), or an error and None."""
        path = resolve(self.directory, self.path)
        if isinstance(path, int):
            self.send_error(path)
            return None
        try:
            f = open(path, "rb")
        except OSError:
            self.send_error(404)
            return None
        self.send_response(200)
        self.send_header("Content-Type", MIME.get(os.path.splitext(path)[1].lower(), DEFAULT_MIME))
        self.send_header("Content-Length", str(os.fstat(f.fileno()).st_size))
        self.end_headers()
        return f

    def end_headers(self):
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")   # the types above are the types
        for name, value in ISOLATION.items():
            self.send_header(name, value)
        super().end_headers()

    def log_message(self, format, *args):
        pass  # quiet: one line per request drowns the URL we print


def serve(site, host="127.0.0.1", port=8000):
    """A started-but-not-serving server for site; call .serve_forever() (tests run it in a thread)."""
    if not os.path.isfile(os.path.join(site, "index.html")):
        raise SystemExit(f"serve: {site} has no index.html; build it with `make site`")
    handler = functools.partial(SiteHandler, directory=os.path.realpath(site))
    return http.server.ThreadingHTTPServer((host, port), handler)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("site", nargs="?", default=os.path.join(os.path.dirname(__file__), "..", "build", "site"))
    parser.add_argument("--host", default="127.0.0.1", help="the address to listen on (default: localhost only)")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    server = serve(args.site, args.host, args.port)
    print(f"webgrad playground: http://{args.host}:{server.server_address[1]}/  (Ctrl-C to stop)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
