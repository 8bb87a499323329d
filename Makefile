# Thin wrappers. `make demo` and `make test` do every set-up step themselves.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Every Python dependency at an exact version with its hashes (pip-tools' compiled requirements):
# dev.txt for the venv (runtime, test, bench and the build backend), runtime.txt for the image.
LOCK := requirements/dev.txt
PIP_TOOLS := pip-tools==7.6.2
# Extras stay on their pins (httpx2[http2,ws]==...): lightkube asks for httpx2 with extras, and
# the venv's pip (23.2) then takes the newest httpx2 on the index for it unless the pin names them.
COMPILE = .venv-lock/bin/pip-compile --quiet --generate-hashes --allow-unsafe \
	--all-build-deps --no-emit-index-url --no-emit-find-links $(if $(UPGRADE),--upgrade)

.PHONY: demo demo-full demo-qos test test-latest lint unit e2e bench venv binaries node-packages clean crds lock

# The venv holds exactly the lock: nothing is resolved here, and a package missing from the lock
# fails the install (hash-checking mode) instead of being fetched at whatever version is newest.
$(BIN)/.installed: pyproject.toml $(LOCK)
	$(PYTHON) -m venv --clear $(VENV)
	$(BIN)/pip install --quiet --require-hashes -r $(LOCK)
	$(BIN)/pip install --quiet --no-deps --no-build-isolation -e .
	touch $@

venv: $(BIN)/.installed

binaries: venv
	$(BIN)/python e2e/local-cluster build

# Debian's containerd, runc, CNI plugins and busybox-static for the real node
# (`e2e/local-cluster up --node`, e2e/realnode.py): only the missing ones, `apt-get update` once.
node-packages:
	scripts/node-packages.sh

demo: binaries
	VENV=$(VENV) scripts/demo.sh

# Admission through scheduling gates on a whole cluster in a box (scheduler, controllers, kwok).
demo-full: binaries
	VENV=$(VENV) scripts/demo-full.sh

# Node QoS on a real node (root): two pods burn real CPU, the operator throttles one back under.
demo-qos: binaries node-packages
	VENV=$(VENV) scripts/demo-qos.sh

# The suite on WORKERS pytest-xdist workers, each with control planes of its own: the e2e tests
# mostly wait for a cluster, so two fit on two cores. e2e/conftest.py sends a file's tests, and
# every real-node file, to one worker.
WORKERS ?= 2
test: binaries lint
	scripts/node-packages.sh --if-root
	$(BIN)/pytest --numprocesses $(WORKERS)

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

unit: venv
	$(BIN)/pytest tests

# The unit suite and the linters on the newest versions pyproject.toml's ranges allow, in a venv
# of their own: run it, then `make lock UPGRADE=1` to take those versions into the lock.
test-latest:
	$(PYTHON) -m venv --clear .venv-latest
	.venv-latest/bin/pip install --quiet --upgrade pip
	.venv-latest/bin/pip install --quiet --upgrade -e '.[test]'
	.venv-latest/bin/pip freeze --exclude-editable
	touch .venv-latest/bin/.installed
	$(MAKE) lint unit VENV=.venv-latest

# Re-resolve the lock after pyproject.toml changed (kept pins stay; UPGRADE=1 takes the newest
# versions the ranges allow), and the Go wrapper module's go.sum after its go.mod changed.
lock:
	$(PYTHON) -m venv --clear .venv-lock
	.venv-lock/bin/pip install --quiet $(PIP_TOOLS)
	$(COMPILE) --extra test --extra bench -o requirements/dev.txt pyproject.toml
	$(COMPILE) --constraint requirements/dev.txt -o requirements/runtime.txt pyproject.toml
	cd e2e/k8sbins && go mod tidy

e2e: binaries
	scripts/node-packages.sh --if-root
	$(BIN)/pytest e2e

# crds/ is generated from the models in operator/sharekeeper/api/ (tests/api/test_generated_crds.py fails
# when the files differ from what the models generate).
crds: venv
	$(BIN)/sharekeeper crds crds/

bench: venv
	$(BIN)/python benchmarks/bench_shares.py

clean:
	rm -rf $(VENV) .venv-latest .venv-lock .pytest_cache .mypy_cache .ruff_cache .hypothesis
