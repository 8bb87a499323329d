# Thin wrappers. `make demo` and `make test` do every set-up step themselves.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo demo-full test lint unit e2e bench venv binaries clean crds

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

# Admission through scheduling gates on a whole cluster in a box (scheduler, controllers, kwok).
demo-full: binaries
	VENV=$(VENV) scripts/demo-full.sh

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

# crds/ is generated from the models in operator/sharekeeper/api/ (tests/api/test_crds.py fails
# when the files differ from what the models generate).
crds: venv
	$(BIN)/sharekeeper crds crds/

bench: venv
	$(BIN)/python benchmarks/bench_shares.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
