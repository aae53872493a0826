"""Django itself: the mode (local or production), the apps, middleware, templates, static files
and the logs."""

from __future__ import annotations

from pathlib import Path

from rollback_site.settings.env import env

BASE_DIR = Path(__file__).resolve().parent.parent.parent
VAR_DIR = env.ROLLBACK_VAR_DIR or BASE_DIR / "var"

# --- Local mode or production -----------------------------------------------------------------
# DJANGO_DEBUG has three states. Unset (a fresh clone's `make run`, the test suite): local mode,
# plain HTTP, with a secret key generated once into var/secret_key. True (1): Django's debug mode,
# local too. False, set explicitly (DJANGO_DEBUG=0): production, which refuses to start without a
# strong DJANGO_SECRET_KEY or with DJANGO_ALLOWED_HOSTS=*, and serves HTTPS only (security.py).
DEBUG = env.DJANGO_DEBUG is True
PRODUCTION = env.production

INSTALLED_APPS = [
    # daphne's app (`manage.py runserver` serves ASGI), without importing twisted at setup.
    "rollback_site.daphne_app.DaphneConfig",
    # django.contrib.admin, with the operator's dashboard among the admin site's pages.
    "web.admin_site.RollbackAdminConfig",
    # Before django.contrib.auth: its `changepassword` command is the one run (it closes sockets).
    "accounts",
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
    "django_celery_beat",
    "access",
    "memories",
    "sessions_app",
    "usage",
    "workspace",
    "checkpoints",
    "governance",
    "sharing",
    "agents",
    "ops",
    "integrations",
    "web",
]

MIDDLEWARE = [
    # First: every line logged and every answer given for a request carries its id.
    "web.middleware.RequestIdMiddleware",
    # An address that is not UTF-8 text is a 400 before anything reads it.
    "web.middleware.UndecodableRequestMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # After WhiteNoise: static files keep their own caching and carry no policy.
    "web.middleware.ContentSecurityPolicyMiddleware",
    "web.middleware.PrivateByDefaultMiddleware",
    # Above the session's and CSRF's: a shared conversation's page (/s/...) sets no cookie.
    "web.middleware.NoCookiesOnSharedPagesMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # An ended login: the whole sign-in page, back to the page (not a fragment) afterwards.
    "web.middleware.WholePageSignInMiddleware",
]
if env.AUTH_PROXY_HEADER:  # behind an authenticating proxy: its header signs people in
    MIDDLEWARE.insert(
        MIDDLEWARE.index("django.contrib.auth.middleware.AuthenticationMiddleware") + 1,
        "web.middleware.TrustedProxyUserMiddleware",
    )

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
                "web.pages.context_processors.site",
            ],
        },
    },
]

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

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

# --- Logs --------------------------------------------------------------------------------------
# Every line goes to standard error, as text (LOG_FORMAT=text, the default) or as one JSON object
# per line (LOG_FORMAT=json), with the ids of what it is about: the request (X-Request-ID), the
# user, the session and the turn (core.logs; a turn's lines in a worker carry the id of the
# request that queued it). This dict is the only logging configuration: daphne's access log
# (rollback_site.serve), Celery's worker and beat (rollback_site.celery) use it too.
LOG_FORMAT = env.LOG_FORMAT
LOG_LEVEL = env.LOG_LEVEL
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"context": {"()": "core.logs.ContextFilter"}},
    "formatters": {
        "text": {"()": "core.logs.TextFormatter"},
        "json": {"()": "core.logs.JsonFormatter"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": LOG_FORMAT,
            "filters": ["context"],
            # Also for loggers that set a level of their own (agno sets INFO on every run).
            "level": LOG_LEVEL,
        }
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        # Django's own console handler (in DEBUG) would print its lines a second time,
        # unformatted: they go to the root's handler, at the root's level, like every other's.
        "django": {"handlers": [], "level": "NOTSET"},
        # agno gives its loggers a handler of its own (plain text, to standard output) unless
        # they are configured before it is imported: configured here, they go to the root's
        # handler. agno sets their level itself on every run.
        **{
            name: {"handlers": [], "level": "INFO", "propagate": True}
            for name in ("agno", "agno-team", "agno-workflow")
        },
    },
}
