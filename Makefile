# claudex — two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test e2e installed lint bench soak serve clean screenshots docs docs-gen docs-serve

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)  ## start the built-in demo in the console
	$(BIN)/claudex demo

screenshots: $(STAMP)  ## render screenshots/*.svg and .png from real demo states
	@command -v rsvg-convert >/dev/null || { apt-get update -qq && apt-get install -y -qq librsvg2-bin; } \
	  || echo "install librsvg2-bin (rsvg-convert) for the PNGs"
	$(BIN)/python -m claudex.console.screenshots screenshots

# Real servers the tests start on 127.0.0.1 (Debian packages, installed when missing): redis-server
# for the fleet tests, tinyproxy and microsocks for the network tests; mitmproxy (PyPI) goes into
# a venv of its own in the user cache (tests/tools/install_mitmproxy.sh).
TEST_PACKAGES := redis-server tinyproxy microsocks

test: $(STAMP)  ## run the whole test suite (installs redis-server, tinyproxy, microsocks, mitmproxy if missing)
	@missing=""; for p in $(TEST_PACKAGES); do command -v $$p >/dev/null || missing="$$missing $$p"; done; \
	  [ -z "$$missing" ] || { export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing; } \
	  || echo "install$$missing (Debian's packages): the fleet and network tests need them and will fail"
	@PYTHON=$(PYTHON) tests/tools/install_mitmproxy.sh \
	  || echo "could not install mitmproxy: the network tests need it and will fail"
	$(BIN)/pytest -q

e2e: $(STAMP)  ## the real Claude Code and Codex CLI (pinned; npm into ~/.cache/claudex-e2e) through claudex serve
	@PYTHON=$(PYTHON) tests/tools/install_mitmproxy.sh \
	  || echo "could not install mitmproxy: the corporate-proxy e2e test needs it and will fail"
	$(BIN)/python -m e2e.claude_code >/dev/null
	$(BIN)/python -m e2e.codex_cli >/dev/null
	$(BIN)/pytest -q e2e

installed: $(STAMP)  ## build sdist+wheel, install the wheel in a fresh venv, run claudex from outside the repo
	$(BIN)/python -m e2e.installed

lint: $(STAMP)  ## ruff and mypy (strict)
	$(BIN)/ruff check claudex tests bench soak e2e
	$(BIN)/mypy

soak: $(STAMP)  ## chaos soak: 20,000 requests through faults; ARGS="--seconds 60 --seed 3" etc.
	$(BIN)/python -m soak $(ARGS)

bench: $(STAMP)  ## measure what claudex costs (writes bench/RESULTS.md); ARGS=--quick for <1 min
	$(BIN)/python -m bench.run $(ARGS)

docs-gen: $(STAMP)  ## write docs/reference/ from the code's own tables (commit what it changes)
	$(BIN)/python -m claudex.docs_gen

# Material's banner about mkdocs 2 says nothing about this site (pyproject keeps mkdocs below 2).
docs: $(STAMP)  ## build the docs site into site/, strict: a broken link or a page left out fails
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

docs-serve: $(STAMP)  ## the docs site on http://127.0.0.1:8000, rebuilt as you edit
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --strict --dev-addr 127.0.0.1:8000

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache site
