from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from agents.model import is_demo


def site(request: HttpRequest) -> dict[str, Any]:
    """What every page shows: whether the offline demo model answers, and the user's theme."""
    user = getattr(request, "user", None)
    theme = "system"
    if user is not None and user.is_authenticated:
        chosen = user.preference("theme", "system")
        theme = chosen if chosen in ("light", "dark", "system") else "system"
    return {"demo_model": is_demo(), "theme": theme}
