from __future__ import annotations

import json

from django import template

from sessions_app.rendering import render_markdown

register = template.Library()


@register.filter
def markdown(text: str):
    return render_markdown(text)


@register.filter
def pretty_json(value) -> str:
    if value in (None, ""):
        return ""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return value
    return json.dumps(value, indent=2, ensure_ascii=False)


@register.filter
def call_names(tool_calls) -> str:
    names = []
    for call in tool_calls or []:
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict) and fn.get("name"):
            names.append(str(fn["name"]))
    return ", ".join(names)
