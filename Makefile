# Berth developer entry points. `make serve` and `make test` are the two
# commands the README promises work on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8778
PYTEST_ARGS ?=
# pytest-xdist workers for test, check and stress: one per core (auto);
# TEST_WORKERS=0 runs the tests in one process. (The Galera tests share
# one cluster: each has it alone, support.galera.turn.)
TEST_WORKERS ?= auto
XDIST := -n $(TEST_WORKERS)

.PHONY: serve test check lint format stress venv install install-test keystone-venv conformance matrix image image-test bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[test]'
	touch $@ $(VENV)/.installed

venv: $(BIN)/python
install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

# Runs the API on an embedded SQLite database (created and migrated on
# first start) at http://$(HOST):$(PORT)/ with noauth2.
serve: install
	$(BIN)/berth serve --host $(HOST) --port $(PORT)

# The whole default suite (see README.md, "Developing"): on SQLite,
# PostgreSQL and MariaDB, against a real Keystone (its venv is built here
# from the package index, once), and the dashboard in Debian's chromium.
# Only what needs a system package or server that is missing skips; the
# summary (-rs) lists each skip with its reason and the command that
# installs what is missing.
test: install-test keystone-venv
	$(BIN)/pytest -rs $(XDIST) $(PYTEST_ARGS)

# The fast default while working: the unit tests and the functional tests
# on SQLite only (a few minutes). `make test` is the whole suite.
check: install-test
	BERTH_TEST_DBS=sqlite $(BIN)/pytest -q $(XDIST) tests/unit tests/functional $(PYTEST_ARGS)

# Lint (ruff), the formatting (ruff format, checked), types (mypy
# --strict on src/) and the import contracts (import-linter), as CI runs
# them.
lint: install-test
	$(BIN)/ruff check src tests bench support
	$(BIN)/ruff format --check src tests bench support
	$(BIN)/mypy src
	$(BIN)/lint-imports --no-cache

# The one formatting (ruff format, as pyproject's [tool.ruff] sets it):
# run it before committing; `make lint` fails on a file it would change.
format: install-test
	$(BIN)/ruff format src tests bench support
	$(BIN)/ruff check --fix --select I src tests bench support

# Keystone, its CLI and osc-placement in .keystone-venv (tests/keystone).
keystone-venv: install-test
	bash .ci/keystone.sh --venv-only

# Long concurrency, explosion and property cases.
stress: install-test
	$(BIN)/pytest -m stress $(XDIST) $(PYTEST_ARGS)

# The container image (deploy/container/README.md): localhost/berth:latest,
# FROM a Debian base built here with mmdebstrap unless BASE names another
# (BASE=docker.io/library/debian:bookworm-slim). Needs podman, runc and
# mmdebstrap (apt-get install podman runc mmdebstrap).
image: venv
	deploy/container/build.sh

# The image under podman against this machine's MariaDB and PostgreSQL:
# db sync, serve, the API, HEALTHCHECK and a clean stop on SIGTERM.
image-test:
	deploy/container/test.sh

conformance: install
	../shared/conformance/run

bench: install
	$(BIN)/pip install -q -e '.[bench]'
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .hypothesis
