# Two commands on a fresh machine: `make run` and `make test`. Both create .venv and
# install on first use; later runs reinstall only when pyproject.toml changes.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: install run test test-integrations test-fast test-embedded lint fmt audit bench bench-load bench-hot bench-reentry clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11+ is needed")'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	@touch $(STAMP)

install: $(STAMP)

# A local .env with a fresh credential key, written once; never committed.
.env:
	@$(PY) -c 'from cryptography.fernet import Fernet; print("OMNIROUTE_CREDENTIAL_KEY=k1:" + Fernet.generate_key().decode())' > .env
	@echo "Wrote .env with a new OMNIROUTE_CREDENTIAL_KEY (keep it: it decrypts stored credentials)."

# The dashboard's port: `make run RUN_PORT=8001` when 8000 is taken.
RUN_PORT ?= 8000
export RUN_PORT

run: install .env
	@mkdir -p var/broker/processed
	$(PY) manage.py migrate --noinput
	$(PY) manage.py first_run
	@echo "Serving http://127.0.0.1:$(RUN_PORT) with a Celery worker and beat; Ctrl-C stops all of them."
	@# Ctrl-C is the way to stop: honcho then exits 130 (SIGINT) or 143 (SIGTERM), a
	@# clean stop, not an error for make to report.
	@$(VENV)/bin/honcho --no-prefix -f Procfile start; status=$$?; \
	if [ $$status -eq 130 ] || [ $$status -eq 143 ]; then \
		echo "Stopped: web, worker and beat are down."; \
	else exit $$status; fi

# The suite's filesystem broker (when CELERY_BROKER_URL names none) is its own, emptied
# first: never `make run`'s var/broker, whose worker would take the tests' tasks, and
# never what an earlier run left behind.
TEST_BROKER_DIR := $(abspath var/test-broker)
# `make test-fast` runs the independent tests on TEST_WORKERS processes (pytest-xdist; each
# its own test database).
TEST_WORKERS ?= 2
UNIT := -m "not integration and not e2e"
TEST_ENV := CELERY_FILESYSTEM_BROKER_DIR=$(TEST_BROKER_DIR)
# The tests that start a Celery worker, a broker or Chromium (markers integration, e2e) run
# on TEST_WORKERS processes too, each with queues and a filesystem broker of its own
# (execnet's `env:` in each --tx spec, read by the settings at start-up): a worker one
# test starts consumes only its own process's queues, so it never takes a task another
# process's test sent (to another test database). By file, so a module's Chromium and
# fixtures start once per module.
WORKER_TX := --dist loadfile $(foreach n,$(shell seq $(TEST_WORKERS)),--tx 'popen//env:CELERY_TASK_DEFAULT_QUEUE=omniroute-test$(n)//env:CELERY_NOTIFICATIONS_QUEUE=omniroute-notifications-test$(n)//env:CELERY_FILESYSTEM_BROKER_DIR=$(TEST_BROKER_DIR)/$(n)')

# The whole suite: the independent tests on TEST_WORKERS processes (pytest-xdist, each
# its own test database; 3,600 tests in 4 min where one process took over 20), then those
# that start a Celery worker, a broker or Chromium (on TEST_WORKERS processes with queues
# of their own, WORKER_TX), then the LiteLLM plugin's end-to-end tests.
test: install
	rm -rf $(TEST_BROKER_DIR)
	$(TEST_ENV) $(PY) -m pytest -n $(TEST_WORKERS) $(UNIT) $(PYTEST_ARGS)
	$(PY) -m pytest $(WORKER_TX) -m "integration or e2e" $(PYTEST_ARGS)
	$(MAKE) test-integrations

# The inner loop: the independent tests only, on both cores, stopping at the first failure.
# xdist's default distribution keeps pytest-django's order in each process (the tests that
# flush the database last): by file (--dist loadfile), a flush ran before other files'
# tests and took the data migrations' rows from under them (62 failures).
test-fast: install
	$(TEST_ENV) $(PY) -m pytest -n $(TEST_WORKERS) -x $(UNIT) $(PYTEST_ARGS)

# What `make run` runs, whatever DATABASE_URL and CELERY_BROKER_URL say: the tests that
# start a worker and a broker, on SQLite and the embedded (filesystem) broker. CI runs it
# beside `make test` on PostgreSQL + Redis. Scaling out (several web processes and
# workers) is PostgreSQL's and a network broker's: the embedded pair serves one host.
test-embedded: install
	rm -rf $(TEST_BROKER_DIR)
	env -u DATABASE_URL -u CELERY_BROKER_URL $(TEST_ENV) $(PY) -m pytest -m integration \
		--ignore tests/integration/test_scale_out.py tests/integration $(PYTEST_ARGS)

