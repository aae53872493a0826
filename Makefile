# make run  - set up on first use (the app's runtime only, from requirements/run.txt), migrate,
#             serve on http://$(HOST):$(PORT)
# make check - the inner loop: ruff, mypy, import contracts, and the tests that need no browser,
#              no served stack or process, no PostgreSQL and no Redis, in parallel (pytest-xdist)
# make test - set up on first use (adds the dev tools, the benchmark's peers and LiteLLM's
#             gateway environment, each from its lock file), lint (ruff, mypy, import contracts,
#             Django's deployment checks, migrations), run the suite in parallel on SQLite (every
#             test but those needing PostgreSQL or Redis; the soak stack beside it, on PostgreSQL
#             and Redis), then the tests marked `servers` on PostgreSQL and Redis (required in CI;
#             skipped with a warning elsewhere when they are not running), check that every
#             collected test ran in one phase at least, and run bench-smoke
# make bench - the benchmarks side by side with the peers (bench/): writes bench/results/latest.md
#              and the plots; BENCH_ARGS passes options (python -m bench --help)
# make bench-smoke - the same code paths with tiny sizes, in seconds (part of make test)
# make lock - the lock files in requirements/ again, with hashes, from pyproject.toml's ranges and
#             tests/gateway/requirements.txt (uv pip compile); LOCK_ARGS passes options:
#             `make lock LOCK_ARGS=--upgrade`, `make lock LOCK_ARGS='--upgrade-package django'`

PYTHON ?= python3
# Python's bytecode cache is kept, even where the environment turns it off: without it every
# process (each manage.py, daphne, Celery worker and test worker) compiles the ~5,000 modules it
# imports again, which doubles its start (4.5 s instead of 2 s here). uv writes the installed
# packages' bytecode at install (--compile-bytecode); the project's own goes to __pycache__/
# (git ignores it) on first import.
unexport PYTHONDONTWRITEBYTECODE
VENV := .venv
PY := $(VENV)/bin/python
# LiteLLM's proxy for tests/gateway, in a virtualenv of its own: it pins openai<3, websockets<16
# and rich<14, older than the app's environment has.
GATEWAY_VENV := .venv-gateway
# Published MCP servers (mcp-server-time, mcp-server-git, mcp-proxy) for tests/agents/
# test_mcp_published.py, in a virtualenv of their own: their pins are theirs, not the app's.
MCP_VENV := .venv-mcp
HOST ?= 127.0.0.1
PORT ?= 8000
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/rollback
TEST_REDIS_URL ?= redis://127.0.0.1:6379/15
PYTEST_ARGS ?=
# `make lint` runs Django's deployment checklist on production settings (DJANGO_DEBUG=0), with a
# key made for this check only.
DEPLOY_CHECK_ENV := DJANGO_DEBUG=0 DJANGO_ALLOWED_HOSTS=rollback.example \
	DJANGO_SECRET_KEY=deploy-check-only-not-a-secret-7Hq2Vx9LmR4tWz8KpN3cYb6FjD5sGa \
	DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS=1 DJANGO_SECURE_HSTS_PRELOAD=1

.PHONY: run check test test-sqlite test-soak test-postgres test-count lint lint-then-sqlite \
	install lock bench bench-smoke worker clean

# Every environment installs exact versions from a lock file in requirements/ (`make lock` makes
# them), each version with its hashes: run.txt the app's dependencies; dev.txt those and the dev
# tools, bench.txt those and the benchmark's peers, each with the same versions as the one before
# it, so installing the runtime first and the rest later changes no version. Each package's
# bytecode is compiled as it is installed. A stamp per lock
# file: an edited lock installs again. The installer is uv, pinned, in a virtualenv of its own
# made from Python alone; it takes packages from the indexes pip is configured with
# (scripts/uv_env.py reads them from `pip config list`).
UV_VERSION := 0.13.8
UV_VENV := .venv-uv
UV := $(UV_VENV)/bin/uv
UV_ENV = $(shell $(PYTHON) scripts/uv_env.py)
UV_INSTALL = $(UV_ENV) $(UV) pip install --quiet --require-hashes --no-deps --compile-bytecode

