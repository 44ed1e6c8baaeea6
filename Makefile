# kubetrain: `make demo` trains cifar_mixup on digits with 2 Horovod ranks; `make test` runs every test tier.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
RUNS ?= runs/demo
# The tiers after unit run in this many pytest-xdist workers, one whole tier per worker at a time, then the jobs tier's
# modules to whichever worker is free (tests/conftest.py). Three took a warm run here from 36.7 to 28.0 minutes: the
# tests of two left a fifth of the CPU idle, waiting on timers, pods and containers (docs/development.md).
LANES ?= 3
# The training programs: each package under jobs/ that ships a job.yaml (images/build.sh and tests find them so too).
PROGRAMS := $(patsubst jobs/%/job.yaml,%,$(wildcard jobs/*/job.yaml))
# Each run's per-test times (JUnit XML) and the CPU's use during the tiers (vmstat every 10 s), kept on the machine with
# the other caches: where CI's time goes, and whether the cores wait.
REPORTS := $(or $(KUBETRAIN_CACHE),$(HOME)/.cache/kubetrain)/test-reports
RUN_ID := $(shell date -u +%Y%m%dT%H%M%SZ)-$(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)

.PHONY: setup demo test unit lint images

setup:
	.ci/setup

demo: setup
	$(PY) -m cifar_mixup.demo --out $(RUNS)

# Every kubetrain image, built into the local Docker engine (started if none runs): base, operator, one per program.
images: setup
	images/build.sh

# The Go builds (control plane, gang schedulers, Kueue, mpi-operator) need nothing but Go, so they start at once, in
# the background, beside lint, the unit tier and the images, whose downloads and copies leave the cores idle on a new
# machine (a second run finds them all built). Cheapest first in the foreground: lint beside the unit tier (mostly one
# process each; a broken unit test or lint fails the run before the images), then the images; then the builds that
# need both (the own-image test images, the kind node image), then the other tiers, LANES at a time (the slowest
# tests listed at the end).
GO_BUILDS := tests/controlplane/build.sh tests/controlplane/build-gang-schedulers.sh tests/controlplane/build-kueue.sh \
  tests/bench/peer/build.sh
test:
	mkdir -p $(REPORTS)
	vmstat -n -t 10 >$(REPORTS)/$(RUN_ID)-vmstat.txt & vmstat=$$!; \
	log=$(REPORTS)/$(RUN_ID)-go-builds.log; \
	echo "Go builds in the background: $$log"; \
	setsid bash -c 'for build in "$$@"; do "$$build" || exit; done' go-builds $(GO_BUILDS) >$$log 2>&1 & builds=$$!; \
	if ! { $(MAKE) --no-print-directory --jobs=2 --output-sync=target RUN_ID=$(RUN_ID) lint unit && \
	      images/build.sh; }; then kill -- -$$builds 2>/dev/null; kill $$vmstat; exit 1; fi; \
	wait $$builds; status=$$?; cat $$log; \
	[ $$status = 0 ] && tests/images/byo/build.sh && tests/e2e/kind-node/build.sh || { kill $$vmstat; exit 1; }; \
	$(PY) -m pytest -q tests --ignore=tests/unit -p no:cacheprovider --durations=25 \
	  -n $(LANES) --dist loadgroup --no-loadscope-reorder --junitxml=$(REPORTS)/$(RUN_ID)-tiers.xml; \
	status=$$?; kill $$vmstat; exit $$status

# In two workers: lint beside it takes 10 s of a warm run, and one process left a core idle for two minutes.
unit: setup
	mkdir -p $(REPORTS)
	$(PY) -m pytest -q tests/unit -p no:cacheprovider -n 2 --junitxml=$(REPORTS)/$(RUN_ID)-unit.xml

# Python (ruff, mypy), every shell script (shellcheck: .ci/shell-scripts lists them) and Dockerfile (hadolint).
lint: setup
	$(VENV)/bin/ruff check operator jobs tests
	$(VENV)/bin/mypy -p kubetrain -p trainlib $(addprefix -p ,$(PROGRAMS))
	$(VENV)/bin/shellcheck $$(.ci/shell-scripts)
	$(VENV)/bin/hadolint $$(git ls-files --cached --others --exclude-standard -- \
	  Dockerfile '*/Dockerfile' '*.Dockerfile' 'Dockerfile.*' '*/Dockerfile.*')
