"""GET /healthz in process: its answer, its headers, the heartbeats it reads, and the worker's
heartbeat thread. The served processes (a real worker and beat stopped and started, PostgreSQL
and Redis down) are tests/deploy/test_health.py's."""

from __future__ import annotations

import shutil
import threading
import time

import pytest
from django.core.cache import caches
from django.core.exceptions import ImproperlyConfigured
from django.test import Client

from ops.health import BEAT_KEY, CACHE_ALIAS, WORKER_KEY, heartbeat_record
from ops.heartbeat import Heart
from rollback_site.settings.env import Env
from tests.waits import until

pytestmark = pytest.mark.django_db


@pytest.fixture
def embedded(settings):
    """The embedded mode: Celery tasks run in the web process (no REDIS_URL)."""
    settings.CELERY_TASK_ALWAYS_EAGER = True


@pytest.fixture
def with_celery(settings):
    """Celery configured, as with REDIS_URL: a worker and beat are expected."""
    settings.CELERY_TASK_ALWAYS_EAGER = False
    settings.HEALTH_WORKER_MAX_AGE = 30
    settings.HEALTH_BEAT_MAX_AGE = 60


def test_healthz_answers_200_naming_the_database_and_the_cache(client, embedded):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert body["status"] == "ok"
    assert body["celery"].startswith("not configured")
    assert set(body["checks"]) == {"database", "cache"}  # no worker to check in process
    for part in ("database", "cache"):
        check = body["checks"][part]
        assert check["ok"] is True
        assert isinstance(check["ms"], float)
        assert "error" not in check


def test_healthz_says_whether_the_sandbox_works_and_why_not(client, embedded, settings):
    """Without the sandbox the shell tools are not offered: /healthz says so, and stays 200."""
    body = client.get("/healthz").json()
    if shutil.which(settings.SANDBOX_BWRAP):
        assert body["sandbox"] == {"available": True, "why": "bubblewrap, no network"}
    settings.SANDBOX_BWRAP = "/nonexistent/bwrap"
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json()["sandbox"]["available"] is False
    assert "bubblewrap (/nonexistent/bwrap) is not installed" in response.json()["sandbox"]["why"]


def test_healthz_fails_when_the_static_files_were_never_collected(
    client, embedded, settings, tmp_path
):
    """DEBUG off, as served: the manifest storage with nothing collected, where every page is a
    500 (before, /healthz said 200 all the same)."""
    settings.STATIC_ROOT = tmp_path
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
    }
    response = client.get("/healthz")
    assert response.status_code == 503
    checks = response.json()["checks"]
    assert checks["static"] == {"ok": False, "error": "not collected (manage.py collectstatic)"}
    assert checks["database"]["ok"]
    assert checks["cache"]["ok"]


def test_healthz_is_never_cached_and_sets_no_cookie(client, alice, embedded):
    anonymous = client.get("/healthz")
    client.force_login(alice)
    signed_in = client.get("/healthz")
    for response in (anonymous, signed_in):
        assert response.status_code == 200
        assert "no-store" in response["Cache-Control"]
        assert not response.cookies, response.cookies  # no session, no CSRF cookie


def test_healthz_answers_head(client, embedded):
    response = client.head("/healthz")
    assert response.status_code == 200
    assert not response.content


@pytest.mark.parametrize("method", ["post", "put", "patch", "delete", "options"])
def test_healthz_refuses_other_methods_with_405_even_without_a_csrf_token(method, embedded):
    response = getattr(Client(enforce_csrf_checks=True), method)("/healthz")
    assert response.status_code == 405
    assert response["Allow"] == "GET, HEAD"


def test_healthz_answers_over_plain_http_when_https_is_required(client, settings, embedded):
    """Production redirects http to https, but a load balancer probes servers over plain HTTP."""
    settings.SECURE_SSL_REDIRECT = True
    assert client.get("/accounts/login/").status_code == 301
    assert client.get("/healthz").status_code == 200


def test_healthz_answers_only_to_allowed_hosts(client, embedded):
    assert client.get("/healthz", HTTP_HOST="10.1.2.3").status_code == 400


def test_with_celery_and_no_heartbeat_healthz_answers_503_naming_worker_and_beat(
    client, with_celery
):
    response = client.get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "fail"
    assert body["celery"] == "configured"
    assert body["checks"]["database"]["ok"]
    assert body["checks"]["cache"]["ok"]
    assert body["checks"]["worker"] == {"ok": False, "error": "no heartbeat"}
    assert body["checks"]["beat"] == {"ok": False, "error": "no heartbeat"}
    assert "no-store" in response["Cache-Control"]