# The LiteLLM plugin against the real LiteLLM and its proxy server, in its own venv:
# litellm brings its own pins (openai, tokenizers, pydantic, httpx...) that must never move
# the server's. Its tests start the real server, a Celery worker and beat with the
# server's venv ($(PY)), on PostgreSQL / Redis when DATABASE_URL / CELERY_BROKER_URL name
# them (a database and a queue of their own, dropped afterwards).
INTEGRATIONS_VENV ?= var/integrations-venv
INT_PY := $(INTEGRATIONS_VENV)/bin/python
INT_STAMP := $(INTEGRATIONS_VENV)/.installed-stamp
INT_WHEELS := var/integrations-wheels
# The plugin supports LiteLLM from the oldest to the newest release below: the whole
# end-to-end suite runs on the newest; the oldest runs the files that exercise LiteLLM's
# hooks (Router and proxy), so CI pays about 5 more minutes, not a second full run
# (integrations/litellm/README.md, "Tests"). Switching is one wheel (`--no-deps`).
LITELLM_OLDEST ?= 1.110.0
LITELLM_NEWEST ?= 1.110.2
INT_SOURCES := $(shell find integrations/python-client/src integrations/litellm/src -name '*.py')

# The client and the plugin are installed as the wheels they build (each with its own
# version), not from the source tree: what a gateway author installs is what is tested.
$(INT_STAMP): integrations/python-client/pyproject.toml integrations/litellm/pyproject.toml $(INT_SOURCES)
	test -x $(INT_PY) || $(PYTHON) -m venv $(INTEGRATIONS_VENV)
	$(INT_PY) -m pip install --quiet --upgrade pip "setuptools>=69" wheel
	rm -rf $(INT_WHEELS)
	$(INT_PY) -m pip wheel --quiet --no-deps --no-build-isolation -w $(INT_WHEELS) \
		integrations/python-client integrations/litellm
	rm -rf integrations/python-client/build integrations/litellm/build  # not for mypy to find
	$(INT_PY) -m pip uninstall --quiet -y omniroute-client omniroute-litellm
	$(INT_PY) -m pip install --quiet $(INT_WHEELS)/omniroute_client-*.whl \
		"$$(ls $(INT_WHEELS)/omniroute_litellm-*.whl)[proxy]" "litellm==$(LITELLM_NEWEST)" "pytest>=8"
	@touch $(INT_STAMP)

test-integrations: install $(INT_STAMP)
	OMNIROUTE_SERVER_PYTHON=$(abspath $(PY)) $(INT_PY) -m pytest integrations/litellm/tests $(INTEGRATIONS_PYTEST_ARGS)
	$(INT_PY) -m pip install --quiet --no-deps "litellm==$(LITELLM_OLDEST)"
	OMNIROUTE_SERVER_PYTHON=$(abspath $(PY)) $(INT_PY) -m pytest \
		integrations/litellm/tests/test_end_to_end.py integrations/litellm/tests/test_proxy.py \
		$(INTEGRATIONS_PYTEST_ARGS); status=$$?; \
	$(INT_PY) -m pip install --quiet --no-deps "litellm==$(LITELLM_NEWEST)"; exit $$status

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy .
	$(VENV)/bin/lint-imports

# Known-vulnerability audit of the installed dependencies (PyPI's advisory data).
audit: install
	$(VENV)/bin/pip-audit --skip-editable

fmt: install
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# Benchmarks print figures (see bench/README.md); they need PostgreSQL and Debian's wrk,
# on DATABASE_URL (default postgres://...:5432/omniroute_bench; hot_path.py empties it).
# `make bench` runs all three; each has its own target; BENCH_ARGS passes flags through,
# e.g. `make bench-hot BENCH_ARGS="--phases mixed --duration 5"`.
bench: bench-load bench-hot bench-reentry

bench-load: install
	@command -v wrk >/dev/null || { echo "bench needs wrk: apt-get install wrk"; exit 1; }
	$(PY) bench/load.py $(BENCH_ARGS)

bench-hot: install
	@command -v wrk >/dev/null || { echo "bench needs wrk: apt-get install wrk"; exit 1; }
	$(PY) bench/hot_path.py $(BENCH_ARGS)

bench-reentry: install
	$(PY) bench/reentry_lag.py $(BENCH_ARGS)

clean:
	rm -rf var .pytest_cache .mypy_cache .ruff_cache .import_linter_cache .grimp_cache
