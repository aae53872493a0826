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
    finally:
        server.terminate()
        server.wait(10)
