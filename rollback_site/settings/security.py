"""The secret key and hosts, HTTPS, what a browser may do with the pages, signing in and its
limits. Production (DJANGO_DEBUG=0, core.py) refuses a weak key or any host (env.py)."""

from __future__ import annotations

import secrets

from csp.constants import NONE, SELF

from rollback_site.settings.core import PRODUCTION, VAR_DIR
from rollback_site.settings.env import env


def _secret_key() -> str:
    """DJANGO_SECRET_KEY. In local mode without it, a random key kept in var/secret_key so
    sessions survive restarts; production refuses that (env.py): every host must sign with one
    key."""
    if env.DJANGO_SECRET_KEY:
        return env.DJANGO_SECRET_KEY
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
ALLOWED_HOSTS = env.DJANGO_ALLOWED_HOSTS

# --- HTTPS ------------------------------------------------------------------------------------
# Production serves HTTPS only: http:// is redirected to https://, cookies go over HTTPS only, and
# browsers are told (HSTS) to use nothing else for a year. Local mode serves plain HTTP.
# Behind a proxy that terminates TLS, DJANGO_SECURE_PROXY_SSL_HEADER=1 makes a request that the
# proxy marks "X-Forwarded-Proto: https" count as secure: the proxy must set that header itself,
# never pass the client's on. DJANGO_CSRF_TRUSTED_ORIGINS lists the public origins
# (https://rollback.example) when the proxy does not pass the Host header on.
SECURE_PROXY_SSL_HEADER = (
    ("HTTP_X_FORWARDED_PROTO", "https") if env.DJANGO_SECURE_PROXY_SSL_HEADER else None
)
SECURE_SSL_REDIRECT = (
    PRODUCTION if env.DJANGO_SECURE_SSL_REDIRECT is None else env.DJANGO_SECURE_SSL_REDIRECT
)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = (
    PRODUCTION if env.DJANGO_SECURE_COOKIES is None else env.DJANGO_SECURE_COOKIES
)
SECURE_HSTS_SECONDS = (
    (365 * 24 * 3600 if PRODUCTION else 0)
    if env.DJANGO_SECURE_HSTS_SECONDS is None
    else env.DJANGO_SECURE_HSTS_SECONDS
)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS
SECURE_HSTS_PRELOAD = env.DJANGO_SECURE_HSTS_PRELOAD
# /healthz answers over plain HTTP too: a load balancer probes each server directly, often without
# TLS. The Host header must still be one of DJANGO_ALLOWED_HOSTS (400 otherwise).
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
CSRF_TRUSTED_ORIGINS = env.DJANGO_CSRF_TRUSTED_ORIGINS

# --- What a browser may do with the pages -----------------------------------------------------
# The Content Security Policy (django-csp): scripts, styles and everything else only from this
# site's own files. No inline script, no eval, no inline style: htmx is configured for it in
# templates/base.html. web.middleware adds this host's ws:// or wss:// to connect-src, for the
# chat's WebSocket.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    },
}
# Django's defaults, stated: no MIME sniffing, no Referer to other sites, no opener shared with
# another site's window, no framing.
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"