$(UV_VENV)/.installed-$(UV_VERSION):
	test -x $(UV_VENV)/bin/python || $(PYTHON) -m venv $(UV_VENV)
	$(UV_VENV)/bin/python -m pip install --quiet uv==$(UV_VERSION)
	touch $@

$(VENV)/.run-installed: requirements/run.txt | $(UV_VENV)/.installed-$(UV_VERSION)
	test -x $(PY) || $(UV_ENV) $(UV) venv --quiet --seed --python $(PYTHON) $(VENV)
	$(UV_INSTALL) --python $(PY) -r requirements/run.txt
	touch $@

$(VENV)/.dev-installed: requirements/dev.txt $(VENV)/.run-installed
	$(UV_INSTALL) --python $(PY) -r requirements/dev.txt
	touch $@

# The benchmark's peers (LangGraph, agno's SqliteDb, matplotlib): the `bench` extra.
$(VENV)/.bench-installed: requirements/bench.txt $(VENV)/.dev-installed
	$(UV_INSTALL) --python $(PY) -r requirements/bench.txt
	touch $@

$(GATEWAY_VENV)/.installed: requirements/gateway.txt | $(UV_VENV)/.installed-$(UV_VERSION)
	test -x $(GATEWAY_VENV)/bin/python || $(UV_ENV) $(UV) venv --quiet --seed --python $(PYTHON) $(GATEWAY_VENV)
	$(UV_INSTALL) --python $(GATEWAY_VENV)/bin/python -r requirements/gateway.txt
	touch $@

$(MCP_VENV)/.installed: requirements/mcp.txt | $(UV_VENV)/.installed-$(UV_VERSION)
	test -x $(MCP_VENV)/bin/python || $(UV_ENV) $(UV) venv --quiet --seed --python $(PYTHON) $(MCP_VENV)
	$(UV_INSTALL) --python $(MCP_VENV)/bin/python -r requirements/mcp.txt
	touch $@

# What the tests need: the dev tools, the gateway and the published MCP servers (bench-smoke
# adds the bench extra itself).
install: $(VENV)/.dev-installed $(GATEWAY_VENV)/.installed $(MCP_VENV)/.installed

# The locks are made for Python 3.11, the oldest the project supports, whatever python3 is here.
# --upgrade (or --upgrade-package NAME) in LOCK_ARGS takes newer versions; without it, the
# versions already in a lock are kept where the ranges allow.
LOCK_ARGS ?=
UV_COMPILE = $(UV_ENV) $(UV) pip compile --quiet --custom-compile-command "make lock" \
	--python-version 3.11 --generate-hashes \
	--no-emit-index-url --no-emit-find-links

lock: $(UV_VENV)/.installed-$(UV_VERSION)
	$(UV_COMPILE) $(LOCK_ARGS) pyproject.toml -o requirements/run.txt
	$(UV_COMPILE) $(LOCK_ARGS) pyproject.toml --extra dev -c requirements/run.txt -o requirements/dev.txt
	$(UV_COMPILE) $(LOCK_ARGS) pyproject.toml --extra dev --extra bench -c requirements/dev.txt \
		-o requirements/bench.txt
	$(UV_COMPILE) $(LOCK_ARGS) tests/gateway/requirements.txt -o requirements/gateway.txt
	$(UV_COMPILE) $(LOCK_ARGS) tests/mcp_servers/requirements.txt -o requirements/mcp.txt

run: $(VENV)/.run-installed
	$(PY) manage.py migrate --noinput
	@echo "Rollback is serving on http://$(HOST):$(PORT)/"
	$(PY) -m rollback_site.serve -b $(HOST) -p $(PORT)

worker: $(VENV)/.run-installed
	$(VENV)/bin/celery -A rollback_site worker --loglevel INFO

# The static checks: no test, no gateway virtualenv.
LINT_ENV := env -u DATABASE_URL -u REDIS_URL
lint: $(VENV)/.dev-installed
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(LINT_ENV) $(PY) -m mypy
	$(VENV)/bin/lint-imports
	$(LINT_ENV) $(PY) manage.py makemigrations --check --dry-run
	$(LINT_ENV) $(DEPLOY_CHECK_ENV) $(PY) manage.py check --deploy --fail-level WARNING

