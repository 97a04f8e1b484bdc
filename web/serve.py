"""Serve a built site folder on localhost: python web/serve.py [SITE] [--port 8000] [--host 127.0.0.1].

A static file server (the standard library's) that serves SITE and nothing else, with the MIME
types the page needs (WebAssembly must be application/wasm to stream-compile, module scripts
text/javascript) and no caching, so a rebuilt site is picked up on reload.
"""
import argparse
import functools
import http.server
import os

MIME = {".wasm": "application/wasm", ".mjs": "text/javascript", ".js": "text/javascript",
        ".json": "application/json", ".whl": "application/zip", ".zip": "application/zip",
        ".css": "text/css", ".html": "text/html", ".py": "text/x-python", ".map": "application/json"}


class SiteHandler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, **MIME}

    def end_headers(self):
        self.send_header("Cache-Control", "no-cache")
        super().end_headers()

    def list_directory(self, path):
        self.send_error(404, "Not found")  # a site, not a file browser

    def log_message(self, format, *args):
        pass  # quiet: one line per request drowns the URL we print


def serve(site, host="127.0.0.1", port=8000):
    """A started-but-not-serving server for site; call .serve_forever() (tests run it in a thread)."""
    if not os.path.isfile(os.path.join(site, "index.html")):
        raise SystemExit(f"serve: {site} has no index.html; build it with `make site`")
    handler = functools.partial(SiteHandler, directory=os.path.abspath(site))
    return http.server.ThreadingHTTPServer((host, port), handler)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("site", nargs="?", default=os.path.join(os.path.dirname(__file__), "..", "build", "site"))
    parser.add_argument("--host", default="127.0.0.1")
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
