"""Settings from the environment: local mode needs nothing, production (DJANGO_DEBUG=0) refuses a
bad configuration and serves HTTPS only, also behind a proxy that terminates TLS.

Settings are read once per process, so each configuration runs manage.py (or daphne) in a
process of its own."""

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

ROOT = Path(__file__).resolve().parents[1]
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


def setting_values(env: dict[str, str], *names: str) -> dict[str, str]:
    code = "from django.conf import settings as s; " + "; ".join(
        f"print({name!r}, repr(getattr(s, {name!r})), sep='=')" for name in names
    )
    result = manage(env, "shell", "-c", code)
    assert result.returncode == 0, result.stderr
    return dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)


# --- Local mode ---------------------------------------------------------------------------------


def test_local_mode_needs_no_configuration_and_keeps_a_generated_key(tmp_path):
    """A fresh clone's `make run`: nothing set, DJANGO_DEBUG unset."""
    result = manage(environment(tmp_path), "check")
    assert result.returncode == 0, result.stderr
    assert len((tmp_path / "secret_key").read_text()) >= 50


def test_local_mode_serves_plain_http(tmp_path):
    values = setting_values(
        environment(tmp_path),
        "SECURE_SSL_REDIRECT",
        "SESSION_COOKIE_SECURE",
        "CSRF_COOKIE_SECURE",
        "SECURE_HSTS_SECONDS",
        "SECURE_PROXY_SSL_HEADER",
    )
    assert values == {
        "SECURE_SSL_REDIRECT": "False",
        "SESSION_COOKIE_SECURE": "False",
        "CSRF_COOKIE_SECURE": "False",
        "SECURE_HSTS_SECONDS": "0",
        "SECURE_PROXY_SSL_HEADER": "None",
    }


# --- Production refuses a bad configuration -----------------------------------------------------


def test_production_refuses_to_start_without_a_secret_key(tmp_path):
    env = environment(tmp_path, **{**PRODUCTION, "DJANGO_SECRET_KEY": ""})
    result = manage(env, "check")
    assert result.returncode != 0
    assert "ImproperlyConfigured: DJANGO_SECRET_KEY is not set" in result.stderr
    assert "production (DJANGO_DEBUG=0)" in result.stderr
    assert not (tmp_path / "secret_key").exists()


@pytest.mark.parametrize(
    "key",
    [
        "change-me",
        "django-insecure-" + "Qm7vR2xK9pLw4TzN8cYh3BfJ" * 2,
        "ab" * 40,
    ],
    ids=["short", "startproject", "repetitive"],
)
def test_production_refuses_a_weak_secret_key(tmp_path, key):
    env = environment(tmp_path, **{**PRODUCTION, "DJANGO_SECRET_KEY": key})
    result = manage(env, "check")
    assert result.returncode != 0
    assert "ImproperlyConfigured: DJANGO_SECRET_KEY is too weak" in result.stderr


@pytest.mark.parametrize("hosts", ["*", "rollback.example,*"])
def test_production_refuses_any_host(tmp_path, hosts):
    env = environment(tmp_path, **{**PRODUCTION, "DJANGO_ALLOWED_HOSTS": hosts})
    result = manage(env, "check")
    assert result.returncode != 0
    assert "ImproperlyConfigured: DJANGO_ALLOWED_HOSTS=* trusts any Host header" in result.stderr


def test_a_trusted_origin_without_its_scheme_is_refused(tmp_path):
    env = environment(tmp_path, DJANGO_CSRF_TRUSTED_ORIGINS="rollback.example")
    result = manage(env, "check")
    assert result.returncode != 0
    assert "DJANGO_CSRF_TRUSTED_ORIGINS: 'rollback.example' is not an origin" in result.stderr


@pytest.mark.parametrize("value", ["xml", "JSONL", "1"])
def test_a_log_format_other_than_text_or_json_is_refused(tmp_path, value):
    result = manage(environment(tmp_path, LOG_FORMAT=value), "check")
    assert result.returncode != 0
    assert (
        f"ImproperlyConfigured: LOG_FORMAT={value!r} is not valid: it must be one of text, json."
        in result.stderr
    )