# The tests run in parallel processes (pytest-xdist), more of them than cores: many tests spend
# their time waiting for a served process, a socket or a browser.
WORKERS ?= 3
TEST_REPORTS := var/test-reports
# The PostgreSQL/Redis phase: four workers, each on a Redis database of its own
# (tests/workers.py); each served stack's module (tests/deploy, the e2e worker test) runs in one
# of them, on its database. Most of a stack's time is spent waiting (sockets kept open for
# minutes, processes killed and restarted), so more workers than cores.
TEST_REDIS_DBS ?= 15,14,13,12
PG_WORKERS ?= 4
# The SQLite phase: the two halves of the browser tests in two workers, the rest in the others.
SQLITE_WORKERS ?= 4
# The inner loop: the static checks, then the tests that need neither a browser, nor PostgreSQL,
# nor Redis, nor the served stacks, in parallel.
check: $(VENV)/.dev-installed
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(LINT_ENV) $(PY) -m mypy
	$(VENV)/bin/lint-imports
	$(LINT_ENV) $(PY) -m pytest -q -n $(WORKERS) -p no:cacheprovider \
		--ignore=tests/e2e --ignore=tests/deploy --ignore=tests/gateway \
		-m "not e2e and not postgres and not redis and not served" $(PYTEST_ARGS)

# Every test but those that need PostgreSQL or Redis (tests/conftest.py marks them), browser
# tests included, on SQLite; the 25 slowest are listed at the end.
test-sqlite: install
	@echo "== The suite on SQLite"
	mkdir -p $(TEST_REPORTS)
	$(LINT_ENV) $(PY) -m pytest -n $(SQLITE_WORKERS) --dist loadgroup \
		--no-loadscope-reorder \
		-m "not postgres and not redis" \
		--durations=25 --collected-list=$(TEST_REPORTS)/collected.txt \
		--servers-files=$(TEST_REPORTS)/servers-files.txt \
		--junitxml=$(TEST_REPORTS)/sqlite.xml $(PYTEST_ARGS)

# The soak stack (tests/deploy/test_soak.py: sockets kept open for minutes, mostly waiting) on
# PostgreSQL and Redis, in a run of its own: `make test` runs it beside the SQLite phase, whose
# two cores it hardly uses, rather than at the end of the PostgreSQL phase, which it made four
# minutes long, on a Redis database of its own; the PostgreSQL phase leaves the module out.
SOAK := tests/deploy/test_soak.py
SOAK_REDIS_URL ?= redis://127.0.0.1:6379/11
test-soak: install
	@mkdir -p $(TEST_REPORTS) && rm -f $(TEST_REPORTS)/soak.xml
	@if $(PY) scripts/check_services.py "$(TEST_DATABASE_URL)" "$(SOAK_REDIS_URL)"; then \
		echo "== The soak stack on PostgreSQL/Redis"; \
		DATABASE_URL="$(TEST_DATABASE_URL)" REDIS_URL="$(SOAK_REDIS_URL)" \
			ROLLBACK_REQUIRE_POSTGRES=1 $(PY) -m pytest -m servers --durations=5 \
			--junitxml=$(TEST_REPORTS)/soak.xml $(SOAK) $(PYTEST_ARGS); \
	elif [ "$$CI" = "true" ]; then \
		echo "CI needs PostgreSQL and Redis running (see the README)."; exit 1; \
	else \
		echo "WARNING: PostgreSQL/Redis not running: the soak stack was SKIPPED."; \
	fi

