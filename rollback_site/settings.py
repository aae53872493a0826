"""One settings module, driven by the environment (see ../shared/api-contract.md and the README).

Defaults need no configuration: a SQLite file under var/, the in-memory channel layer, Celery
tasks run in process, and the offline demo model. DATABASE_URL and REDIS_URL switch to
PostgreSQL and Redis.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("ROLLBACK_VAR_DIR", BASE_DIR / "var"))


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    return int(value) if value else default


def _secret_key() -> str:
    """DJANGO_SECRET_KEY, or a random key kept in var/secret_key so sessions survive restarts."""
    key = os.environ.get("DJANGO_SECRET_KEY", "").strip()
    if key:
        return key
    path = VAR_DIR / "secret_key"
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        VAR_DIR.mkdir(parents=True, exist_ok=True)
        key = secrets.token_urlsafe(50)
        path.write_text(key)
        path.chmod(0o600)
        return key


SECRET_KEY = _secret_key()
DEBUG = env_bool("DJANGO_DEBUG", False)
ALLOWED_HOSTS = [
    h.strip()
    for h in os.environ.get("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]").split(",")
    if h.strip()
]

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "accounts",
    "sessions_app",
    "checkpoints",
    "agents",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "rollback_site.urls"
ASGI_APPLICATION = "rollback_site.asgi.application"
AUTH_USER_MODEL = "accounts.User"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "accounts.context_processors.site",
            ],
        },
    },
]

# --- Database -------------------------------------------------------------------------------
# SQLite by default. WAL lets readers run beside the writer, the busy timeout makes a writer wait
# for the lock instead of failing, and IMMEDIATE transactions take the write lock up front so
# two transactions never deadlock upgrading a read lock ("database is locked").
SQLITE_OPTIONS = {
    "transaction_mode": "IMMEDIATE",
    "timeout": 20,
    "init_command": (
        "PRAGMA journal_mode=WAL;"
        "PRAGMA synchronous=NORMAL;"
        "PRAGMA foreign_keys=ON;"
        "PRAGMA busy_timeout=20000;"
    ),
}

DATABASE_URL = os.environ.get("DATABASE_URL", "").strip()
# PostgreSQL: each process keeps a bounded pool of connections (psycopg's pool, Django 5.1+).
# Under ASGI every request runs on a thread of its own, so persistent per-thread connections
# (CONN_MAX_AGE) pile up with the threads; with the pool a request borrows a connection and gives
# it back when it ends, and a burst waits up to DATABASE_POOL_TIMEOUT seconds for a free one
# instead of opening more. A process never holds more than DATABASE_POOL_SIZE connections.
DATABASE_POOL_SIZE = env_int("DATABASE_POOL_SIZE", 10)
DATABASE_POOL_TIMEOUT = float(os.environ.get("DATABASE_POOL_TIMEOUT", "").strip() or 30)
if DATABASE_URL:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=0)}
    if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
        DATABASES["default"]["OPTIONS"] = dict(SQLITE_OPTIONS)
    else:
        DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
            "min_size": 1,
            "max_size": max(1, DATABASE_POOL_SIZE),
            "timeout": DATABASE_POOL_TIMEOUT,
            # Idle connections above min_size are closed after 5 minutes.
            "max_idle": 300,
        }
        # A connection is checked before it is lent (a restarted server, a dropped socket).
        DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
else:
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(VAR_DIR / "rollback.sqlite3"),  # as a str, like the DATABASE_URL branch
            "OPTIONS": dict(SQLITE_OPTIONS),
        }
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis: channel layer, Celery broker, cache ----------------------------------------------
REDIS_URL = os.environ.get("REDIS_URL", "").strip()
# The channel layer waits for a socket's next event with a blocking Redis read of
# channels_redis's `brpop_timeout` (5 s). The Redis client's own read timeout must be longer, or
# an idle socket dies with "Timeout reading from ..." (redis-py 8 made 5 s its default): so it is
# set here, whatever the client's default. Keepalive notices a dead Redis on an idle connection.
REDIS_SOCKET_TIMEOUT = float(os.environ.get("REDIS_SOCKET_TIMEOUT", "").strip() or 30)
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                "hosts": [
                    {
                        "address": REDIS_URL,
                        "socket_timeout": REDIS_SOCKET_TIMEOUT,
                        "socket_connect_timeout": 5,
                        "socket_keepalive": True,
                        "health_check_interval": 15,
                    }
                ]
            },
        }
    }
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": "rollback",
        }
    }
    CELERY_BROKER_URL = REDIS_URL
    CELERY_TASK_ALWAYS_EAGER = False
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    CELERY_BROKER_URL = "memory://"
    # No broker: tasks run in the process that enqueues them.
    CELERY_TASK_ALWAYS_EAGER = True
    CELERY_TASK_EAGER_PROPAGATES = True

CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TIMEZONE = "UTC"

# --- The agent ------------------------------------------------------------------------------
OPENAI_API_KEY = os.environ.get("OPENAI_API_KEY", "").strip()
OPENAI_BASE_URL = os.environ.get("OPENAI_BASE_URL", "").strip()
AGENT_MODEL = os.environ.get("AGENT_MODEL", "").strip() or "gpt-4o-mini"
AGENT_MAX_RETRIES = env_int("AGENT_MAX_RETRIES", 3)
AGENT_MAX_INPUT_CHARS = env_int("AGENT_MAX_INPUT_CHARS", 32_000)
AGENT_TIMEOUT = float(os.environ.get("AGENT_TIMEOUT", "").strip() or 60)
# A worker running a turn touches its heartbeat every TURN_HEARTBEAT_SECONDS, on a thread of its
# own, however slow the model. A running turn with no heartbeat for AGENT_TURN_STALE_SECONDS lost
# its worker: the recovery job (every TURN_RECOVERY_SECONDS) queues it again for another worker,
# up to AGENT_TURN_ATTEMPTS claims in all, then fails it. A queued turn no worker has claimed for
# TURN_QUEUE_TIMEOUT is failed too. Either way the user's message stays.
TURN_HEARTBEAT_SECONDS = float(os.environ.get("TURN_HEARTBEAT_SECONDS", "").strip() or 3)
AGENT_TURN_STALE_SECONDS = env_int("AGENT_TURN_STALE_SECONDS", 15)
AGENT_TURN_ATTEMPTS = max(1, env_int("AGENT_TURN_ATTEMPTS", 2))
TURN_RECOVERY_SECONDS = float(os.environ.get("TURN_RECOVERY_SECONDS", "").strip() or 5)
TURN_QUEUE_TIMEOUT = env_int("TURN_QUEUE_TIMEOUT", 15 * 60)

# Retention: run `celery -A rollback_site beat` beside the workers to keep, every night, only the
# newest ROLLBACK_AUTO_CHECKPOINTS_KEEP automatic checkpoints of each branch.
CELERY_BEAT_SCHEDULE = {
    "cleanup-auto-checkpoints": {
        "task": "agents.cleanup_auto_checkpoints",
        "schedule": 24 * 60 * 60,
    },
    # Take over or fail turns whose worker died (see TURN_HEARTBEAT_SECONDS above). A run that
    # no worker picked up in time is dropped, not stacked behind the next one.
    "recover-turns": {
        "task": "agents.recover_turns",
        "schedule": TURN_RECOVERY_SECONDS,
        "options": {"expires": 30},
    },
}

# Pause between the demo model's streamed words, so its replies visibly stream in.
DEMO_MODEL_WORD_DELAY = float(os.environ.get("DEMO_MODEL_WORD_DELAY", "").strip() or 0.02)
os.environ.setdefault("AGNO_TELEMETRY", "false")

# --- Rollback limits ------------------------------------------------------------------------
ROLLBACK_IMPORT_MAX_BYTES = env_int("ROLLBACK_IMPORT_MAX_BYTES", 50 * 1024 * 1024)
ROLLBACK_AUTO_CHECKPOINTS_KEEP = env_int("ROLLBACK_AUTO_CHECKPOINTS_KEEP", 20)

# --- The REST API (/api/v1/) ------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "accounts.authentication.BearerKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "sessions_app.api_support.Pagination",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "EXCEPTION_HANDLER": "sessions_app.api_support.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "sessions_app.api_schema.AutoSchema",
    "DEFAULT_THROTTLE_CLASSES": [
        "rest_framework.throttling.UserRateThrottle",
        "rest_framework.throttling.AnonRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "user": os.environ.get("API_THROTTLE_USER", "").strip() or "1200/min",
        "anon": os.environ.get("API_THROTTLE_ANON", "").strip() or "60/min",
    },
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Rollback API",
    "DESCRIPTION": "Sessions, branches, messages, turns and checkpoints. See /api/v1/docs/.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
}
# How long POST /turns/ with "wait": true waits for the answer before answering 202.
API_TURN_WAIT_SECONDS = float(os.environ.get("API_TURN_WAIT_SECONDS", "").strip() or 120)
# An import document arrives as the request body.
DATA_UPLOAD_MAX_MEMORY_SIZE = ROLLBACK_IMPORT_MAX_BYTES + 1024 * 1024

# --- The rest -------------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise warns on every start without it
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
if DEBUG:
    STORAGES["staticfiles"] = {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}

LOGIN_URL = "accounts:login"
LOGIN_REDIRECT_URL = "chat:home"
LOGOUT_REDIRECT_URL = "accounts:login"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
}