# --- Signing in and signing up ----------------------------------------------------------------
# Passwords are hashed with Argon2; a password stored by an older hasher below is still accepted,
# and stored again with Argon2 when its user next signs in.
PASSWORD_HASHERS = [
    "django.contrib.auth.hashers.Argon2PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2SHA1PasswordHasher",
    "django.contrib.auth.hashers.BCryptSHA256PasswordHasher",
    "django.contrib.auth.hashers.ScryptPasswordHasher",
]
# Every sign-in with a password (the login page, the admin's) goes through the limits of
# accounts.limits before the password is checked.
AUTHENTICATION_BACKENDS = ["accounts.backends.LimitedModelBackend"]
# After ROLLBACK_LOGIN_FAILURES_LIMIT failed sign-ins to one username, or
# ROLLBACK_LOGIN_FAILURES_PER_IP from one client address (an IPv6 client: its /64), within
# ROLLBACK_LOGIN_LOCKOUT_SECONDS of the first, sign-in is refused (even with the right password)
# until that window ends. A successful sign-in clears its username's count. 0 turns a limit off.
ROLLBACK_LOGIN_FAILURES_LIMIT = env.ROLLBACK_LOGIN_FAILURES_LIMIT
ROLLBACK_LOGIN_FAILURES_PER_IP = env.ROLLBACK_LOGIN_FAILURES_PER_IP
ROLLBACK_LOGIN_LOCKOUT_SECONDS = env.ROLLBACK_LOGIN_LOCKOUT_SECONDS
# Sign-up attempts accepted from one client address per hour (0: no limit).
ROLLBACK_SIGNUPS_PER_HOUR_PER_IP = env.ROLLBACK_SIGNUPS_PER_HOUR_PER_IP
# New accounts (every sign-up but the first administrator's) wait for an administrator's
# approval: they cannot sign in, or be used at any door, until approved (accounts.approval).
ACCOUNTS_PENDING = env.ACCOUNTS_PENDING
# Password sign-in (and sign-up) for everyone; off: for the first administrator alone (the
# others sign in another way: accounts.backends).
LOCAL_LOGIN = env.LOCAL_LOGIN
# Single sign-on with an OpenID Connect provider (accounts.oidc, through mozilla-django-oidc):
# on when OIDC_ISSUER is set. Its endpoints come from the provider's discovery document.
OIDC_ISSUER = env.OIDC_ISSUER.rstrip("/")
OIDC_CLIENT_ID = env.OIDC_CLIENT_ID
OIDC_CLIENT_SECRET = env.OIDC_CLIENT_SECRET
OIDC_NAME = env.OIDC_NAME
OIDC_SIGNUP = env.OIDC_SIGNUP
# The ID token's claim (with userinfo's) whose list of names sets the person's groups at each
# sign-in (accounts.oidc: only groups that exist); "": the groups are managed in the admin.
OIDC_GROUPS_CLAIM = env.OIDC_GROUPS_CLAIM.strip()
if OIDC_ISSUER:
    AUTHENTICATION_BACKENDS = [*AUTHENTICATION_BACKENDS, "accounts.oidc.OidcBackend"]
# Behind an authenticating proxy: the header it sets with the person's username, trusted only on
# requests that come straight from its addresses (accounts.proxy, web.middleware).
AUTH_PROXY_HEADER = env.AUTH_PROXY_HEADER
AUTH_PROXY_ADDRESSES = env.AUTH_PROXY_ADDRESSES
if AUTH_PROXY_HEADER:
    AUTHENTICATION_BACKENDS = [*AUTHENTICATION_BACKENDS, "accounts.proxy.ProxyHeaderBackend"]
# mozilla-django-oidc's own settings: RS256 ID tokens checked against the provider's keys, a
# nonce and PKCE, requests to the provider bounded in time, and the callback's failure page.
OIDC_RP_SIGN_ALGO = "RS256"
OIDC_RP_SCOPES = "openid profile email"
OIDC_USE_NONCE = True
OIDC_USE_PKCE = True
OIDC_TIMEOUT = 10
OIDC_CREATE_USER = True
OIDC_AUTHENTICATION_CALLBACK_URL = "accounts:sso_callback"
OIDC_STORE_ID_TOKEN = False
OIDC_STORE_ACCESS_TOKEN = False
LOGIN_REDIRECT_URL_FAILURE = "/accounts/login/"
# How many reverse proxies in front of the site append the client's address to X-Forwarded-For.
# 0 (the default): the header is ignored and the connection's address is the client's; behind
# proxies that set it, without this setting every client looks like the proxy.
ROLLBACK_TRUSTED_PROXIES = env.ROLLBACK_TRUSTED_PROXIES
# The keys that encrypt secrets at rest (MCP servers' headers, users' own MCP credentials:
# core.sealed): the first encrypts, all decrypt. Unset: derived from SECRET_KEY and its fallbacks.
ROLLBACK_ENCRYPTION_KEYS = env.ROLLBACK_ENCRYPTION_KEYS

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
