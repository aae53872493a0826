"""The schema of the environment (rollback_site/settings/env.py): every variable declared once, the
README's configuration table held to it, a bad value refused with a message naming it, and the
settings the modules of rollback_site/settings/ make from the values.

All in this process, on an environment of the test's (monkeypatch.setenv): the schema read again
(Env.load(), as the settings modules read it at start), or the settings modules run again
(rollback_site.settings reloaded). What only a started process shows (that a bad value stops the
start, the logs on standard error, production served through a proxy) is tests/test_settings.py's.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest
from django.core.exceptions import ImproperlyConfigured

from rollback_site.settings.env import Env

ROOT = Path(__file__).resolve().parents[1]
# Long and varied enough for Django's check; used by the tests only.
KEY = "tests-only-not-a-secret-" + "Qm7vR2xK9pLw4TzN8cYh3BfJ" * 2
PRODUCTION = {
    "DJANGO_DEBUG": "0",
    "DJANGO_SECRET_KEY": KEY,
    "DJANGO_ALLOWED_HOSTS": "rollback.example",
}


@pytest.fixture
def environ(monkeypatch):
    """The environment without any variable of the schema: each test sets its own."""
    for name in Env.model_fields:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.fixture
def settings_from(environ, tmp_path) -> Iterator[Callable[..., ModuleType]]:
    """The settings made from `values` alone (each call starts from an environment without any
    variable of the schema, its files under tmp_path): the settings modules run again in this
    process, as a start imports them. Afterwards the process's own environment and settings
    modules are back."""
    import rollback_site.settings

    def made(**values: str) -> ModuleType:
        for name in Env.model_fields:
            environ.delenv(name, raising=False)
        environ.setenv("ROLLBACK_VAR_DIR", str(tmp_path))
        for name, value in values.items():
            environ.setenv(name, value)
        return importlib.reload(rollback_site.settings)

    yield made
    environ.undo()
    importlib.reload(rollback_site.settings)


def refusal(environ, **values: str) -> str:
    """What Env.load() says as it refuses the environment with `values` set."""
    for name, value in values.items():
        environ.setenv(name, value)
    with pytest.raises(ImproperlyConfigured) as refused:
        Env.load()
    return str(refused.value)


def shown(settings: ModuleType, *names: str) -> dict[str, str]:
    """Each setting's value as repr() writes it: `False` is not `0`."""
    return {name: repr(getattr(settings, name)) for name in names}


