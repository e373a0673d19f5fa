# flowledger developer tasks (GNU make). A fresh machine needs only python3, go and make.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PY ?= python3
VENV = .venv
VPY = $(VENV)/bin/python
STAMP = $(VENV)/.installed
MINIO_STATE ?= .minio
MINIO_BUCKET ?= flowledger
PYTEST_ARGS ?=

.PHONY: help setup lock spark-jars minio-build minio-start minio-stop minio-env browser test soak demo lint bench clean

help:
	@echo "make setup        create $(VENV) and install flowledger[dev,server,spark,demo,bench] (when pyproject.toml changed)"
	@echo "make minio-build  build and cache the pinned MinIO binary (needs go)"
	@echo "make minio-start  start MinIO (state in $(MINIO_STATE), bucket $(MINIO_BUCKET)); minio-stop stops it"
	@echo "make test         unit, s3 (moto), minio, spark and faults tiers; PYTEST_ARGS=... passes options to pytest"
	@echo "make soak         the keyed-table life test for SOAK_STEPS steps (default 5000) or SOAK_MINUTES;"
	@echo "                  prints each round's seed; SOAK_SEED=N replays, SOAK_TIER=minio on MinIO"
	@echo "make demo | lint | bench | clean"

setup: $(STAMP)

$(VPY):
	$(PY) -m venv $(VENV)

# Reinstall only when pyproject.toml is newer than the stamp.
$(STAMP): pyproject.toml constraints.txt | $(VPY)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -c constraints.txt -e '.[dev,server,spark,demo,bench]'
	touch $@

# Re-resolve the dependency set into constraints.txt after changing pyproject.toml.
lock:
	rm -rf .venv-lock && $(PY) -m venv .venv-lock
	.venv-lock/bin/pip install -q -e '.[dev,server,spark,demo,bench]'
	.venv-lock/bin/pip freeze --exclude-editable | grep -v '^-e' > constraints.txt
	rm -rf .venv-lock

# hadoop-aws + AWS SDK bundle for PySpark's s3a, cached under ~/.cache/flowledger/spark-jars.
spark-jars: setup
	$(VPY) -m infra.spark jars
	$(VPY) -m infra.openlineage jar

minio-build: setup
	$(VPY) -m infra.minio build

minio-start: minio-build
	$(VPY) -m infra.minio start --state-dir $(MINIO_STATE) --bucket $(MINIO_BUCKET)

# Stdlib only: works even when the venv is gone.
minio-stop:
	$(PY) -m infra.minio stop --state-dir $(MINIO_STATE)

minio-env:
	@$(PY) -m infra.minio env --state-dir $(MINIO_STATE)

# Headless Chromium and its driver from Debian, for the lineage page's browser test (we are
# root on the dev machines and CI; never a browser download of Playwright's or Selenium's).
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
		{ apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver; }

# The tests start their own MinIO on a free port from the cached binary.
# FLOWLEDGER_REQUIRE_TIERS makes the session fail if any of these tiers is skipped or empty.
test: setup minio-build spark-jars browser
	PYTHONPATH=$(CURDIR) FLOWLEDGER_REQUIRE_TIERS=unit,s3,minio,spark,faults \
		$(VENV)/bin/pytest -m "unit or s3 or minio or spark or faults" $(PYTEST_ARGS)

# The keyed-table life test (tests/timeline/keyed/test_keyed_life.py) with a large budget:
# rounds of SOAK_EXAMPLES tables of up to SOAK_TABLE_STEPS steps, a new seed each round, until
# SOAK_STEPS steps ran (or SOAK_MINUTES passed, when set); a failure prints its seed and the
# command that replays it. SOAK_K selects tests (e.g. merge_on_read).
SOAK_STEPS ?= 5000
SOAK_MINUTES ?= 0
SOAK_SEED ?=
SOAK_TIER ?= unit
SOAK_EXAMPLES ?= 10
SOAK_TABLE_STEPS ?= 60
SOAK_K ?=
soak: setup $(if $(filter minio,$(SOAK_TIER)),minio-build)
	PYTHONPATH=$(CURDIR) $(VPY) -m tests.support.life_soak --steps $(SOAK_STEPS) \
		--minutes $(SOAK_MINUTES) --tier $(SOAK_TIER) --examples $(SOAK_EXAMPLES) \
		--table-steps $(SOAK_TABLE_STEPS) $(if $(SOAK_SEED),--seed $(SOAK_SEED)) \
		$(if $(SOAK_K),-k $(SOAK_K))

# The NYC flights pipeline on ./flowledger-data (local FS: no jars needed). REPO=s3://bucket/prefix
# (or FLOWLEDGER_REPO) runs it on MinIO/S3, which needs the s3a jars: fetched once into ~/.cache.
demo: setup
	@case "$(or $(REPO),$(FLOWLEDGER_REPO))" in s3://*|s3a://*) $(MAKE) --no-print-directory spark-jars ;; esac
	$(VENV)/bin/flowledger demo $(if $(REPO),--repo $(REPO))

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/mypy --strict infra

bench: setup minio-build
	PYTHONPATH=$(CURDIR) $(VPY) -m bench

# Never touches ~/.cache (the MinIO binary and Maven/Ivy jars stay cached).
clean: minio-stop
	rm -rf $(VENV) flowledger-data $(MINIO_STATE) .pytest_cache .mypy_cache .ruff_cache *.egg-info
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
