"""The note telling the model what a restore left behind (the branch's `left_behind`, kept by
checkpoints.services), and the lines telling its user."""

from __future__ import annotations

import json
from typing import Any

from sessions_app.models import Branch

# The note telling the model what a restore left behind (the branch's `left_behind`, kept by
# checkpoints.services): at most this many effects, the newest, each call's arguments cut short.
LEDGER_NOTE_EFFECTS = 10
LEDGER_NOTE_ARGS_CHARS = 160


def left_behind_note(branch: Branch) -> str | None:
    """What the restore that made (or rewound) `branch` could not undo, for the model's
    instructions: the external effects of tool calls it left behind, so the model does not do
    them again unasked. None when the branch's restore left nothing behind."""
    entries = (branch.metadata or {}).get("left_behind")
    if not isinstance(entries, list):
        return None
    lines = [_ledger_line(e) for e in entries[-LEDGER_NOTE_EFFECTS:] if isinstance(e, dict)]
    if not lines:
        return None
    more = len(entries) - LEDGER_NOTE_EFFECTS
    if more > 0:
        lines.insert(0, f"- (and {more} earlier ones)")
    return (
        "<left_behind>\n"
        "This conversation was restored to an earlier point. These tool calls were made before "
        "the restore and acted outside this conversation: the restore did not undo them, they "
        "still happened. Do not do them again unless the user asks you to.\n"
        + "\n".join(lines)
        + "\n</left_behind>"
    )


def left_behind_lines(branch: Branch) -> list[str]:
    """What the restore that made (or rewound) `branch` could not undo, for its user: a line per
    external effect left behind (`manage.py chat` prints them, the Telegram bot sends them)."""
    meta = branch.metadata
    effects = meta.get("left_behind") if isinstance(meta, dict) else None
    return [
        f"[cannot undo] {effect.get('tool_name')} ({effect.get('created_at')})"
        for effect in (effects if isinstance(effects, list) else [])
        if isinstance(effect, dict)
    ]


def _ledger_line(entry: dict[str, Any]) -> str:
    tool = str(entry.get("tool_name") or "a tool")[:100]
    args = entry.get("args")
    shown = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False, default=str)
    if len(shown) > LEDGER_NOTE_ARGS_CHARS:
        shown = shown[:LEDGER_NOTE_ARGS_CHARS] + "…"
    when = str(entry.get("created_at") or "")[:19].replace("T", " ")
    return f"- {tool} {shown}" + (f" at {when} UTC" if when else "")
