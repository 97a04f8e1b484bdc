# webgrad: make play | make test | make bench | make clean
SHELL := bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMPS := .stamps
PORT ?= 8000
PYTEST_ARGS ?=
# torch==2.13.0 (CPU) lies in /opt/wheels on the project machines; use it even if PIP_* env is gone.
PIP_LINKS := $(if $(wildcard /opt/wheels),--find-links /opt/wheels)
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# Vulkan loaders complain when XDG_RUNTIME_DIR is unset or missing; give them a private one.
ifeq ($(wildcard $(XDG_RUNTIME_DIR)),)
export XDG_RUNTIME_DIR := /tmp/webgrad-xdg-$(shell id -u)
endif

.PHONY: setup test play bench clean

setup: $(STAMPS)/apt $(VENV)/.installed $(XDG_RUNTIME_DIR)

$(XDG_RUNTIME_DIR):
	mkdir -p -m 700 $@

# Lavapipe (Mesa's software Vulkan) so wgpu-py finds an adapter on machines without a GPU.
$(STAMPS)/apt:
	@mkdir -p $(STAMPS)
	@if ls /usr/share/vulkan/icd.d/lvp_icd.*.json >/dev/null 2>&1 && dpkg -s libvulkan1 >/dev/null 2>&1; then \
	  echo "setup: lavapipe + libvulkan1 already installed"; \
	else \
	  $(SUDO) apt-get update -q && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o DPkg::Lock::Timeout=300 \
	    --no-install-recommends mesa-vulkan-drivers libvulkan1; \
	fi
	@touch $@

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q $(PIP_LINKS) -e '.[test]'
	@touch $@

test: setup
	$(PY) -m pytest $(PYTEST_ARGS)

play: setup
	$(PY) -m webgrad train xor

bench: setup
	$(PY) bench/dispatch.py

clean:
	rm -rf $(VENV) $(STAMPS) build dist .pytest_cache .hypothesis py/*.egg-info
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
