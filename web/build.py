"""Write the playground as a static site: python web/build.py [OUT] (default build/site).

The folder holds everything the page loads, so any static host can serve it and the page never
reaches past its own origin:
    index.html, style.css, *.js, playground.py   from web/
    pyodide/                                       the npm `pyodide` package (web/node_modules)
    uplot/                                         the npm `uplot` package's ES module and CSS
    webgrad.whl                                    this repository's wheel (py/ + shaders/)
"""
import glob
import os
import shutil
import subprocess
import sys
import tempfile

WEB = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(WEB)
MODULES = os.path.join(WEB, "node_modules")
PAGE_FILES = ("index.html", "style.css", "app.js", "worker.js", "bridge.js", "script.js", "playground.py")
# Only what loadPyodide() fetches: the package also carries Node-only and debugging files.
PYODIDE_FILES = ("pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json")
UPLOT_FILES = ("uPlot.esm.js", "uPlot.min.css")


def build_wheel(out_dir):
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", tmp, ROOT], check=True)
        (wheel,) = glob.glob(os.path.join(tmp, "webgrad-*.whl"))
        # A fixed name, so the page needs no manifest; the worker fetches it with cache: "no-cache".
        shutil.copyfile(wheel, os.path.join(out_dir, "webgrad.whl"))


def copy_package(name, files, out_dir):
    src = os.path.join(MODULES, name)
    if not os.path.isdir(src):
        raise RuntimeError(f"build: {src} is missing; run `npm ci` in web/ first (make setup does)")
    os.makedirs(out_dir, exist_ok=True)
    for f in files:
        shutil.copyfile(os.path.join(src, f), os.path.join(out_dir, os.path.basename(f)))


def build(out):
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    for f in PAGE_FILES:
        shutil.copyfile(os.path.join(WEB, f), os.path.join(out, f))
    copy_package("pyodide", PYODIDE_FILES, os.path.join(out, "pyodide"))
    copy_package("uplot", [f"dist/{f}" for f in UPLOT_FILES], os.path.join(out, "uplot"))
    build_wheel(out)
    return out


if __name__ == "__main__":
    print("site written to", build(os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "site"))))
