# make run  - set up on first use, migrate, serve on http://$(HOST):$(PORT)
# make test - set up on first use, lint (ruff, mypy, import contracts, Django's deployment
#             checks), check migrations, run the suite on SQLite, then again on
#             PostgreSQL and Redis (required in CI; skipped with a warning elsewhere when they
#             are not running)
# make bench - the benchmarks side by side with the peers (bench/): writes bench/results/latest.md
#              and the plots; BENCH_ARGS passes options (python -m bench --help)
# make bench-smoke - the same code paths with tiny sizes, in seconds (part of make test)

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

.PHONY: run test test-sqlite test-postgres lint install bench bench-smoke worker clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

$(GATEWAY_VENV)/.installed: tests/gateway/requirements.txt
	test -x $(GATEWAY_VENV)/bin/python || $(PYTHON) -m venv $(GATEWAY_VENV)
	$(GATEWAY_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(GATEWAY_VENV)/bin/python -m pip install --quiet -r tests/gateway/requirements.txt
	touch $@

# The benchmark's peers (LangGraph, agno's SqliteDb, matplotlib): the `bench` extra.
$(VENV)/.bench-installed: $(VENV)/.installed pyproject.toml
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	touch $@

install: $(VENV)/.installed $(GATEWAY_VENV)/.installed

run: install
	$(PY) manage.py migrate --noinput
	$(PY) manage.py collectstatic --noinput --verbosity 0
	@echo "Rollback is serving on http://$(HOST):$(PORT)/"
	$(PY) -m rollback_site.serve -b $(HOST) -p $(PORT)

worker: install
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
	rm -rf $(VENV) $(GATEWAY_VENV) var/staticfiles .pytest_cache .ruff_cache
