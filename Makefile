# kubetrain: `make demo` trains cifar_mixup on digits with 2 Horovod ranks; `make test` runs every test tier.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
RUNS ?= runs/demo

.PHONY: setup demo test unit lint

setup:
	.ci/setup

demo: setup
	$(PY) -m cifar_mixup.demo --out $(RUNS)

test: lint
	tests/controlplane/build.sh
	$(PY) -m pytest -q tests -p no:cacheprovider

unit: setup
	$(PY) -m pytest -q tests/unit

lint: setup
	$(VENV)/bin/ruff check operator jobs tests
	$(VENV)/bin/mypy -p kubetrain -p trainlib -p cifar_mixup -p mnist -p ucluster -p higgs
