"""The chat header's session settings: the model picker and the Instructions button
(sessions_app/_session_controls.html), rendered from the session alone, so every view that
renders the header (the page, its live refresh, the session list) shows them the same."""

from __future__ import annotations

from typing import Any

from django import template

from access.errors import ModelNotAllowed
from access.selectors import default_model_for, models_for
from agents.mcp.access import usable_servers
from core.errors import InvalidInput
from core.model_choice import (
    DEMO_MODEL_ID,
    DEMO_MODEL_NAME,
    chosen_instructions,
    chosen_model,
    is_demo,
)
from sessions_app.models import Session

register = template.Library()


def _chosen(session: Session, error: str) -> tuple[list[str], str, str, str]:
    """The models offered, the one that answers, its name as shown, and the error to show. With
    no model server (core.model_choice.is_demo) the demo model answers whatever the session
    chose, so it alone is named (agents.model builds it)."""
    if is_demo():
        return [DEMO_MODEL_ID], DEMO_MODEL_ID, DEMO_MODEL_NAME, error
    models = models_for(session.owner)  # those the owner's access gives (access.selectors)
    try:
        default = default_model_for(session.owner)
    except ModelNotAllowed as exc:
        return models, "", "no model", error or exc.people
    try:
        chosen = chosen_model(session.settings) or default
    except InvalidInput:
        chosen = default
        error = error or f"The model this session chose is no longer allowed; {chosen} answers."
    if chosen not in models:
        error = error or f"Your access no longer includes the model this session chose, {chosen}."
    return models, chosen, chosen, error


def picker_context(session: Session, *, error: str = "") -> dict[str, Any]:
    """The models the session may use, the one that answers (the default when what it stored
    is no longer allowed, the demo model while it answers; see agents.model), and whether it
    has instructions."""
    models, chosen, label, error = _chosen(session, error)
    try:
        has_instructions = bool(chosen_instructions(session.settings))
    except InvalidInput:
        has_instructions = True
    return {
        "session": session,
        "models": models,
        "chosen_model": chosen,
        "model_label": label,
        "demo_model": is_demo(),
        "has_instructions": has_instructions,
        # The Tools menu, when its owner may use an MCP server (agents.mcp.access).
        "has_tools": usable_servers(session.owner).exists(),
        "picker_error": error,
    }


@register.inclusion_tag("sessions_app/_session_controls.html")
def session_controls(session: Session) -> dict[str, Any]:
    return picker_context(session)
