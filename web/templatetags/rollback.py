from __future__ import annotations

import json
from typing import Any

from django import template
from django.conf import settings
from django.utils.safestring import SafeString

from agents.shell_replies import ShellView, shell_view
from agents.tools import SHELL_TOOLS
from sessions_app.turns import stopped_line as turns_stopped_line
from web.rendering import render_markdown

register = template.Library()


@register.filter
def markdown(text: str) -> SafeString:
    return render_markdown(text)


@register.simple_tag
def max_input_chars() -> int:
    """The longest message the agent takes (the server refuses longer ones)."""
    return settings.AGENT_MAX_INPUT_CHARS


@register.filter
def pretty_json(value: Any) -> str:
    if value in (None, ""):
        return ""
    if isinstance(value, str):
        text = value
        try:
            value = json.loads(text)
        except ValueError:
            return text
    return json.dumps(value, indent=2, ensure_ascii=False)


@register.filter
def call_names(tool_calls: Any) -> str:
    names: list[str] = []
    for call in tool_calls or []:
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict) and fn.get("name"):
            names.append(str(fn["name"]))
    return ", ".join(names)


@register.filter
def stopped_line(metadata: Any) -> str:
    """A stopped reply's line: "Stopped: notes__add_note ran; write_file did not"."""
    return turns_stopped_line(metadata)


@register.simple_tag
def versions_of(versions: Any, message_id: int) -> Any:
    """The versions of one message (web.chat_state.conversation's `versions`), or None."""
    return versions.get(message_id) if isinstance(versions, dict) else None


@register.simple_tag
def markers_after(markers: Any, message_id: int) -> Any:
    """The checkpoints whose markers follow one message (web.chat_state.conversation's
    `markers`)."""
    return markers.get(message_id, ()) if isinstance(markers, dict) else ()


@register.simple_tag
def run_compare(run_points: Any, message_id: int) -> str:
    """The compare page's query for a run's checkpoints on either side of it
    (web.chat_state.run_points), or "" when the page shows none on a side."""
    points = run_points.get(message_id) if isinstance(run_points, dict) else None
    if not points:
        return ""
    return f"from=checkpoint:{points[0]}&to=checkpoint:{points[1]}"


@register.filter
def shell_run(message: Any) -> ShellView | None:
    """A run_shell or run_tests tool message's result as the terminal block shows it, else None
    (another tool, or a refusal, shown as any result)."""
    if getattr(message, "tool_name", None) not in SHELL_TOOLS:
        return None
    return shell_view(getattr(message, "tool_result", None))