@pytest.mark.parametrize("value", ["ab", "my bot", "bot<script>", "x" * 33])
def test_a_telegram_bot_username_telegram_would_not_give_is_refused(tmp_path, value):
    result = manage(environment(tmp_path, TELEGRAM_BOT_USERNAME=value), "check")
    assert result.returncode != 0
    assert f"ImproperlyConfigured: TELEGRAM_BOT_USERNAME={value!r} is not valid" in result.stderr


def test_a_telegram_bot_username_may_start_with_an_at_sign(tmp_path):
    env = environment(tmp_path, TELEGRAM_BOT_USERNAME="@Rollback_Bot")
    assert setting_values(env, "TELEGRAM_BOT_USERNAME") == {
        "TELEGRAM_BOT_USERNAME": "'Rollback_Bot'"
    }


def test_a_log_level_that_is_no_level_is_refused(tmp_path):
    result = manage(environment(tmp_path, LOG_LEVEL="loud"), "check")
    assert result.returncode != 0
    assert "ImproperlyConfigured: LOG_LEVEL='loud' is not valid" in result.stderr


def test_a_bad_value_stops_the_start_naming_each_variable(tmp_path):
    """Every variable is checked against its schema (rollback_site/settings/env.py) before anything
    starts: an unknown boolean is no longer read as false, a word is no number."""
    env = environment(tmp_path, DJANGO_DEBUG="maybe", ROLLBACK_WS_CATCH_UP_SECONDS="abc")
    result = manage(env, "check")
    assert result.returncode != 0
    assert "ImproperlyConfigured: DJANGO_DEBUG='maybe' is not valid: it must be 1, true" in (
        result.stderr
    )
    assert "ROLLBACK_WS_CATCH_UP_SECONDS='abc' is not valid: it must be a number" in result.stderr
    assert not (tmp_path / "secret_key").exists()


def test_the_channel_layer_is_sized_for_a_web_process_inbox_and_counts_its_drops(tmp_path):
    # channels_redis checks its capacity against ONE inbox per web process, shared by all its
    # sockets: 100 streams (a piece every 20 ms each) queue some 5,000 messages a second.
    for redis in ("", "redis://127.0.0.1:6379/15"):
        env = environment(tmp_path, REDIS_URL=redis)
        found = setting_values(env, "CHANNEL_LAYERS")["CHANNEL_LAYERS"]
        assert "core.channel_layers." in found  # the layer that says when it drops
        assert "'capacity': 20000" in found
    env = environment(tmp_path, REDIS_URL="redis://x", CHANNEL_LAYER_CAPACITY="500000")
    assert "'capacity': 500000" in setting_values(env, "CHANNEL_LAYERS")["CHANNEL_LAYERS"]
    result = manage(environment(tmp_path, CHANNEL_LAYER_CAPACITY="lots"), "check")
    assert result.returncode != 0
    assert "ImproperlyConfigured: CHANNEL_LAYER_CAPACITY='lots' is not valid" in result.stderr


def test_json_logs_are_one_object_per_line(tmp_path):
    """LOG_FORMAT=json (any case) sets up the JSON formatter on the one handler: a line logged
    by a management command comes out as JSON on standard error."""
    code = "import logging; logging.getLogger('rollback.check').warning('hello')"
    result = manage(environment(tmp_path, LOG_FORMAT="Json"), "shell", "-c", code)
    assert result.returncode == 0, result.stderr
    logged = json.loads(result.stderr.strip().splitlines()[-1])
    assert logged["message"] == "hello"
    assert logged["logger"] == "rollback.check"


# --- Production settings --------------------------------------------------------------------------


