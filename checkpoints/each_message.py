"""A checkpoint before each message a user sends, when their session (or, where it says nothing,
their profile) asks for one: as Claude Code takes one at every prompt, so any message can be gone
back to. Taken by sessions_app.turns.turn_start through sessions_app.hooks, under the session's
lock, at the branch's position before the message is stored; automatic, so the retention job
(ops.retention.prune_auto_checkpoints) cleans old ones like the others."""

from __future__ import annotations

from sessions_app.models import Branch

from .services import checkpoint_create

# How many characters of the message name the checkpoint (after "Before: ").
NAME_WORDS_CHARS = 40


def message_checkpoint_name(text: str) -> str:
    """ "Before: <the message's first words>", cut at a word within NAME_WORDS_CHARS."""
    words = " ".join(text.split())
    if len(words) > NAME_WORDS_CHARS:
        cut = words[:NAME_WORDS_CHARS]
        words = (cut.rsplit(" ", 1)[0] if " " in cut else cut) + "…"
    return f"Before: {words}"


def checkpoint_before_message(branch: Branch, text: str) -> None:
    checkpoint_create(
        branch=branch,
        name=message_checkpoint_name(text),
        is_auto=True,
        metadata={"trigger": "message"},
    )