def configuration_table() -> dict[str, str]:
    """README.md's configuration table: each variable and its default as the table writes it."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## Configuration\n", 1)[1].split("\n## ", 1)[0]
    defaults: dict[str, str] = {}
    for row in section.splitlines():
        if not row.startswith("| `"):
            continue
        first, default = (cell.strip() for cell in row.strip("|").split("|")[:2])
        names = re.findall(r"`([A-Z][A-Z0-9_]+)`", first)
        values = re.findall(r"`[^`]*`", default)
        if len(names) > 1 and len(values) == len(names):  # `10`, `20`: one each, in order
            defaults.update(zip(names, values, strict=True))
        else:  # one default, maybe with a note: `52428800` (50 MiB)
            defaults.update(dict.fromkeys(names, re.sub(r" \([^`]*\)$", "", default)))
    return defaults


# --- The README's table and the schema ---------------------------------------------------------


def test_every_variable_of_the_schema_is_in_the_readme_and_every_one_there_is_in_the_schema():
    table = configuration_table()
    assert sorted(set(Env.model_fields) - set(table)) == [], "not in README.md's table"
    assert sorted(set(table) - set(Env.model_fields)) == [], "in README.md but not in env.py"


def test_the_readme_gives_each_variable_the_default_of_the_schema():
    table = configuration_table()
    wrong = {
        name: (table.get(name), Env.shown_default(name))
        for name in Env.model_fields
        if table.get(name) != Env.shown_default(name)
    }
    assert wrong == {}, "README.md's default, the schema's"


def test_a_literal_default_is_shown_as_it_is():
    assert Env.shown_default("AGENT_MODEL") == "`gpt-4o-mini`"
    assert Env.shown_default("API_TURN_WAIT_POLL_SECONDS") == "`1.5`"
    assert Env.shown_default("AGENT_TIMEOUT") == "`60`"
    assert Env.shown_default("DJANGO_ALLOWED_HOSTS") == "`localhost,127.0.0.1,[::1]`"
    assert Env.shown_default("REDIS_URL") == "unset"
    assert Env.shown_default("DJANGO_SECURE_PROXY_SSL_HEADER") == "off"


def test_every_variable_makes_a_setting():
    """Each variable is read by a settings module (`env.NAME`): none is declared and forgotten."""
    modules = (ROOT / "rollback_site" / "settings").glob("*.py")
    read = set().union(*(re.findall(r"\benv\.([A-Z][A-Z0-9_]+)", m.read_text()) for m in modules))
    assert sorted(set(Env.model_fields) - read) == []


# --- Good values --------------------------------------------------------------------------------


def test_nothing_set_gives_the_defaults(environ):
    env = Env.load()
    assert env.DJANGO_DEBUG is None
    assert not env.production
    assert env.AGENT_TOOLS == []
    assert env.LOG_LEVEL == "INFO"
    assert env.ROLLBACK_WS_CATCH_UP_SECONDS == 0.5


def test_values_are_stripped_and_an_empty_one_means_the_default(environ):
    environ.setenv("RETENTION_ARCHIVE_DAYS", " 0 ")
    environ.setenv("AGENT_MAX_TOOL_CALLS", "   ")
    environ.setenv("AGENT_MODEL", "")
    environ.setenv("DJANGO_ALLOWED_HOSTS", " rollback.example, chat.example ,")
    env = Env.load()
    assert env.RETENTION_ARCHIVE_DAYS == 0
    assert env.AGENT_MAX_TOOL_CALLS == 20
    assert env.AGENT_MODEL == "gpt-4o-mini"
    assert env.DJANGO_ALLOWED_HOSTS == ["rollback.example", "chat.example"]


@pytest.mark.parametrize(
    ("value", "debug", "production"),
    [("1", True, False), ("Yes", True, False), ("on", True, False), ("0", False, True)],
)
def test_django_debug_is_a_yes_or_a_no(environ, value, debug, production):
    environ.setenv("DJANGO_DEBUG", value)
    environ.setenv("DJANGO_SECRET_KEY", KEY)
    env = Env.load()
    assert env.DJANGO_DEBUG is debug
    assert env.production is production


def test_a_choice_is_taken_in_any_case_and_a_list_as_json_or_commas(environ):
    environ.setenv("LOG_FORMAT", "Json")
    environ.setenv("LOG_LEVEL", "warning")
    environ.setenv("AGENT_TOOLS", '["a.b", " c.d "]')
    environ.setenv("TELEGRAM_BOT_USERNAME", "@Rollback_Bot")
    env = Env.load()
    assert (env.LOG_FORMAT, env.LOG_LEVEL) == ("json", "WARNING")
    assert env.AGENT_TOOLS == ["a.b", "c.d"]
    assert env.TELEGRAM_BOT_USERNAME == "Rollback_Bot"


# --- Bad values: each kind stops the start, naming the variable --------------------------------


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        (
            "ROLLBACK_WS_CATCH_UP_SECONDS",
            "abc",
            "ROLLBACK_WS_CATCH_UP_SECONDS='abc' is not valid: it must be a number of seconds,"
            " at least 0.05.",
        ),
        (
            "ROLLBACK_WS_CATCH_UP_SECONDS",
            "0.01",
            "ROLLBACK_WS_CATCH_UP_SECONDS='0.01' is not valid: it must be a number of seconds,"
            " at least 0.05.",
        ),
        (
            "DJANGO_DEBUG",
            "maybe",
            "DJANGO_DEBUG='maybe' is not valid: it must be 1, true, yes or on, or 0, false, no or"
            " off.",
        ),
        (
            "TURN_HEARTBEAT_SECONDS",
            "-3",
            "TURN_HEARTBEAT_SECONDS='-3' is not valid: it must be a number of seconds above 0.",
        ),
        ("AGENT_TIMEOUT", "nan", "AGENT_TIMEOUT='nan' is not valid: it must be a number of"),
        ("AGENT_TIMEOUT", "inf", "AGENT_TIMEOUT='inf' is not valid: it must be a number of"),
        (
            "AGENT_MAX_RETRIES",
            "-1",
            "AGENT_MAX_RETRIES='-1' is not valid: it must be a whole number of 0 or more.",
        ),
        (
            "RETENTION_ARCHIVE_DAYS",
            "2.5",
            "RETENTION_ARCHIVE_DAYS='2.5' is not valid: it must be a whole number of 0 or more"
            " (days; 0 turns the rule off).",
        ),
        (
            "DATABASE_CONNECT_TIMEOUT",
            "1",
            "DATABASE_CONNECT_TIMEOUT='1' is not valid: it must be a whole number of 2 or more.",
        ),
        (
            "REDIS_SOCKET_TIMEOUT",
            "5",
            "REDIS_SOCKET_TIMEOUT='5' is not valid: it must be a number of seconds above 5",
        ),
        ("HEALTH_BEAT_MAX_AGE", "4", "HEALTH_BEAT_MAX_AGE='4' is not valid"),
        (
            "LOG_LEVEL",
            "loud",
            "LOG_LEVEL='loud' is not valid: it must be one of DEBUG, INFO, WARNING, ERROR,"
            " CRITICAL.",
        ),
        ("API_THROTTLE_USER", "lots", "API_THROTTLE_USER='lots' is not valid: it must be a rate"),
        (
            "DJANGO_CSRF_TRUSTED_ORIGINS",
            "https://a.example,b.example",
            "DJANGO_CSRF_TRUSTED_ORIGINS: 'b.example' is not an origin",
        ),
        ("AGENT_TOOLS", '["a.b"', "AGENT_TOOLS is not a valid JSON list"),
        ("AGENT_TOOLS", "[1, 2]", "AGENT_TOOLS must be a JSON list of strings"),
        ("TELEGRAM_BOT_USERNAME", "@ab", "TELEGRAM_BOT_USERNAME='@ab' is not valid"),
        *[
            (
                "TELEGRAM_BOT_USERNAME",
                value,
                f"TELEGRAM_BOT_USERNAME={value!r} is not valid: it must be a Telegram username",
            )
            for value in ["ab", "my bot", "bot<script>", "x" * 33]
        ],
        *[
            (
                "LOG_FORMAT",
                value,
                f"LOG_FORMAT={value!r} is not valid: it must be one of text, json.",
            )
            for value in ["xml", "JSONL", "1"]
        ],
        *[
            (name, value, f"{name}={value!r} is not valid: it must be a whole number of 0 or more")
            for name, value in [
                ("RETENTION_AUTO_CHECKPOINT_DAYS", "-1"),
                ("RETENTION_KEEP_LATEST_AUTO", "five"),
                ("CHANNEL_LAYER_CAPACITY", "lots"),
            ]
        ],
    ],
)
def test_a_bad_value_is_refused_naming_the_variable_and_what_it_accepts(
    environ, name, value, message
):
    assert refusal(environ, **{name: value}).startswith(message)


def test_a_trusted_origin_without_its_scheme_is_refused(environ):
    message = refusal(environ, DJANGO_CSRF_TRUSTED_ORIGINS="rollback.example")
    assert message == (
        "DJANGO_CSRF_TRUSTED_ORIGINS: 'rollback.example' is not an origin: write it with its"
        " scheme, e.g. https://rollback.example"
    )


@pytest.mark.parametrize(
    "key",
    ["change-me", "django-insecure-" + "Qm7vR2xK9pLw4TzN8cYh3BfJ" * 2, "ab" * 40],
    ids=["short", "startproject", "repetitive"],
)
def test_production_refuses_a_weak_secret_key(environ, key):
    message = refusal(environ, **{**PRODUCTION, "DJANGO_SECRET_KEY": key})
    assert message.startswith("DJANGO_SECRET_KEY is too weak: production (DJANGO_DEBUG=0) needs")


@pytest.mark.parametrize("hosts", ["*", "rollback.example,*"])
def test_production_refuses_any_host(environ, hosts):
    message = refusal(environ, **{**PRODUCTION, "DJANGO_ALLOWED_HOSTS": hosts})
    assert message.startswith("DJANGO_ALLOWED_HOSTS=* trusts any Host header: production")


def test_every_bad_value_is_named_at_once(environ):
    environ.setenv("AGENT_MAX_RETRIES", "many")
    environ.setenv("DJANGO_DEBUG", "maybe")
    with pytest.raises(ImproperlyConfigured) as refused:
        Env.load()
    lines = str(refused.value).splitlines()
    assert [line.split("=")[0] for line in lines] == ["DJANGO_DEBUG", "AGENT_MAX_RETRIES"]


def test_values_that_are_each_good_but_cannot_work_together_are_refused(environ):
    environ.setenv("HEALTH_HEARTBEAT_SECONDS", "30")
    with pytest.raises(ImproperlyConfigured, match=r"^HEALTH_WORKER_MAX_AGE \(30 s\) must be"):
        Env.load()
    environ.delenv("HEALTH_HEARTBEAT_SECONDS")
    environ.setenv("AGENT_TURN_STALE_SECONDS", "2")
    with pytest.raises(ImproperlyConfigured, match=r"^AGENT_TURN_STALE_SECONDS \(2 s\) must be"):
        Env.load()
    environ.setenv("TURN_HEARTBEAT_SECONDS", "0.5")
    Env.load()
    environ.setenv("DJANGO_DEBUG", "0")
    with pytest.raises(ImproperlyConfigured, match=r"^DJANGO_SECRET_KEY is not set: production"):
        Env.load()


# --- The settings made from the values (the settings modules run again) -------------------------


def test_local_mode_serves_plain_http(settings_from):
    values = shown(
        settings_from(),
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


# The settings that make a site HTTPS-only, each with a variable of its own.
HTTPS_SETTINGS = (
    "SECURE_SSL_REDIRECT",
    "SESSION_COOKIE_SECURE",
    "CSRF_COOKIE_SECURE",
    "SECURE_HSTS_SECONDS",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "SECURE_HSTS_PRELOAD",
    "SECURE_PROXY_SSL_HEADER",
)


def test_production_serves_https_only_by_default(settings_from):
    values = shown(settings_from(**PRODUCTION), *HTTPS_SETTINGS)
    assert values == {
        "SECURE_SSL_REDIRECT": "True",
        "SESSION_COOKIE_SECURE": "True",
        "CSRF_COOKIE_SECURE": "True",
        "SECURE_HSTS_SECONDS": "31536000",
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": "False",
        "SECURE_HSTS_PRELOAD": "False",
        # A client's own X-Forwarded-Proto is trusted only behind a proxy that sets it.
        "SECURE_PROXY_SSL_HEADER": "None",
    }


def test_each_https_setting_has_its_own_variable(settings_from):
    made = settings_from(
        **PRODUCTION,
        DJANGO_SECURE_SSL_REDIRECT="0",
        DJANGO_SECURE_COOKIES="0",
        DJANGO_SECURE_HSTS_SECONDS="3600",
        DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS="1",
        DJANGO_SECURE_HSTS_PRELOAD="1",
        DJANGO_SECURE_PROXY_SSL_HEADER="1",
        DJANGO_CSRF_TRUSTED_ORIGINS="https://rollback.example, https://chat.example",
    )
    values = shown(made, *HTTPS_SETTINGS, "CSRF_TRUSTED_ORIGINS")
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


def test_the_channel_layer_is_sized_for_a_web_process_inbox_and_counts_its_drops(settings_from):
    # channels_redis checks its capacity against ONE inbox per web process, shared by all its
    # sockets: 100 streams (a piece every 20 ms each) queue some 5,000 messages a second.
    for redis in ("", "redis://127.0.0.1:6379/15"):
        layer = settings_from(REDIS_URL=redis).CHANNEL_LAYERS["default"]
        assert layer["BACKEND"].startswith("core.channel_layers.")  # it says when it drops
        assert layer["CONFIG"]["capacity"] == 20_000
    made = settings_from(REDIS_URL="redis://x", CHANNEL_LAYER_CAPACITY="500000")
    assert made.CHANNEL_LAYERS["default"]["CONFIG"]["capacity"] == 500_000


def test_retention_settings_are_read_from_the_environment(settings_from):
    made = settings_from(
        RETENTION_AUTO_CHECKPOINT_DAYS="3",
        RETENTION_KEEP_LATEST_AUTO="0",
        RETENTION_ARCHIVE_DAYS=" 0 ",
    )
    assert shown(
        made,
        "RETENTION_AUTO_CHECKPOINT_DAYS",
        "RETENTION_KEEP_LATEST_AUTO",
        "RETENTION_ARCHIVE_DAYS",
    ) == {
        "RETENTION_AUTO_CHECKPOINT_DAYS": "3",
        "RETENTION_KEEP_LATEST_AUTO": "0",
        "RETENTION_ARCHIVE_DAYS": "0",
    }


def test_a_telegram_bot_username_may_start_with_an_at_sign(settings_from):
    made = settings_from(TELEGRAM_BOT_USERNAME="@Rollback_Bot")
    assert made.TELEGRAM_BOT_USERNAME == "Rollback_Bot"


# --- The settings module reads the environment again when reloaded -----------------------------


def test_reloading_the_settings_reads_the_environment_again(monkeypatch):
    import rollback_site.settings

    monkeypatch.setenv("AGENT_MAX_TOOL_CALLS", "7")
    try:
        assert importlib.reload(rollback_site.settings).AGENT_MAX_TOOL_CALLS == 7
    finally:
        monkeypatch.undo()
        importlib.reload(rollback_site.settings)
    assert rollback_site.settings.AGENT_MAX_TOOL_CALLS != 7


def test_the_embedded_turn_pool_leaves_postgresqls_pool_half_free(settings_from):
    # A running turn holds one connection (the heartbeats of all the process's turns one more).
    assert settings_from().TURN_THREADS == 16  # SQLite: no pool to share
    pooled = "postgres://rollback@127.0.0.1:5432/rollback"
    assert settings_from(DATABASE_URL=pooled).TURN_THREADS == 2  # of the default 10
    assert settings_from(DATABASE_URL=pooled, DATABASE_POOL_SIZE="40").TURN_THREADS == 10
    assert settings_from(DATABASE_URL=pooled, DATABASE_POOL_SIZE="3").TURN_THREADS == 2
    assert settings_from(DATABASE_URL=pooled, TURN_THREADS="7").TURN_THREADS == 7
    assert settings_from(TURN_THREADS="40").TURN_THREADS == 40


def test_sso_and_the_proxy_header_are_refused_half_set(environ):
    assert refusal(environ, OIDC_ISSUER="https://sso.example/realms/staff").startswith(
        "OIDC_ISSUER is set: single sign-on also needs OIDC_CLIENT_ID and OIDC_CLIENT_SECRET"
    )
    environ.delenv("OIDC_ISSUER")
    assert refusal(environ, OIDC_ISSUER="sso.example").startswith(
        "OIDC_ISSUER: 'sso.example' is not a URL"
    )
    environ.delenv("OIDC_ISSUER")
    assert refusal(environ, AUTH_PROXY_HEADER="X-Forwarded-User").startswith(
        "AUTH_PROXY_HEADER is set: list the authenticating proxy's addresses"
    )
    assert refusal(environ, AUTH_PROXY_ADDRESSES="10.0.0.0/33").startswith(
        "AUTH_PROXY_ADDRESSES: '10.0.0.0/33' is not an IP address or network"
    )
