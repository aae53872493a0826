"""The profile's "MCP servers" section (accounts/_mcp_credentials.html): the servers the
signed-in user may use that ask for their own credentials, whether they have given them."""

from __future__ import annotations

from typing import Any

from django import template

from accounts.models import User
from agents.mcp.access import server_views

register = template.Library()


@register.inclusion_tag("accounts/_mcp_credentials.html", takes_context=True)
def mcp_credentials_section(context: template.Context) -> dict[str, Any]:
    request = context["request"]
    user = request.user
    servers = [v for v in server_views(user) if v.asks_for] if isinstance(user, User) else []
    return {"servers": servers, "request": request, "csrf_token": context.get("csrf_token")}
