"""Settings from the environment, as a started process has them: local mode needs nothing, a bad
value stops the start naming its variable, production (DJANGO_DEBUG=0) refuses a bad
configuration, passes Django's deployment checklist and serves HTTPS only, also behind a proxy
that terminates TLS.

Settings are read once per process, and each process of the app takes ~2 s of CPU to start: how
each value is read, bounded or refused, and the settings made from it, are tested in one process
against the schema and the settings modules (tests/test_settings_env.py). Here, the start itself:
each test a process (manage.py, or daphne) of its own."""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.procs import Services, app_env, free_port, manage

# Long and varied enough for Django's check; used by the tests only.
KEY = "tests-only-not-a-secret-" + "Qm7vR2xK9pLw4TzN8cYh3BfJ" * 2
PRODUCTION = {
    "DJANGO_DEBUG": "0",
    "DJANGO_SECRET_KEY": KEY,
    "DJANGO_ALLOWED_HOSTS": "rollback.example",
}
PASSWORD = "proxy-Long-passw0rd-42"  # noqa: S105 - a test user's password


def environment(var_dir: Path, **settings: str) -> dict[str, str]:
    """This process's environment without any Django, database or model setting, plus `settings`."""
    dropped = {"DATABASE_URL", "REDIS_URL", "ROLLBACK_REQUIRE_POSTGRES"}
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in dropped and not k.startswith(("DJANGO_", "OPENAI_"))
    }
    env.update(ROLLBACK_VAR_DIR=str(var_dir), **settings)
    return env


# --- Local mode ---------------------------------------------------------------------------------


def test_local_mode_needs_no_configuration_and_keeps_a_generated_key(tmp_path):
    """A fresh clone's `make run`: nothing set, DJANGO_DEBUG unset."""
    result = manage(environment(tmp_path), "check")
    assert result.returncode == 0, result.stderr
    assert len((tmp_path / "secret_key").read_text()) >= 50


def test_json_logs_are_one_object_per_line(tmp_path):
    """LOG_FORMAT=json (any case) sets up the JSON formatter on the one handler: a line logged
    by a management command comes out as JSON on standard error."""
    code = "import logging; logging.getLogger('rollback.check').warning('hello')"
    result = manage(environment(tmp_path, LOG_FORMAT="Json"), "shell", "-c", code)
    assert result.returncode == 0, result.stderr
    logged = json.loads(result.stderr.strip().splitlines()[-1])
    assert logged["message"] == "hello"
    assert logged["logger"] == "rollback.check"


# --- A bad configuration stops the start ----------------------------------------------------------

# One bad value of each kind (a yes or no, a bounded number, a count, a choice, a pattern, a list
# checked by a validator of its own): tests/test_settings_env.py has each variable's refusal.
BAD_VALUES = {
    "DJANGO_DEBUG": (
        "maybe",
        "is not valid: it must be 1, true, yes or on, or 0, false, no or off.",
    ),
    "ROLLBACK_WS_CATCH_UP_SECONDS": ("abc", "is not valid: it must be a number of seconds"),
    "CHANNEL_LAYER_CAPACITY": ("lots", "is not valid: it must be a whole number of 0 or more"),
    "RETENTION_ARCHIVE_DAYS": ("2.5", "is not valid: it must be a whole number of 0 or more"),
    "LOG_FORMAT": ("xml", "is not valid: it must be one of text, json."),
    "TELEGRAM_BOT_USERNAME": ("ab", "is not valid: it must be a Telegram username"),
}


def test_a_bad_value_stops_the_start_naming_each_variable(tmp_path):
    """Every variable is checked against its schema (rollback_site/settings/env.py) before anything
    starts, and every bad one is named at once: an unknown boolean is no longer read as false, a
    word is no number."""
    env = environment(
        tmp_path,
        **{name: value for name, (value, _) in BAD_VALUES.items()},
        DJANGO_CSRF_TRUSTED_ORIGINS="rollback.example",
    )
    result = manage(env, "check")
    assert result.returncode != 0
    assert "ImproperlyConfigured: DJANGO_DEBUG='maybe' is not valid" in result.stderr
    lines = result.stderr.splitlines()
    for name, (value, says) in BAD_VALUES.items():
        assert any(f"{name}={value!r} {says}" in line for line in lines), name
    assert "DJANGO_CSRF_TRUSTED_ORIGINS: 'rollback.example' is not an origin" in result.stderr
    assert not (tmp_path / "secret_key").exists()


def test_production_refuses_to_start_without_a_secret_key(tmp_path):
    """The schema's check of production as a whole stops the start too, before the key would be
    generated; its other refusals (a weak key, any host) are tests/test_settings_env.py's."""
    env = environment(tmp_path, **{**PRODUCTION, "DJANGO_SECRET_KEY": ""})
    result = manage(env, "check")
    assert result.returncode != 0
    assert "ImproperlyConfigured: DJANGO_SECRET_KEY is not set" in result.stderr
    assert "production (DJANGO_DEBUG=0)" in result.stderr
    assert not (tmp_path / "secret_key").exists()


# --- Production settings --------------------------------------------------------------------------


