"""The REST API (/api/v1/), request bodies, and the WebSockets (web/ws/)."""

from __future__ import annotations

from rollback_site.settings.agent import ROLLBACK_IMPORT_MAX_BYTES
from rollback_site.settings.env import env

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "web.api.authentication.BearerKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["web.api.permissions.MayUseApi"],
    "DEFAULT_PAGINATION_CLASS": "core.api.Pagination",
    "DEFAULT_RENDERER_CLASSES": ["core.renderers.JSONRenderer"],
    # DRF's JSON parser with a nesting limit (core.validation.DOCUMENT_MAX_DEPTH).
    "DEFAULT_PARSER_CLASSES": ["core.parsers.JSONParser"],
    "EXCEPTION_HANDLER": "core.api.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "core.api_schema.AutoSchema",
    "DEFAULT_THROTTLE_CLASSES": [
        "rest_framework.throttling.UserRateThrottle",
        "rest_framework.throttling.AnonRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {"user": env.API_THROTTLE_USER, "anon": env.API_THROTTLE_ANON},
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
API_TURN_WAIT_SECONDS = env.API_TURN_WAIT_SECONDS
# `"wait": true` wakes on the turn's end event; it also reads the turn this often, in case the
# event was lost (or the turn ended by a path that sends none).
API_TURN_WAIT_POLL_SECONDS = env.API_TURN_WAIT_POLL_SECONDS
# The largest request body accepted, whether sent with Content-Length or chunked: an import
# document plus a margin by default. `python -m rollback_site.serve` refuses a larger one with
# 413 while it arrives, before it is held in memory, and core.bodies.BodyLimit (in front of
# Django) does the same under any ASGI server.
ROLLBACK_MAX_REQUEST_BYTES = env.ROLLBACK_MAX_REQUEST_BYTES or ROLLBACK_IMPORT_MAX_BYTES + 1024**2
DATA_UPLOAD_MAX_MEMORY_SIZE = ROLLBACK_MAX_REQUEST_BYTES

# --- WebSockets (web/ws/) -------------------------------------------------------------------
# A socket's access is checked again while it is open: before each event it delivers (the user
# still active, the API key it was opened with unrevoked, the session still theirs; one query,
# whose answer is reused for ROLLBACK_WS_ACCESS_CACHE_SECONDS), and in full every
# ROLLBACK_WS_RECHECK_SECONDS even when no event comes (a browser's socket also needs its login
# still current: not logged out nor expired, made with the current password). Logout, revoking a
# key and deactivating a user close the sockets concerned at once, in every process. So a
# socket lives as long as its access, whatever the server's own time limit.
ROLLBACK_WS_ACCESS_CACHE_SECONDS = env.ROLLBACK_WS_ACCESS_CACHE_SECONDS
ROLLBACK_WS_RECHECK_SECONDS = env.ROLLBACK_WS_RECHECK_SECONDS
# The channel layer is best-effort (it drops messages past CHANNEL_LAYER_CAPACITY): a socket
# watching a running turn reads, every ROLLBACK_WS_CATCH_UP_SECONDS, the pieces it has not sent
# from the stream's store and the turn's state from the database (one query by primary key), so
# that the missed pieces and the turn's end reach it by themselves. A socket that heard nothing
# of a turn at all finds it running at its next full check (ROLLBACK_WS_RECHECK_SECONDS).
ROLLBACK_WS_CATCH_UP_SECONDS = env.ROLLBACK_WS_CATCH_UP_SECONDS
