"""The chat header's session settings: the model picker and the Instructions button
(sessions_app/_session_controls.html), rendered from the session alone, so every view that
renders the header (the page, its live refresh, the session list) shows them the same."""

from __future__ import annotations

from typing import Any

from django import template

from agents.mcp.access import usable_servers
from core.errors import InvalidInput
from core.model_choice import allowed_models, chosen_instructions, chosen_model
from sessions_app.models import Session

register = template.Library()


def picker_context(session: Session, *, error: str = "") -> dict[str, Any]:
    """The models the session may use, the one it uses ("" when what it stored is no longer
    allowed: the default answers; see agents.model), and whether it has instructions."""
    models = allowed_models()
    try:
        chosen = chosen_model(session.settings) or models[0]
    except InvalidInput:
        chosen, error = (
            models[0],
            error or (f"The model this session chose is no longer allowed; {models[0]} answers."),
        )
    try:
        has_instructions = bool(chosen_instructions(session.settings))
    except InvalidInput:
        has_instructions = True
    return {
        "session": session,
        "models": models,
        "chosen_model": chosen,
        "has_instructions": has_instructions,
        # The Tools menu, when its owner may use an MCP server (agents.mcp.access).
        "has_tools": usable_servers(session.owner).exists(),
        "picker_error": error,
    }


@register.inclusion_tag("sessions_app/_session_controls.html")
def session_controls(session: Session) -> dict[str, Any]:
    return picker_context(session)
