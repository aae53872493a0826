"""A reply's own controls (sessions_app/_message.html): the models it may be regenerated with,
its model's badge when that is not the session's, and its owner's feedback
(sessions_app/_feedback.html)."""

from __future__ import annotations

from typing import Any

from django import template

from access.selectors import models_for
from core.errors import InvalidInput
from core.model_choice import model_id_for, regenerate_models
from sessions_app.feedback import NOTE_MAX_CHARS, Feedback, feedback_of
from sessions_app.models import Session

register = template.Library()


@register.simple_tag
def regenerate_with_models(session: Any) -> list[str]:
    """The models "Regenerate with…" offers: those of the session owner's access
    (access.selectors.models_for); none (no menu) unless there is a choice."""
    allowed = set(models_for(session.owner)) if isinstance(session, Session) else set()
    models = [m for m in regenerate_models() if m in allowed]
    return models if len(models) > 1 else []


@register.simple_tag
def other_model(message: Any, session: Any) -> str:
    """The session's current model when the reply `message` was written by another one (a reply
    regenerated with another model, or written before the session changed its model); ""
    otherwise, and where there is no session (a shared page, a comparison)."""
    metadata = getattr(message, "metadata", None)
    if not isinstance(metadata, dict) or not isinstance(session, Session) or metadata.get("demo"):
        return ""
    written_by = metadata.get("model")
    if not written_by:
        return ""
    try:
        current = model_id_for(session.settings)
    except InvalidInput:
        return ""
    return current if current != written_by else ""


@register.filter
def feedback(message: Any) -> Feedback | None:
    return feedback_of(getattr(message, "metadata", None), str(getattr(message, "role", "")))


@register.simple_tag
def feedback_note_max() -> int:
    return NOTE_MAX_CHARS
