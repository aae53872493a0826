"""An image an MCP tool returned, as its tool message stores it (agents.mcp.results), served
to the session's owner only: another user's is a 404 like any missing one, a signed-out visitor
is sent to sign in. Only PNG, JPEG, GIF and WebP whose bytes still match their type are served,
with that type, `nosniff`, and a policy that runs nothing (never SVG: it can carry script)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from agents.mcp.vision import checked_image, stored_images
from core.http import domain_errors
from sessions_app.models import Message
from sessions_app.selectors import get_session_for_user, message_for_user


@login_required
@require_GET
@domain_errors
def tool_image(request: HttpRequest, pk: int, message_id: int, index: int) -> HttpResponse:
    session = get_session_for_user(request.user, pk)
    message = message_for_user(request.user, session, message_id, role=Message.Role.TOOL)
    images = stored_images(message.metadata) if message is not None else []
    found = checked_image(images[index]) if index < len(images) else None
    if found is None:
        raise Http404("No such image.")
    mime, data = found
    response = HttpResponse(data, content_type=mime)
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Disposition"] = "inline"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    # A message is written once, never changed: its image can be kept by this browser.
    response["Cache-Control"] = "private, max-age=86400, immutable"
    return response
