# Thin wrappers. `make demo` and `make test` do every set-up step themselves.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test lint unit e2e bench venv binaries clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

venv: $(BIN)/.installed

binaries: venv
	$(BIN)/python e2e/local-cluster build

demo: binaries
	VENV=$(VENV) scripts/demo.sh

test: binaries lint
	$(BIN)/pytest

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

unit: venv
	$(BIN)/pytest tests

e2e: binaries
	$(BIN)/pytest e2e

bench: venv
	$(BIN)/python benchmarks/bench_shares.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
