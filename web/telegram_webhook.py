"""`POST /integrations/telegram/webhook/`: where Telegram delivers updates. Thin: it checks the
secret header, bounds and parses the body, stores the update by its `update_id` and answers 200
at once; a task handles it (integrations.telegram.updates), so the model never holds this
request open. Once stored the update is safe: when its task cannot be sent (the broker down),
the periodic sweep handles it, so the answer is 200 all the same."""

from __future__ import annotations

import hmac
import json

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from core.errors import DomainError
from core.validation import clean_json
from integrations.telegram import client
from integrations.telegram.updates import update_receive

# Telegram's updates are a few KiB; anything near this is not one.
MAX_BODY_BYTES = 1024 * 1024
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"  # noqa: S105 - a header name


def _error(status: int, message: str) -> JsonResponse:
    return JsonResponse({"error": message}, status=status)


def _secret_ok(request: HttpRequest) -> bool:
    secret: str = settings.TELEGRAM_WEBHOOK_SECRET
    given = request.headers.get(SECRET_HEADER, "")
    return bool(secret) and hmac.compare_digest(given.encode(), secret.encode())


def _declared_length(request: HttpRequest) -> int:
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 0


@csrf_exempt
@require_POST
def webhook(request: HttpRequest) -> JsonResponse:
    if not client.enabled():
        return _error(404, "The Telegram bridge is not enabled on this server.")
    if not _secret_ok(request):
        return _error(403, "Wrong or missing secret token.")
    if _declared_length(request) > MAX_BODY_BYTES:
        return _error(413, "The update is too large.")
    body = request.read(MAX_BODY_BYTES + 1)
    if len(body) > MAX_BODY_BYTES:
        return _error(413, "The update is too large.")
    try:
        update = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return _error(400, "The body is not JSON.")
    except RecursionError:
        return _error(400, "The update is nested too deeply.")
    try:
        # What no database stores (NUL, lone surrogates, NaN) or nests without end: refused here,
        # not a 500 when the update is stored.
        clean_json(update, what="update")
    except DomainError as exc:
        return _error(400, exc.message)
    if not isinstance(update, dict):
        return _error(400, "The update must be a JSON object.")
    update_id = update.get("update_id")
    if not isinstance(update_id, int) or isinstance(update_id, bool) or update_id < 0:
        return _error(400, "The update has no integer update_id.")
    if update_id >= 2**63:
        return _error(400, "The update_id is out of range.")
    update_receive(update_id=update_id, payload=update)
    return JsonResponse({"ok": True})
