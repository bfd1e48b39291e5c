# Two commands on a fresh machine: `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck pytest bench clean chromium

include mk/gpu.mk
include mk/bench.mk

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "Python 3.11 is needed ($(PYTHON) not found)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/pagemill convert samples/* -o out
	@echo "Markdown, page images and manifest.json for each sample are in out/<name>/"

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

# Postgres and Redis must be running on 127.0.0.1:5432 and :6379 (see README);
# the tests start SeaweedFS themselves and create and drop their own databases.
# The console's browser tests drive Debian's Chromium through its chromedriver.
chromium:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium chromium-driver \
		|| { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium chromium-driver; }; \
	else \
		echo "The console's browser tests need Chromium and chromedriver on PATH:"; \
		echo "  Debian/Ubuntu: sudo apt-get install chromium chromium-driver"; \
		echo "  elsewhere: install Chromium and the chromedriver of the same version"; \
		exit 1; \
	fi

# The tests run in TEST_PROCESSES processes (pytest-xdist), each taking a whole file at a
# time, so a file's shared stack stays in one process. Many tests wait on the worker
# processes they start, so two test processes keep two cores busier than one.
TEST_PROCESSES ?= 2

pytest: $(STAMP) bench-tools chromium
	$(BIN)/python -m pytest -n $(TEST_PROCESSES) --dist loadfile --durations=30 --cov=pagemill --cov=api --cov=worker --cov-report=term:skip-covered

# test-gpu runs the vLLM engine's tests in their own environment (.venv-vllm);
# it goes before pytest so the benchmark smoke run (tests/bench) finds that
# environment and runs the engine-saturation figures too.
test: lint typecheck test-gpu pytest

clean:
	rm -rf $(VENV) out .mypy_cache .ruff_cache .pytest_cache