def test_production_serves_https_only_by_default(tmp_path):
    values = setting_values(
        environment(tmp_path, **PRODUCTION),
        "SECURE_SSL_REDIRECT",
        "SESSION_COOKIE_SECURE",
        "CSRF_COOKIE_SECURE",
        "SECURE_HSTS_SECONDS",
        "SECURE_HSTS_INCLUDE_SUBDOMAINS",
        "SECURE_HSTS_PRELOAD",
    )
    assert values == {
        "SECURE_SSL_REDIRECT": "True",
        "SESSION_COOKIE_SECURE": "True",
        "CSRF_COOKIE_SECURE": "True",
        "SECURE_HSTS_SECONDS": "31536000",
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": "False",
        "SECURE_HSTS_PRELOAD": "False",
    }


def test_each_https_setting_has_its_own_variable(tmp_path):
    env = environment(
        tmp_path,
        **PRODUCTION,
        DJANGO_SECURE_SSL_REDIRECT="0",
        DJANGO_SECURE_COOKIES="0",
        DJANGO_SECURE_HSTS_SECONDS="3600",
        DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS="1",
        DJANGO_SECURE_HSTS_PRELOAD="1",
        DJANGO_SECURE_PROXY_SSL_HEADER="1",
        DJANGO_CSRF_TRUSTED_ORIGINS="https://rollback.example, https://chat.example",
    )
    values = setting_values(
        env,
        "SECURE_SSL_REDIRECT",
        "SESSION_COOKIE_SECURE",
        "CSRF_COOKIE_SECURE",
        "SECURE_HSTS_SECONDS",
        "SECURE_HSTS_INCLUDE_SUBDOMAINS",
        "SECURE_HSTS_PRELOAD",
        "SECURE_PROXY_SSL_HEADER",
        "CSRF_TRUSTED_ORIGINS",
    )
    assert values == {
        "SECURE_SSL_REDIRECT": "False",
        "SESSION_COOKIE_SECURE": "False",
        "CSRF_COOKIE_SECURE": "False",
        "SECURE_HSTS_SECONDS": "3600",
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": "True",
        "SECURE_HSTS_PRELOAD": "True",
        "SECURE_PROXY_SSL_HEADER": "('HTTP_X_FORWARDED_PROTO', 'https')",
        "CSRF_TRUSTED_ORIGINS": "['https://rollback.example', 'https://chat.example']",
    }


def test_production_passes_djangos_deploy_check(tmp_path):
    """What `make lint` runs. Subdomains and preload are the deployment's choice; with them off,
    the check says so (security.W005 and W021) and nothing else."""
    result = manage(
        environment(
            tmp_path,
            **PRODUCTION,
            DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS="1",
            DJANGO_SECURE_HSTS_PRELOAD="1",
        ),
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
    )
    assert result.returncode == 0, result.stderr
    result = manage(environment(tmp_path, **PRODUCTION), "check", "--deploy")
    assert sorted(re.findall(r"\(security\.(W\d+)\)", result.stderr)) == ["W005", "W021"]


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
        services.prepare(env)
        make_ada = f"User.objects.create_user('ada', password={PASSWORD!r})"
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


# --- Retention settings -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("RETENTION_AUTO_CHECKPOINT_DAYS", "-1"),
        ("RETENTION_KEEP_LATEST_AUTO", "five"),
        ("RETENTION_ARCHIVE_DAYS", "2.5"),
    ],
)
def test_a_retention_setting_that_is_negative_or_not_a_number_stops_the_start(
    tmp_path, name, value
):
    result = manage(environment(tmp_path, **{name: value}), "check")
    assert result.returncode != 0
    assert (
        f"ImproperlyConfigured: {name}={value!r} is not valid: it must be a whole number of 0 or"
        " more" in result.stderr
    )


def test_retention_settings_are_read_from_the_environment(tmp_path):
    env = environment(
        tmp_path,
        RETENTION_AUTO_CHECKPOINT_DAYS="3",
        RETENTION_KEEP_LATEST_AUTO="0",
        RETENTION_ARCHIVE_DAYS=" 0 ",
    )
    result = manage(
        env,
        "shell",
        "-c",
        "from django.conf import settings as s; print(s.RETENTION_AUTO_CHECKPOINT_DAYS,"
        " s.RETENTION_KEEP_LATEST_AUTO, s.RETENTION_ARCHIVE_DAYS)",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "3 0 0"
