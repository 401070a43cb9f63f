# `make test` and `make demo` work on a fresh machine with only Python 3.11+, pip and make.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
EXTRAS ?= dev,dask,inspect
# Requirements added to the install, e.g. another Prefect than the newest pyproject.toml
# allows: PREFECT='prefect==3.9.0' with VENV=.venv-oldest (as .ci/run does).
PREFECT ?=

# Offline-friendly Prefect defaults (the user's environment still wins for the CLI).
export DO_NOT_TRACK := 1
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS := 60

.PHONY: install browser test test-fast test-quick demo lint format bench soak clean

install: $(VENV)/.installed

# pip shows each package as it goes: a first install downloads ~150 MB (Prefect, scipy,
# matplotlib, dask) and takes a few minutes; later runs skip this step.
$(VENV)/.installed: pyproject.toml
	@echo "installing honesteval and its dependencies into $(VENV) (a first install takes a few minutes)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --disable-pip-version-check --progress-bar on -e '.[$(EXTRAS)]' $(foreach spec,$(PREFECT),'$(spec)')
	@echo "installed into $(VENV)"
	touch $@

# The browser tests open report.html and the Prefect UI in Debian's chromium (headless): it is
# installed here when missing, never downloaded at test time.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium for the browser tests (apt-get)"; \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium; \
	  else sudo apt-get update -qq && sudo apt-get install -y -qq chromium; fi; }

# Three pytest-xdist workers: most end-to-end tests wait on CLI processes and Prefect servers,
# so three keep 2 cores busy. The suite is CPU-bound (792 tests: 1,383 CPU s, 13 min 15 s here;
# four workers took as long), so its time is cut by doing less work: set-ups shared
# per module and per session, see docs/performance.md. `--dist worksteal` (pyproject.toml) lets
# an idle worker take half of a busy one's queue, so none idles while the longest tests end.
# A failed test fails the run: a flaky test is a bug, not something to run again.
TEST_WORKERS ?= 3

test: install browser
	env -u PREFECT_API_URL $(BIN)/python -m pytest -n $(TEST_WORKERS)

# The fast tier: tests/unit and the cheap doctests, no Prefect, no server (seconds).
test-fast: install
	env -u PREFECT_API_URL $(BIN)/python -m pytest -n $(TEST_WORKERS) -m "not slow" tests/unit src/honesteval/stats src/honesteval/api.py \
	  src/honesteval/adapters/inspect_eval.py src/honesteval/views/compare.py \
	  src/honesteval/gating/spend.py

# The middle tier, a developer's loop (a few minutes): one end-to-end test of each feature,
# through real CLI processes, flows and Prefect servers (the `quick` marker).
test-quick: install browser
	env -u PREFECT_API_URL $(BIN)/python -m pytest -n $(TEST_WORKERS) -m quick

# Gates the two circle-packing candidates; it says what it runs, shows progress, and ends
# with the gate's verdict.
demo: install
	$(BIN)/honesteval demo

lint: install
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/python -m mypy src

format: install
	$(BIN)/ruff format . && $(BIN)/ruff check --fix .

bench: install
	$(BIN)/python bench/overhead.py

# Not in CI: ~30 minutes of evaluate/gate/SIGKILL/restart against one server; MINUTES=2 for a taste.
MINUTES ?= 30
soak: install
	env -u PREFECT_API_URL $(BIN)/python -m tests.soak --minutes $(MINUTES)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache build dist src/*.egg-info