def test_with_fresh_heartbeats_healthz_answers_200_without_showing_hostnames(client, with_celery):
    heartbeat_record(WORKER_KEY, hostname="worker1@db-host-secret")
    heartbeat_record(BEAT_KEY, hostname="beat-host-secret", at=time.time() - 50)
    response = client.get("/healthz")
    assert response.status_code == 200, response.json()
    checks = response.json()["checks"]
    assert checks["worker"]["ok"]
    assert 0 <= checks["worker"]["age_seconds"] < 5
    assert checks["beat"]["ok"]
    assert 50 <= checks["beat"]["age_seconds"] < 55
    assert b"secret" not in response.content


def test_a_stale_worker_heartbeat_fails_the_worker_alone(client, with_celery):
    heartbeat_record(WORKER_KEY, hostname="w@h", at=time.time() - 31)
    heartbeat_record(BEAT_KEY, hostname="b")
    response = client.get("/healthz")
    assert response.status_code == 503
    checks = response.json()["checks"]
    assert checks["worker"]["ok"] is False
    assert checks["worker"]["age_seconds"] >= 31
    assert checks["worker"]["error"].startswith("no heartbeat for 3")
    assert checks["beat"]["ok"]
    assert checks["database"]["ok"]
    assert checks["cache"]["ok"]


def test_a_stale_beat_heartbeat_fails_beat_alone(client, with_celery):
    heartbeat_record(WORKER_KEY, hostname="w@h")
    heartbeat_record(BEAT_KEY, hostname="b", at=time.time() - 61)
    response = client.get("/healthz")
    assert response.status_code == 503
    checks = response.json()["checks"]
    assert checks["beat"]["ok"] is False
    assert checks["beat"]["error"] == "no heartbeat for 61 s"
    assert checks["worker"]["ok"]


@pytest.mark.redis
def test_a_hung_redis_fails_the_cache_check_within_the_check_timeout(
    client, settings, with_celery, silent_port
):
    """The health alias gives up after HEALTH_CHECK_TIMEOUT (redis-py alone waits 5 s)."""
    hung = {**settings.CACHES["health"], "LOCATION": f"redis://127.0.0.1:{silent_port}/0"}
    settings.CACHES = {**settings.CACHES, "health": hung}
    started = time.monotonic()
    response = client.get("/healthz")
    elapsed = time.monotonic() - started
    assert response.status_code == 503
    checks = response.json()["checks"]
    assert checks["cache"]["ok"] is False
    assert checks["cache"]["error"] == f"no answer within {settings.HEALTH_CHECK_TIMEOUT:g} s"
    assert checks["worker"] == {"ok": False, "error": "unknown: the cache did not answer"}
    assert checks["database"]["ok"]
    assert elapsed < settings.HEALTH_CHECK_TIMEOUT + 1.5, elapsed


def test_the_worker_heart_beats_until_stopped():
    """The bootstep's object, as the worker starts and stops it."""
    health_cache = caches[CACHE_ALIAS]
    heart = Heart("worker1@host", interval=0.05)
    before = set(threading.enumerate())
    heart.start()
    try:
        first = until(lambda: health_cache.get(WORKER_KEY), "the first beat")
        assert first["hostname"] == "worker1@host"
        # It goes on beating.
        until(lambda: health_cache.get(WORKER_KEY)["at"] > first["at"], "a later beat")
        (beating,) = [
            t for t in threading.enumerate() if t not in before and t.name == "health-heartbeat"
        ]
    finally:
        heart.stop()
    # And stops with the worker: its thread has ended (stop() joined it), so no beat can follow.
    assert not beating.is_alive()
    health_cache.delete(WORKER_KEY)
    assert health_cache.get(WORKER_KEY) is None


@pytest.mark.parametrize(
    ("settings_env", "message"),
    [
        (
            {"HEALTH_HEARTBEAT_SECONDS": "5", "HEALTH_WORKER_MAX_AGE": "5"},
            "every worker looks down",
        ),
        ({"HEALTH_BEAT_MAX_AGE": "4"}, "beat looks down"),
        ({"HEALTH_CHECK_TIMEOUT": "0"}, "HEALTH_CHECK_TIMEOUT='0' is not valid"),
        ({"HEALTH_WORKER_MAX_AGE": "soon"}, "HEALTH_WORKER_MAX_AGE='soon' is not valid"),
    ],
)
def test_max_ages_that_would_always_fail_stop_the_start(settings_env, message, monkeypatch):
    """Refused by the schema the settings read at start (rollback_site/settings/env.py), which
    stops it: a start with a bad value is tests/test_settings.py's."""
    for name in Env.model_fields:
        monkeypatch.delenv(name, raising=False)
    for name, value in settings_env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ImproperlyConfigured) as refused:
        Env.load()
    assert message in str(refused.value)
