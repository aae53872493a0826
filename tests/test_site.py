"""The site as a whole: settings from the environment, Redis when configured, and the served app."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.core.cache import cache

from tests.procs import free_port, wait_until_answers

ROOT = Path(__file__).resolve().parents[1]


def test_sqlite_default_takes_the_write_lock_up_front():
    if settings.DATABASES["default"]["ENGINE"] != "django.db.backends.sqlite3":
        pytest.skip("the PostgreSQL phase")
    options = settings.DATABASES["default"]["OPTIONS"]
    assert options["transaction_mode"] == "IMMEDIATE"
    assert "journal_mode=WAL" in options["init_command"]


def test_agno_telemetry_is_off():
    assert os.environ["AGNO_TELEMETRY"] == "false"


@pytest.mark.redis
def test_redis_backs_the_cache_and_the_channel_layer():
    assert settings.CACHES["default"]["BACKEND"].endswith("RedisCache")
    cache.set("rollback-test-key", {"n": 1}, 30)
    assert cache.get("rollback-test-key") == {"n": 1}
    layer = get_channel_layer()
    assert type(layer).__name__ == "RedisChannelLayer"
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.send)(channel, {"type": "ping", "n": 2})
    assert async_to_sync(layer.receive)(channel) == {"type": "ping", "n": 2}


def test_the_served_app_gives_the_admin_with_its_static_files(tmp_path):
    """What `make run` does: migrate, then serve with daphne (DEBUG off), which collects the
    static files before it serves."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "REDIS_URL", "DJANGO_DEBUG", "ROLLBACK_REQUIRE_POSTGRES"}
    }
    env["ROLLBACK_VAR_DIR"] = str(tmp_path)
    py = sys.executable
    subprocess.run(  # noqa: S603 - the test's own argument list, no shell
        [py, "manage.py", "migrate", "--noinput"], cwd=ROOT, env=env, check=True, timeout=180
    )
    port = free_port()
    server = subprocess.Popen(  # noqa: S603 - the test's own argument list, no shell
        [py, "-m", "rollback_site.serve", "-b", "127.0.0.1", "-p", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        # Collecting every static file takes a while on a busy machine: a bound of minutes.
        wait_until_answers(f"{base}/admin/login/", server, timeout=240)
        page = urllib.request.urlopen(f"{base}/admin/login/", timeout=5).read().decode()  # noqa: S310 - a local http URL the test built
        assert "Rollback console" in page
        css = page.split('href="')[1].split('"')[0]
        assert css.startswith("/static/")
        assert urllib.request.urlopen(f"{base}{css}", timeout=5).status == 200  # noqa: S310 - a local http URL the test built
        # The console names the app's icon, and /favicon.ico leads to it: no 404 in the admin.
        named = page.split('rel="icon" href="')[1].split('"')[0]
        assert named.startswith("/static/rollback/icon.")
        with urllib.request.urlopen(f"{base}/favicon.ico", timeout=5) as icon:  # noqa: S310 - a local http URL the test built
            assert (icon.status, icon.url) == (200, f"{base}{named}")
            assert icon.headers["Content-Type"] == "image/svg+xml"
            assert icon.read().startswith(b"<svg")
    finally:
        server.terminate()
        server.wait(10)


# --- What a process imports as it starts ---------------------------------------------------------


def fresh_python(code: str, var_dir: Path) -> str:
    """What `code` prints, run by a Python of its own with the app's default settings (no
    database, no Redis, no model server: nothing set)."""
    dropped = {"DATABASE_URL", "REDIS_URL", "ROLLBACK_REQUIRE_POSTGRES", "DJANGO_DEBUG"}
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env.update(DJANGO_SETTINGS_MODULE="rollback_site.settings", ROLLBACK_VAR_DIR=str(var_dir))
    done = subprocess.run(  # noqa: S603 - the test's own argument list, no shell
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_start_imports_no_model_library_and_a_worker_loads_the_turn_code(tmp_path):
    """django.setup(), which every process runs (each management command, beat), imports none of
    agno, openai and twisted: they were half of a start's CPU. A Celery worker imports the code
    that runs turns as it starts (worker_init, before it forks its pool), so no turn pays for it."""
    out = fresh_python(
        "import django; django.setup(); import sys; "
        "print(sorted(m for m in ('agno', 'openai', 'twisted') if m in sys.modules)); "
        "from rollback_site.celery import app; "
        "app.WorkController(pool_cls='solo', hostname='preload@test'); "
        "print('agents.worker' in sys.modules, 'agno' in sys.modules)",
        tmp_path,
    )
    assert out.splitlines() == ["[]", "True True"]


def test_the_served_app_loads_the_turn_code_as_it_starts(tmp_path):
    """The ASGI application's start (rollback_site.serve, a plain daphne) imports the code that
    runs turns, so neither the first turn nor the first page pays for it."""
    out = fresh_python(
        "import sys; import rollback_site.asgi; print('agents.worker' in sys.modules)", tmp_path
    )
    assert out.splitlines() == ["True"]
