# make run  - set up on first use (the app's runtime only, from requirements/run.txt), migrate,
#             serve on http://$(HOST):$(PORT)
# make test - set up on first use (adds the dev tools, the benchmark's peers and LiteLLM's
#             gateway environment, each from its lock file), lint (ruff, mypy, import contracts,
#             Django's deployment checks), check migrations, run the suite on SQLite, then again
#             on PostgreSQL and Redis (required in CI; skipped with a warning elsewhere when they
#             are not running)
# make bench - the benchmarks side by side with the peers (bench/): writes bench/results/latest.md
#              and the plots; BENCH_ARGS passes options (python -m bench --help)
# make bench-smoke - the same code paths with tiny sizes, in seconds (part of make test)
# make lock - the lock files in requirements/ again, from pyproject.toml's ranges and
#             tests/gateway/requirements.txt (pip-tools' pip-compile); LOCK_ARGS passes options:
#             `make lock LOCK_ARGS=--upgrade`, `make lock LOCK_ARGS='--upgrade-package django'`

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# LiteLLM's proxy for tests/gateway, in a virtualenv of its own: it pins openai<3, websockets<16
# and rich<14, older than the app's environment has.
GATEWAY_VENV := .venv-gateway
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

.PHONY: run test test-sqlite test-postgres lint install lock bench bench-smoke worker clean

# Every environment installs exact versions from a lock file in requirements/ (`make lock` makes
# them): run.txt the app's dependencies; dev.txt those and the dev tools, bench.txt those and the
# benchmark's peers, each with the same versions as the one before it, so installing the runtime
# first and the rest later changes no version. A stamp per lock file: an edited lock installs again.
$(VENV)/.run-installed: requirements/run.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -r requirements/run.txt
	touch $@

$(VENV)/.dev-installed: requirements/dev.txt $(VENV)/.run-installed
	$(PY) -m pip install --quiet -r requirements/dev.txt
	touch $@

# The benchmark's peers (LangGraph, agno's SqliteDb, matplotlib): the `bench` extra.
$(VENV)/.bench-installed: requirements/bench.txt $(VENV)/.dev-installed
	$(PY) -m pip install --quiet -r requirements/bench.txt
	touch $@

$(GATEWAY_VENV)/.installed: requirements/gateway.txt
	test -x $(GATEWAY_VENV)/bin/python || $(PYTHON) -m venv $(GATEWAY_VENV)
	$(GATEWAY_VENV)/bin/python -m pip install --quiet -r requirements/gateway.txt
	touch $@

# What the tests need: the dev tools and the gateway (bench-smoke adds the bench extra itself).
install: $(VENV)/.dev-installed $(GATEWAY_VENV)/.installed

# pip-tools in a virtualenv of its own, never in the app's. The locks are made with Python 3.11,
# the oldest the project supports (`PYTHON=python3.11 make lock` where python3 is newer).
LOCK_VENV := .venv-lock
LOCK_ARGS ?=
PIP_COMPILE := CUSTOM_COMPILE_COMMAND="make lock" $(LOCK_VENV)/bin/pip-compile --quiet \
	--strip-extras --allow-unsafe --no-emit-index-url --no-emit-find-links --no-emit-trusted-host

lock:
	test -x $(LOCK_VENV)/bin/pip-compile || $(PYTHON) -m venv $(LOCK_VENV)
	test -x $(LOCK_VENV)/bin/pip-compile || $(LOCK_VENV)/bin/python -m pip install --quiet pip-tools==7.6.2
	$(PIP_COMPILE) $(LOCK_ARGS) pyproject.toml -o requirements/run.txt
	$(PIP_COMPILE) $(LOCK_ARGS) pyproject.toml --extra dev -c requirements/run.txt -o requirements/dev.txt
	$(PIP_COMPILE) $(LOCK_ARGS) pyproject.toml --extra dev --extra bench -c requirements/dev.txt \
		-o requirements/bench.txt
	$(PIP_COMPILE) $(LOCK_ARGS) tests/gateway/requirements.txt -o requirements/gateway.txt

run: $(VENV)/.run-installed
	$(PY) manage.py migrate --noinput
	@echo "Rollback is serving on http://$(HOST):$(PORT)/"
	$(PY) -m rollback_site.serve -b $(HOST) -p $(PORT)

worker: $(VENV)/.run-installed
	$(VENV)/bin/celery -A rollback_site worker --loglevel INFO

lint: install
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	env -u DATABASE_URL -u REDIS_URL $(PY) -m mypy
	$(VENV)/bin/lint-imports
	env -u DATABASE_URL -u REDIS_URL $(PY) manage.py makemigrations --check --dry-run
	env -u DATABASE_URL -u REDIS_URL $(DEPLOY_CHECK_ENV) $(PY) manage.py check --deploy --fail-level WARNING

test-sqlite: install
	env -u DATABASE_URL -u REDIS_URL $(PY) -m pytest $(PYTEST_ARGS)

test-postgres: install
	@if $(PY) scripts/check_services.py "$(TEST_DATABASE_URL)" "$(TEST_REDIS_URL)"; then \
		echo "== The suite on PostgreSQL and Redis"; \
		DATABASE_URL="$(TEST_DATABASE_URL)" REDIS_URL="$(TEST_REDIS_URL)" \
			ROLLBACK_REQUIRE_POSTGRES=1 $(PY) -m pytest $(PYTEST_ARGS); \
	elif [ "$$CI" = "true" ]; then \
		echo "CI needs PostgreSQL and Redis running (see the README)."; exit 1; \
	else \
		echo "WARNING: PostgreSQL/Redis not running: the PostgreSQL phase was SKIPPED."; \
	fi

test: lint
	@echo "== The suite on SQLite"
	$(MAKE) --no-print-directory test-sqlite
	$(MAKE) --no-print-directory test-postgres
	$(MAKE) --no-print-directory bench-smoke

# The benchmark uses its own databases (PostgreSQL: rollback_bench_*; Redis: BENCH_REDIS_URL).
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
	rm -rf $(VENV) $(GATEWAY_VENV) $(LOCK_VENV) var/staticfiles .pytest_cache .ruff_cache