# The tests marked `servers` (tests/conftest.py: needs_servers) on PostgreSQL and Redis, but the
# soak stack's (test-soak). PG_TESTS is what the phase collects: the whole suite, or under
# `make test` the files the SQLite phase found such tests in (`--servers-files`), which saves
# most of a collection of the suite (a test left out would fail test-count).
PG_TESTS ?= tests
test-postgres: install
	@mkdir -p $(TEST_REPORTS) && rm -f $(TEST_REPORTS)/postgres.xml
	@if $(PY) scripts/check_services.py "$(TEST_DATABASE_URL)" "$(TEST_REDIS_URL)"; then \
		echo "== The PostgreSQL/Redis tests"; \
		DATABASE_URL="$(TEST_DATABASE_URL)" REDIS_URL="$(TEST_REDIS_URL)" \
			ROLLBACK_TEST_REDIS_DBS="$(TEST_REDIS_DBS)" ROLLBACK_REQUIRE_POSTGRES=1 \
			$(PY) -m pytest -n $(PG_WORKERS) --dist loadgroup --no-loadscope-reorder -m servers \
			--durations=25 --deselect=$(SOAK) \
			--junitxml=$(TEST_REPORTS)/postgres.xml $(PG_TESTS) $(PYTEST_ARGS); \
	elif [ "$$CI" = "true" ]; then \
		echo "CI needs PostgreSQL and Redis running (see the README)."; exit 1; \
	else \
		echo "WARNING: PostgreSQL/Redis not running: the PostgreSQL phase was SKIPPED."; \
	fi

# No test lost: every test the SQLite phase collected (`--collected-list`: before `-m` left any
# out) ran in one phase at least (scripts/check_test_counts.py).
test-count:
	@if [ -f $(TEST_REPORTS)/postgres.xml ] || [ "$$CI" = "true" ]; then \
		$(PY) scripts/check_test_counts.py $(TEST_REPORTS)/collected.txt \
			$(TEST_REPORTS)/sqlite.xml $(TEST_REPORTS)/postgres.xml $(TEST_REPORTS)/soak.xml; \
	else \
		echo "WARNING: no PostgreSQL phase: the tests it runs were not counted."; \
	fi

# Three jobs side by side: the static checks then the SQLite phase; the benchmarks' smoke run
# (beside mypy: neither is timed); the soak stack (minutes of waiting, beside the SQLite phase).
# Then the PostgreSQL phase, alone: with it beside the SQLite phase too, two loaded cores slowed
# browser tests past their bounds. Then the count.
test: install $(VENV)/.bench-installed
	$(MAKE) --no-print-directory -j3 --output-sync=target lint-then-sqlite bench-smoke test-soak
	$(MAKE) --no-print-directory test-postgres \
		PG_TESTS="$$(grep -vxF $(SOAK) $(TEST_REPORTS)/servers-files.txt | tr '\n' ' ')"
	$(MAKE) --no-print-directory test-count

lint-then-sqlite:
	$(MAKE) --no-print-directory lint
	$(MAKE) --no-print-directory test-sqlite

# The benchmark uses its own databases (PostgreSQL: rollback_bench_*, or BENCH_DATABASE_PREFIX's;
# Redis: BENCH_REDIS_URL's database, and for the bystander's four stacks the three numbered below
# it: 9, 8, 7 and 6 by default), and flushes them.
BENCH_ARGS ?=
BENCH_REDIS_URL ?= redis://127.0.0.1:6379/9
BENCH_ENV := BENCH_REDIS_URL=$(BENCH_REDIS_URL) BENCH_DATABASE_URL=$(TEST_DATABASE_URL)

bench: $(VENV)/.bench-installed
	$(BENCH_ENV) $(PY) -m bench $(BENCH_ARGS)

# A tiny run of every benchmark and peer, into a scratch directory: it keeps `make bench`
# working. Without PostgreSQL and Redis (outside CI) only their parts are left out, with a warning.
bench-smoke: $(VENV)/.bench-installed
	@if $(PY) scripts/check_services.py "$(TEST_DATABASE_URL)" "$(BENCH_REDIS_URL)"; then \
		$(BENCH_ENV) $(PY) -m bench --smoke --out var/bench-smoke; \
	elif [ "$$CI" = "true" ]; then \
		echo "CI needs PostgreSQL and Redis running (see the README)."; exit 1; \
	else \
		echo "WARNING: PostgreSQL/Redis not running: the smoke run leaves out their parts."; \
		$(BENCH_ENV) $(PY) -m bench --smoke --engines sqlite --skip stack --out var/bench-smoke; \
	fi

clean:
	rm -rf $(VENV) $(GATEWAY_VENV) $(UV_VENV) var/staticfiles .pytest_cache .ruff_cache
