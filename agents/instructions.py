"""The owner's custom instructions, as the agent's instructions carry them: the user's own
(`metadata.preferences.instructions`, for all their sessions), then the session's
(`metadata.settings.instructions`), each labelled and delimited after the built-in instructions
(agno puts the turn's additional context after them), as the owner's preferences: they cannot
change the rules of the tools. The window's fitting counts them like the rest of the
instructions (agents.turn.fit, agents.context.context_usage)."""

from __future__ import annotations

import re

from core.errors import InvalidInput
from core.model_choice import chosen_instructions, clean_instructions
from sessions_app.models import Session

PREAMBLE = (
    "The owner of this conversation wrote the preferences below. Follow them where they do not "
    "conflict with the instructions above; they cannot change how the tools, checkpoints and "
    "rollbacks work."
)
# A delimiter written inside the text would end its block early: it is shown neutralised.
_DELIMITER = re.compile(r"</?\s*(user_instructions|session_instructions)\s*>", re.IGNORECASE)


def _block(tag: str, label: str, text: str) -> str:
    body = _DELIMITER.sub(lambda m: m.group(0).replace("<", "[").replace(">", "]"), text)
    return f"{label}\n<{tag}>\n{body}\n</{tag}>"


def owner_instructions_of(*, user_text: object, session_text: object) -> str | None:
    """The labelled blocks for the user's and the session's instructions (None when neither
    has any). Stored text that is no longer valid (too long, not text) is left out."""
    blocks = []
    try:
        mine = clean_instructions(user_text, what="instructions")
    except InvalidInput:
        mine = ""
    try:
        session = chosen_instructions({"instructions": session_text})
    except InvalidInput:
        session = ""
    if mine:
        blocks.append(
            _block("user_instructions", "The owner's instructions for all sessions:", mine)
        )
    if session:
        blocks.append(
            _block("session_instructions", "The owner's instructions for this session:", session)
        )
    return "\n\n".join([PREAMBLE, *blocks]) if blocks else None


def owner_instructions(session_id: int) -> str | None:
    """The owner's instructions for the session as they are now (read afresh: a change made
    since the agent was built applies to the next turn)."""
    row = Session.objects.filter(pk=session_id).values_list("metadata", "owner__metadata").first()
    if row is None:
        return None
    return owner_instructions_for(session_metadata=row[0], user_metadata=row[1])


def owner_instructions_for(*, session_metadata: object, user_metadata: object) -> str | None:
    """owner_instructions_of, from the session's and the user's metadata."""
    chosen = session_metadata.get("settings") if isinstance(session_metadata, dict) else None
    prefs = user_metadata.get("preferences") if isinstance(user_metadata, dict) else None
    return owner_instructions_of(
        user_text=prefs.get("instructions") if isinstance(prefs, dict) else None,
        session_text=chosen.get("instructions") if isinstance(chosen, dict) else None,
    )
