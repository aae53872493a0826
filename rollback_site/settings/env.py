"""Every environment variable the app reads, declared once: its type, default and bounds.

The README's configuration table says what each one means (a test holds it to this schema). To add
one: a line here (`NAME: Seconds = 1.0`, or `NAME: int = Field(20, ge=1)`), a row in that table,
and where it becomes a Django setting of the same name, `NAME = env.NAME` in the module of its
concern. A bad value stops the start, naming the variable and what it accepts (kinds.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, BeforeValidator, Field, ValidationInfo, model_validator

from rollback_site.settings.kinds import (
    Accepts,
    BoundSeconds,
    CommaList,
    Count,
    JsonOrCommaList,
    Schema,
    Seconds,
    shown,
)


def _origins(origins: list[str], info: ValidationInfo) -> list[str]:
    for origin in origins:
        if not origin.startswith(("https://", "http://")):
            raise ValueError(
                f"{info.field_name}: {origin!r} is not an origin: write it with its scheme,"
                " e.g. https://rollback.example"
            )
    return origins


Origins = Annotated[CommaList, AfterValidator(_origins)]


def _fernet_keys(keys: list[str], info: ValidationInfo) -> list[str]:
    from cryptography.fernet import Fernet

    for position, key in enumerate(keys, start=1):
        try:
            Fernet(key.encode())
        except ValueError:
            raise ValueError(
                f"{info.field_name}: key {position} is not a Fernet key (32 url-safe base64-encoded"
                " bytes, as `Fernet.generate_key()` makes)"
            ) from None
    return keys


FernetKeys = Annotated[CommaList, AfterValidator(_fernet_keys)]


def _proxy_addresses(addresses: list[str], info: ValidationInfo) -> list[str]:
    import ipaddress

    for address in addresses:
        try:
            ipaddress.ip_network(address, strict=False)
        except ValueError:
            raise ValueError(
                f"{info.field_name}: {address!r} is not an IP address or network (10.0.0.5,"
                " 10.0.0.0/24, fd00::/8)"
            ) from None
    return addresses


ProxyAddresses = Annotated[CommaList, AfterValidator(_proxy_addresses)]

# A host the sandbox may reach through its proxy: a name (`pypi.org`), a wildcard for its
# subdomains (`*.pythonhosted.org`), either with a port (`localhost:8080`; without: 443 and 80).
_HOST = r"(\*\.)?[A-Za-z0-9]([A-Za-z0-9-]{0,62})(\.[A-Za-z0-9]([A-Za-z0-9-]{0,62}))*(:[0-9]{1,5})?"


def _network(entries: list[str], info: ValidationInfo) -> list[str]:
    import re

    words = [entry.lower() for entry in entries]
    if not words or words == ["none"]:
        return ["none"]
    if words == ["all"]:
        return ["all"]
    for entry in words:
        port = entry.rsplit(":", 1)[1] if ":" in entry else "443"
        if entry in ("none", "all") or not re.fullmatch(_HOST, entry) or not 0 < int(port) < 65536:
            raise ValueError(
                f"{info.field_name}: {entry!r} is not a host: give `none`, `all`, or hosts such as"
                " pypi.org, *.pythonhosted.org, localhost:8080"
            )
    return words


Network = Annotated[CommaList, AfterValidator(_network)]
# DRF's rates: a number, a slash, a period of which the first letter counts (s, m, h or d).
Rate = Annotated[
    str,
    Field(pattern=r"^\d+/[smhd][a-z]*$"),
    Accepts("a rate such as 60/min (per s, min, hour or day)"),
]
TelegramUsername = Annotated[
    str,
    BeforeValidator(lambda value: value.removeprefix("@") if isinstance(value, str) else value),
    Field(pattern=r"^[A-Za-z0-9_]{5,32}$"),
    Accepts(
        "a Telegram username: 5 to 32 letters, digits or underscores (the bot's, as @BotFather"
        " gave it)"
    ),
]
Level = Annotated[
    Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"],
    BeforeValidator(lambda value: value.upper() if isinstance(value, str) else value),
]
Format = Annotated[
    Literal["text", "json"],
    BeforeValidator(lambda value: value.lower() if isinstance(value, str) else value),
]


class Env(Schema):
    # --- Local mode or production, HTTPS (security.py) ---------------------------------------
    DJANGO_DEBUG: bool | None = shown("unset: local mode")
    DJANGO_SECRET_KEY: str = shown("local mode: generated once into `var/secret_key`", "")
    DJANGO_ALLOWED_HOSTS: CommaList = ["localhost", "127.0.0.1", "[::1]"]  # noqa: RUF012
    DJANGO_SECURE_PROXY_SSL_HEADER: bool = False
    DJANGO_SECURE_SSL_REDIRECT: bool | None = shown("on in production, off locally")
    DJANGO_SECURE_COOKIES: bool | None = shown("on in production, off locally")
    DJANGO_SECURE_HSTS_SECONDS: int | None = shown("`31536000` in production, `0` locally", ge=0)
    DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS: bool = False
    DJANGO_SECURE_HSTS_PRELOAD: bool = False
    DJANGO_CSRF_TRUSTED_ORIGINS: Origins = []  # noqa: RUF012
    ROLLBACK_LOGIN_FAILURES_LIMIT: Count = 5
    ROLLBACK_LOGIN_FAILURES_PER_IP: Count = 50
    ROLLBACK_LOGIN_LOCKOUT_SECONDS: int = Field(15 * 60, ge=1)
    ROLLBACK_SIGNUPS_PER_HOUR_PER_IP: Count = 10
    ACCOUNTS_PENDING: bool = False
    LOCAL_LOGIN: bool = True
    OIDC_ISSUER: str = ""
    OIDC_CLIENT_ID: str = ""
    OIDC_CLIENT_SECRET: str = ""
    OIDC_NAME: str = Field("single sign-on", min_length=1, max_length=60)
    OIDC_SIGNUP: bool = True
    OIDC_GROUPS_CLAIM: str = Field("", max_length=200)
    AUTH_PROXY_HEADER: str = Field("", pattern=r"^[A-Za-z0-9-]*$", max_length=100)
    AUTH_PROXY_ADDRESSES: ProxyAddresses = []  # noqa: RUF012
    ROLLBACK_TRUSTED_PROXIES: Count = 0
    ROLLBACK_ENCRYPTION_KEYS: FernetKeys = shown("derived from `DJANGO_SECRET_KEY`", [])

    # --- Files, logs (core.py) -----------------------------------------------------------------
    ROLLBACK_VAR_DIR: Path | None = shown("`var/`")
    LOG_FORMAT: Format = "text"
    LOG_LEVEL: Level = "INFO"

    # --- Database, Redis, channel layer, health (stores.py) ----------------------------------
    DATABASE_URL: str = shown("SQLite file `var/rollback.sqlite3`", "")
    DATABASE_POOL_SIZE: int | None = shown(
        "10; a Celery worker with a pool of threads: half its concurrency plus 2 (at least 10);"
        " a worker's prefork process: 4",
        ge=1,
    )
    HTTP_THREADS: int = Field(128, ge=1, le=1024)
    DATABASE_POOL_TIMEOUT: Seconds = 30.0
    DATABASE_CONNECT_TIMEOUT: int = Field(3, ge=2)
    REDIS_URL: str = ""
    REDIS_SOCKET_TIMEOUT: BoundSeconds = Field(
        30.0, gt=5, description="above channels_redis's 5 s read"
    )
    REDIS_CONNECT_TIMEOUT: Seconds = 2.0
    REDIS_COMMAND_TIMEOUT: Seconds = 3.0
    CHANNEL_LAYER_CAPACITY: Count = Field(
        20_000, description="messages a channel (a web process's inbox) may hold"
    )
    HEALTH_CHECK_TIMEOUT: Seconds = 2.0
    HEALTH_HEARTBEAT_SECONDS: Seconds = 5.0
    HEALTH_WORKER_MAX_AGE: Seconds = 30.0
    HEALTH_BEAT_MAX_AGE: BoundSeconds = Field(
        60.0, gt=5, description="beat wakes at least every 5 s, or beat looks down"
    )

    # --- The agent and the model (agent.py) --------------------------------------------------
    OPENAI_API_KEY: str = ""
    OPENAI_BASE_URL: str = ""
    AGENT_MODEL: str = "gpt-4o-mini"
    AGENT_ALLOWED_MODELS: CommaList = shown("`AGENT_MODEL` alone", [])
    AGENT_MAX_RETRIES: Count = 3
    AGENT_TIMEOUT: Seconds = 60.0
    AGENT_MAX_INPUT_CHARS: int = Field(32_000, ge=1)
    AGENT_MAX_OUTPUT_TOKENS: Count = Field(4096, description="0: not sent")
    AGENT_CONTEXT_TOKENS: int = Field(128_000, ge=1)
    AGENT_MAX_REPLY_CHARS: int = Field(200_000, ge=1)
    AGENT_MAX_TOOL_CALLS: Count = Field(20, description="0: no tool runs")
    AGENT_TOOLS: JsonOrCommaList = []  # noqa: RUF012
    AGENT_MCP_SERVERS: str = ""
    AGENT_MCP_TIMEOUT: Seconds = 30.0
    AGENT_MCP_BACKOFF_SECONDS: Seconds = 60.0
    AGENT_MCP_MAX_STDIO: Count = Field(8, description="stdio MCP server processes per worker")
    AGENT_MCP_STDIO_IDLE_SECONDS: Seconds = 300.0
    AGENT_MCP_REFRESH_SECONDS: Seconds = 300.0
    AGENT_MCP_MAX_TOOLS: Count = Field(100, description="tools per MCP server")
    AGENT_MCP_MAX_SCHEMA_CHARS: Count = Field(
        16_000, description="characters of an MCP tool's schema"
    )
    AGENT_MCP_MAX_RESULT_CHARS: Count = Field(
        20_000, description="characters of an MCP tool's result"
    )
    AGENT_VISION_MODELS: CommaList = [  # noqa: RUF012
        "gpt-4o*",
        "gpt-4.1*",
        "gpt-5*",
        "o3*",
        "o4*",
    ]
    AGENT_APPROVAL_SECONDS: Seconds = 600.0
    AGENT_TOOL_TIMEOUT_SECONDS: BoundSeconds = Field(60.0, gt=0, le=24 * 3600)
    AGENT_TOOL_MAX_ABANDONED: int = Field(16, ge=1, le=1000)
    DEMO_MODEL_WORD_DELAY: BoundSeconds = Field(0.02, ge=0)
    MEMORY_L2_MAX_CHARS: int = Field(20_000, ge=1)
    MEMORY_MAX_PER_USER: Count = 5_000
    MEMORY_PROMPT_CHARS: Count = Field(2_000, description="0: none")
    MEMORY_RECALL_LIMIT: int = Field(5, ge=1)
    WORKSPACE_MAX_FILE_BYTES: int = Field(262_144, ge=1)
    WORKSPACE_MAX_FILES: int = Field(1_000, ge=1)
    WORKSPACE_SESSION_MAX_VERSIONS: Count = Field(
        10_000, description="file versions per session, 0: no quota"
    )
    WORKSPACE_SESSION_MAX_BYTES: Count = Field(
        100 * 1024 * 1024, description="bytes per session, 0: no quota"
    )
    WORKSPACE_USER_MAX_VERSIONS: Count = Field(
        100_000, description="file versions per user, 0: no quota"
    )
    WORKSPACE_USER_MAX_BYTES: Count = Field(
        1024 * 1024 * 1024, description="bytes per user, 0: no quota"
    )
    SANDBOX: Literal["auto", "off"] = "auto"
    SANDBOX_BWRAP: str = "bwrap"
    SANDBOX_DIR: Path | None = shown("a folder of `/dev/shm`, or of the system's temporary one")
    SANDBOX_READ_PATHS: CommaList = []  # noqa: RUF012
    SANDBOX_TIMEOUT_SECONDS: BoundSeconds = Field(30.0, gt=0, le=3600)
    SANDBOX_MAX_SECONDS: BoundSeconds = Field(300.0, gt=0, le=24 * 3600)
    SANDBOX_MEMORY_BYTES: int = Field(1024 * 1024 * 1024, ge=64 * 1024 * 1024)
    SANDBOX_MAX_PROCESSES: int = Field(64, ge=4, le=10_000)
    SANDBOX_MAX_OPEN_FILES: int = Field(256, ge=16, le=65_536)
    SANDBOX_MAX_OUTPUT_BYTES: int = Field(64 * 1024, ge=1024)
    SANDBOX_MAX_DISK_BYTES: int = Field(256 * 1024 * 1024, ge=1024 * 1024)
    SANDBOX_MAX_FILES: int = Field(10_000, ge=10)
    SANDBOX_TMP_BYTES: int = Field(64 * 1024 * 1024, ge=1024 * 1024)
    SANDBOX_PER_WORKER: int = Field(2, ge=1, le=64)
    SANDBOX_NETWORK: Network = ["none"]  # noqa: RUF012
    SANDBOX_NETWORK_APPROVAL: bool = True
    ROLLBACK_IMPORT_MAX_BYTES: int = Field(50 * 1024 * 1024, ge=1)
    ROLLBACK_METADATA_MAX_BYTES: int = Field(64 * 1024, ge=1)
    ROLLBACK_STATE_MAX_BYTES: int = Field(64 * 1024, ge=1)
    ROLLBACK_MAX_SESSIONS_PER_USER: Count = 10_000
    ROLLBACK_MAX_SHARES_PER_USER: Count = 1_000

    # --- Workers: turns and their recovery, retention (workers.py) ----------------------------
    TURN_HEARTBEAT_SECONDS: Seconds = 3.0
    AGENT_TURN_STALE_SECONDS: int = Field(15, ge=1)
    AGENT_TURN_ATTEMPTS: int = Field(2, ge=1)
    TURN_RECOVERY_SECONDS: Seconds = 5.0
    TURN_QUEUE_TIMEOUT: int = Field(15 * 60, ge=1)
    TURN_REDISPATCH_SECONDS: int = Field(30, ge=1)
    TURN_STOP_POLL_SECONDS: Seconds = 0.5
    TURN_THREADS: int | None = shown(
        "16 on SQLite; a quarter of DATABASE_POOL_SIZE (at least 2) on PostgreSQL", ge=1, le=256
    )
    RETENTION_AUTO_CHECKPOINT_DAYS: Count = Field(7, description="days; 0 turns the rule off")
    RETENTION_KEEP_LATEST_AUTO: Count = Field(5, description="automatic checkpoints per branch")
    RETENTION_ARCHIVE_DAYS: Count = Field(30, description="days; 0 turns the rule off")

    # --- The REST API and the sockets (api.py) ------------------------------------------------
    API_THROTTLE_USER: Rate = "1200/min"
    API_THROTTLE_ANON: Rate = "60/min"
    API_TURN_WAIT_SECONDS: BoundSeconds = Field(120.0, ge=0)
    API_TURN_WAIT_POLL_SECONDS: Seconds = 1.5
    ROLLBACK_MAX_REQUEST_BYTES: int | None = shown("import limit + 1 MiB", ge=1)
    ROLLBACK_WS_ACCESS_CACHE_SECONDS: BoundSeconds = Field(1.0, ge=0)
    ROLLBACK_WS_RECHECK_SECONDS: BoundSeconds = Field(60.0, ge=1)
    ROLLBACK_WS_CATCH_UP_SECONDS: BoundSeconds = Field(0.5, ge=0.05)

    # --- The Telegram bridge (integrations.py) -----------------------------------------------
    TELEGRAM_BOT_TOKEN: str = ""
    TELEGRAM_WEBHOOK_SECRET: str = ""
    TELEGRAM_API_URL: str = "https://api.telegram.org"
    TELEGRAM_BOT_USERNAME: TelegramUsername = ""
    TELEGRAM_EDIT_SECONDS: Seconds = 1.0
    TELEGRAM_UPDATE_RETRY_SECONDS: Seconds = 30.0
    TELEGRAM_UPDATE_CLAIM_SECONDS: Seconds = 300.0
    TELEGRAM_UPDATE_ATTEMPTS: int = Field(3, ge=1)
    TELEGRAM_LINK_ATTEMPTS_PER_CHAT: Count = Field(10, description="0 turns the limit off")
    TELEGRAM_LINK_ATTEMPTS_PER_USER: Count = Field(20, description="0 turns the limit off")
    TELEGRAM_LINK_WINDOW_SECONDS: int = Field(15 * 60, ge=1)

    @property
    def production(self) -> bool:
        """DJANGO_DEBUG set to false: a production deployment (see security.py)."""
        return self.DJANGO_DEBUG is False

    @model_validator(mode="after")
    def _health_ages_can_pass(self) -> Env:
        if self.HEALTH_WORKER_MAX_AGE <= self.HEALTH_HEARTBEAT_SECONDS:
            raise ValueError(
                f"HEALTH_WORKER_MAX_AGE ({self.HEALTH_WORKER_MAX_AGE:g} s) must be longer than"
                f" HEALTH_HEARTBEAT_SECONDS ({self.HEALTH_HEARTBEAT_SECONDS:g} s), or every worker"
                " looks down."
            )
        if self.AGENT_TURN_STALE_SECONDS <= self.TURN_HEARTBEAT_SECONDS:
            raise ValueError(
                f"AGENT_TURN_STALE_SECONDS ({self.AGENT_TURN_STALE_SECONDS:g} s) must be longer"
                f" than TURN_HEARTBEAT_SECONDS ({self.TURN_HEARTBEAT_SECONDS:g} s), or every"
                " running turn looks as if its worker died between two beats."
            )
        return self

    @model_validator(mode="after")
    def _sso_is_whole(self) -> Env:
        if self.OIDC_ISSUER and not self.OIDC_ISSUER.startswith(("https://", "http://")):
            raise ValueError(
                f"OIDC_ISSUER: {self.OIDC_ISSUER!r} is not a URL: write the provider's issuer with"
                " its scheme, e.g. https://sso.example/realms/staff"
            )
        if self.OIDC_ISSUER and not (self.OIDC_CLIENT_ID and self.OIDC_CLIENT_SECRET):
            raise ValueError(
                "OIDC_ISSUER is set: single sign-on also needs OIDC_CLIENT_ID and"
                " OIDC_CLIENT_SECRET (the client registered at the provider)"
            )
        return self

    @model_validator(mode="after")
    def _proxy_is_listed(self) -> Env:
        if self.AUTH_PROXY_HEADER and not self.AUTH_PROXY_ADDRESSES:
            raise ValueError(
                "AUTH_PROXY_HEADER is set: list the authenticating proxy's addresses in"
                " AUTH_PROXY_ADDRESSES, the only ones whose header is trusted"
            )
        return self

    @model_validator(mode="after")
    def _production_is_safe(self) -> Env:
        key = self.DJANGO_SECRET_KEY
        if self.production and weak_secret_key(key):
            raise ValueError(
                f"DJANGO_SECRET_KEY is {'too weak' if key else 'not set'}: production"
                " (DJANGO_DEBUG=0) needs the same long random key on every host (at least 50"
                " characters), e.g. from:"
                " python -c 'import secrets; print(secrets.token_urlsafe(50))'"
            )
        if self.production and "*" in self.DJANGO_ALLOWED_HOSTS:
            raise ValueError(
                "DJANGO_ALLOWED_HOSTS=* trusts any Host header: production (DJANGO_DEBUG=0) needs"
                " the site's own host names, e.g. DJANGO_ALLOWED_HOSTS=rollback.example"
            )
        return self


def weak_secret_key(key: str) -> bool:
    """Django's own test (`check --deploy`, security.W009): short, repetitive, or generated by
    startproject."""
    return len(key) < 50 or len(set(key)) < 5 or key.startswith("django-insecure-")


# The environment as it was when the settings were imported; Env.load() reads it again.
env = Env.load()