def test_production_passes_djangos_deploy_check(tmp_path):
    """Django's deployment checklist finds nothing in production but what the deployment chooses:
    with HSTS's subdomains and preload off (the defaults), it names them (security.W005 and W021)
    and nothing else, so with them on (their variables: tests/test_settings_env.py) it passes, as
    `make lint` checks (`check --deploy --fail-level WARNING`)."""
    result = manage(environment(tmp_path, **PRODUCTION), "check", "--deploy")
    assert result.returncode == 0, result.stderr
    said = result.stdout + result.stderr
    assert sorted(re.findall(r"\(([a-z_]+\.[A-Z]\d+)\)", said)) == [
        "security.W005",
        "security.W021",
    ]
    assert "System check identified 2 issues" in said


# --- Production behind a proxy that terminates TLS ------------------------------------------------


@pytest.fixture(scope="module")
def behind_proxy(model_server, tmp_path_factory) -> Iterator[tuple[str, Services]]:
    """The app in production mode, served by daphne over plain HTTP as a TLS proxy would reach it:
    it trusts the proxy's X-Forwarded-Proto and the public origin https://rollback.example."""
    services = Services(tmp_path_factory.mktemp("proxy-logs"))
    env = app_env(
        tmp_path_factory.mktemp("proxy-var"),
        model_server.base_url,
        **{**PRODUCTION, "DJANGO_ALLOWED_HOSTS": "rollback.example,127.0.0.1"},
        DJANGO_SECURE_PROXY_SSL_HEADER="1",
        DJANGO_CSRF_TRUSTED_ORIGINS="https://rollback.example",
    )
    try:
        make_ada = f"User.objects.create_user('ada', password={PASSWORD!r})"
        services.prepare(env)
        services.manage(env, "shell", "-c", f"from accounts.models import User; {make_ada}")
        port = free_port()
        cmd = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port)]
        proc = services.start("daphne", [*cmd, "rollback_site.asgi:application"], env)
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, services.tail()
            try:
                httpx.get(f"{base}/accounts/login/", timeout=2)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "daphne did not answer"
                time.sleep(0.1)
        yield base, services
    finally:
        services.stop_all()


FROM_PROXY = {"Host": "rollback.example", "X-Forwarded-Proto": "https"}


def login_form(base: str, headers: dict[str, str]) -> tuple[str, str, httpx.Response]:
    """GET the login page: the CSRF cookie and the form's token."""
    page = httpx.get(f"{base}/accounts/login/", headers=headers)
    assert page.status_code == 200
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert token
    return page.cookies["csrftoken"], token.group(1), page


def log_in(base: str, headers: dict[str, str], origin: str) -> httpx.Response:
    cookie, token, _ = login_form(base, headers)
    return httpx.post(
        f"{base}/accounts/login/",
        headers={**headers, "Origin": origin, "Cookie": f"csrftoken={cookie}"},
        data={"csrfmiddlewaretoken": token, "username": "ada", "password": PASSWORD},
    )


def test_a_login_through_the_https_proxy_passes_the_csrf_check(behind_proxy):
    base, _ = behind_proxy
    response = log_in(base, FROM_PROXY, origin="https://rollback.example")
    assert response.status_code == 302, response.text[:500]
    assert response.headers["Location"] == "/chat/"
    assert "sessionid" in response.cookies


def test_a_trusted_origin_passes_when_the_proxy_does_not_pass_the_host_on(behind_proxy):
    base, _ = behind_proxy
    internal = {"Host": base.removeprefix("http://"), "X-Forwarded-Proto": "https"}
    response = log_in(base, internal, origin="https://rollback.example")
    assert response.status_code == 302, response.text[:500]


def test_a_login_posted_from_another_origin_is_refused(behind_proxy):
    base, _ = behind_proxy
    assert log_in(base, FROM_PROXY, origin="https://evil.example").status_code == 403
    assert log_in(base, FROM_PROXY, origin="http://rollback.example").status_code == 403


def test_production_cookies_are_https_only_and_browsers_are_told_to_stay_on_https(behind_proxy):
    base, _ = behind_proxy
    _, _, page = login_form(base, FROM_PROXY)
    assert re.search(r"csrftoken=[^;]+;.*\bSecure\b", page.headers["Set-Cookie"])
    assert page.headers["Strict-Transport-Security"] == "max-age=31536000"
    assert "no-store" in page.headers["Cache-Control"]
    assert "Content-Security-Policy" in page.headers


def test_production_redirects_plain_http_to_https(behind_proxy):
    base, _ = behind_proxy
    response = httpx.get(f"{base}/accounts/login/", headers={"Host": "rollback.example"})
    assert response.status_code == 301
    assert response.headers["Location"] == "https://rollback.example/accounts/login/"


def test_static_files_stay_cacheable(behind_proxy):
    base, _ = behind_proxy
    _, _, page = login_form(base, FROM_PROXY)
    css = re.search(r'href="(/static/rollback/app\.[0-9a-f]+\.css)"', page.text)
    assert css, "no hashed stylesheet on the page"
    response = httpx.get(f"{base}{css.group(1)}", headers=FROM_PROXY)
    assert response.status_code == 200
    assert "max-age" in response.headers["Cache-Control"]
    assert "no-store" not in response.headers["Cache-Control"]
