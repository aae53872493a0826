"""A session's current branch as a Markdown document (the "Export as Markdown" of the chat page
and `GET /api/v1/sessions/{id}/export/?format=markdown`): for reading, not for importing back
(the JSON export is the one that imports).

Each message is a section headed by its role. The user's text is shown exactly as typed, inside
a code fence longer than any run of backticks in it, so nothing in it becomes Markdown; the
model's text is Markdown already and stays as it is. Tool calls are summarised in one line each
(name, arguments, the start of the result); checkpoints are marked where they stand.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from datetime import UTC, datetime

from django.http import HttpResponse

from checkpoints.models import Checkpoint
from checkpoints.selectors import lineage_checkpoints
from core.errors import InvalidInput
from sessions_app.labels import branch_label
from sessions_app.models import Message, Session
from sessions_app.selectors import branch_history, current_branch

SUMMARY_CHARS = 200  # of a tool's arguments and result, in its one line

ROLE_HEADINGS: dict[str, str] = {
    Message.Role.USER: "User",
    Message.Role.ASSISTANT: "Assistant",
    Message.Role.SYSTEM: "System",
    Message.Role.TOOL: "Tool",
}


def _time(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _one_line(text: str, limit: int = SUMMARY_CHARS) -> str:
    """`text` on one line, cut at `limit` characters, with no backtick to break its code span."""
    flat = " ".join(text.split()).replace("`", "'")
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _verbatim(text: str) -> str:
    """`text` exactly as typed, in a fence no run of backticks inside it can close."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def _plain(text: str) -> str:
    """A name on one line with Markdown's own characters escaped."""
    return re.sub(r"([\\`*_{}\[\]<>()#+!|~-])", r"\\\1", " ".join(text.split()))


def _tool_line(message: Message) -> str:
    args = json.dumps(message.tool_args, ensure_ascii=False) if message.tool_args else ""
    line = f"- `{_one_line(message.tool_name or 'tool')}`"
    if args:
        line += f" with `{_one_line(args)}`"
    if message.tool_result:
        line += f" → `{_one_line(message.tool_result)}`"
    return line


def _checkpoint_line(checkpoint: Checkpoint) -> str:
    kind = "automatic checkpoint" if checkpoint.is_auto else "checkpoint"
    return (
        f"> ⚑ {kind.capitalize()} **{_plain(checkpoint.checkpoint_name)}** "
        f"(after {checkpoint.message_count} messages, {_time(checkpoint.created_at)})"
    )


def _message_block(message: Message) -> str:
    heading = f"## {ROLE_HEADINGS.get(message.role, message.role.title())}"
    when = f"*{_time(message.created_at)}*"
    if message.role == Message.Role.TOOL:
        return f"{heading}\n\n{when}\n\n{_tool_line(message)}"
    if message.role == Message.Role.ASSISTANT:
        body = message.content.strip() or "*(called tools)*"
        return f"{heading}\n\n{when}\n\n{body}"
    return f"{heading}\n\n{when}\n\n{_verbatim(message.content)}"


def session_markdown(*, session: Session) -> str:
    """The session's current branch, oldest message first, as one Markdown document."""
    branch = current_branch(session)
    marks: defaultdict[int, list[Checkpoint]] = defaultdict(list)
    for checkpoint in reversed(list(lineage_checkpoints(branch))):
        marks[checkpoint.message_count].append(checkpoint)
    parts = [
        f"# {_plain(session.session_name)}",
        f"Branch: {_plain(branch_label(branch))} · {branch.message_count} messages · "
        f"exported from Rollback on {_time(datetime.now(UTC))}",
    ]
    for message in branch_history(branch):
        parts.extend(_checkpoint_line(cp) for cp in marks.pop(message.position, []))
        parts.append(_message_block(message))
    for count in sorted(marks):  # the checkpoints at the end of the history
        parts.extend(_checkpoint_line(cp) for cp in marks[count])
    return "\n\n".join(parts) + "\n"


EXPORT_FORMATS = ("json", "markdown")


def export_format(raw: str | None) -> str:
    """The export's format from a request's `?format=`: json when absent; another is refused."""
    kind = raw or "json"
    if kind not in EXPORT_FORMATS:
        raise InvalidInput("format must be json or markdown.")
    return kind


def export_filename(session: Session, extension: str) -> str:
    """The download's file name: the session's name, letters and digits only, and its id."""
    slug = "".join(c if c.isalnum() else "-" for c in session.session_name)[:60] or "session"
    return f"rollback-{slug}-{session.pk}.{extension}"


def markdown_response(session: Session) -> HttpResponse:
    """The Markdown document as a download (the page's and the API's answer alike)."""
    response = HttpResponse(
        session_markdown(session=session), content_type="text/markdown; charset=utf-8"
    )
    filename = export_filename(session, "md")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
