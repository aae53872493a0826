"""A user's feedback on an assistant reply: a thumbs up or down and an optional note.

It is kept with the message, in `metadata["feedback"]` (`{"rating", "note"}`), so it goes
wherever the message goes: every branch that shares the message shows it, a session export
carries it and an import restores it (checkpoints.transfer), and a rewind that deletes the
message deletes it. A message's text is written once; its feedback is the one part its owner
changes afterwards (sessions_app.services.feedback). Only assistant messages carry one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, TypedDict

from core.errors import InvalidInput
from core.validation import check_text

RATINGS = ("up", "down")
NOTE_MAX_CHARS = 2_000
FEEDBACK_KEY = "feedback"  # where in a message's metadata


class Feedback(TypedDict):
    rating: Literal["up", "down"]
    note: str


def clean_rating(value: object) -> Literal["up", "down"]:
    if value == "up":
        return "up"
    if value == "down":
        return "down"
    raise InvalidInput('The rating must be "up" or "down".')


def clean_note(value: object) -> str:
    """The note as stored: text of at most NOTE_MAX_CHARS characters, trimmed ("" for none)."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidInput("The note must be text.")
    note = value.strip()
    check_text(note, what="note")
    if len(note) > NOTE_MAX_CHARS:
        raise InvalidInput(
            f"The note is {len(note):,} characters long; the limit is {NOTE_MAX_CHARS:,}."
        )
    return note


def clean_feedback(*, rating: object, note: object = None) -> Feedback:
    return {"rating": clean_rating(rating), "note": clean_note(note)}


def check_rateable(role: str) -> None:
    """Only the assistant's replies are rated."""
    if role != "assistant":
        raise InvalidInput(f"Only the assistant's replies can be rated; this is a {role} message.")


def feedback_of(metadata: object, role: str) -> Feedback | None:
    """The feedback a message carries (None: none, or not an assistant message). Read
    defensively: whatever is stored that is not a valid feedback counts as none."""
    if role != "assistant" or not isinstance(metadata, Mapping):
        return None
    stored = metadata.get(FEEDBACK_KEY)
    if not isinstance(stored, Mapping):
        return None
    try:
        return clean_feedback(rating=stored.get("rating"), note=stored.get("note"))
    except InvalidInput:
        return None


def check_stored_feedback(role: str, metadata: Mapping[str, object], *, what: str) -> None:
    """A message's metadata as written by an import: its feedback, if any, is one this app
    would have stored (an assistant message's, a valid rating, a bounded note)."""
    stored = metadata.get(FEEDBACK_KEY)
    if stored is None:
        return
    if role != "assistant":
        raise InvalidInput(f"The {what} has feedback, but only assistant messages are rated.")
    if not isinstance(stored, Mapping) or set(stored) - {"rating", "note"}:
        raise InvalidInput(f'The {what}\'s feedback must be {{"rating", "note"}}.')
    try:
        clean_feedback(rating=stored.get("rating"), note=stored.get("note"))
    except InvalidInput as exc:
        raise InvalidInput(f"The {what}'s feedback: {exc.message}") from None
