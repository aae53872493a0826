"""AGENT_MCP_SERVERS: the operator's MCP servers written in the environment, checked at the start
and written into the `McpServer` rows (the admin's) on first use in each process.

The setting is a JSON list of `{"name", "url"?, "transport"?: "http"|"sse"|"stdio",
"command"?, "args"?, "env"?, "headers"?, "approval"?: [tool names], "allow"?, "deny"?,
"timeout"?, "enabled"?}`: `url` for http (the default) and sse, `command` for stdio (the
transport is stdio when a command is given and no transport). A bad entry stops the start with
an ImproperlyConfigured that names the entry (its position and name), never its headers or its
env: they are secrets. An approval name is checked against the server's tools once its catalogue
is known (agents.mcp.services.approval_check); before that it is kept, and the first listing
records an unknown one as the server's last error.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.core.validators import URLValidator

from .models import MCP_NAME_PATTERN

KEYS = frozenset(
    {
        "name",
        "url",
        "transport",
        "command",
        "args",
        "env",
        "headers",
        "approval",
        "allow",
        "deny",
        "timeout",
        "enabled",
    }
)
TRANSPORT_NAMES = ("http", "sse", "stdio")
MAX_TIMEOUT = 600.0
# A header's name as HTTP allows it (a token); its value must be one line.
HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$")


@dataclass(frozen=True)
class McpServerEntry:
    """One checked entry. `None` for a key the entry leaves out: the row keeps what it has."""

    name: str
    url: str
    headers: dict[str, str] | None = None
    approval: list[str] | None = None
    enabled: bool | None = None
    transport: str = "http"
    command: str = ""
    args: list[str] | None = None
    env: dict[str, str] | None = None
    timeout: float | None = None
    allow: list[str] | None = None
    deny: list[str] | None = None
    given: frozenset[str] = field(default_factory=frozenset)


def _raw() -> list[Any]:
    value = getattr(settings, "AGENT_MCP_SERVERS", None) or []
    if isinstance(value, str):
        if not value.strip():
            return []
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise ImproperlyConfigured(f"AGENT_MCP_SERVERS is not valid JSON: {exc}") from None
    if not isinstance(value, list):
        raise ImproperlyConfigured(
            'AGENT_MCP_SERVERS must be a JSON list of {"name", "url", "headers"?, "approval"?, '
            '"enabled"?} objects.'
        )
    return value


def check_headers(value: object, where: str) -> dict[str, str]:
    """A {str: str} object of header names and one-line values; the error never quotes a
    value (a secret)."""
    if not isinstance(value, dict):
        raise ImproperlyConfigured(f"{where}: headers must be an object of names to strings.")
    for key, item in value.items():
        if not isinstance(key, str) or not HEADER_NAME.match(key):
            raise ImproperlyConfigured(f"{where}: {str(key)[:100]!r} is not a header name.")
        if not isinstance(item, str) or "\n" in item or "\r" in item or "\0" in item:
            raise ImproperlyConfigured(
                f"{where}: the value of header {key!r} must be a string on one line."
            )
    return dict(value)


def _entry(position: int, item: object) -> McpServerEntry:
    where = f"AGENT_MCP_SERVERS[{position}]"
    if not isinstance(item, dict):
        raise ImproperlyConfigured(f"{where} must be an object with a name and a url or command.")
    name = item.get("name")
    if isinstance(name, str):
        where = f"{where} ({name[:40]!r})"
    unknown = sorted(str(k) for k in set(item) - KEYS)
    if unknown:
        raise ImproperlyConfigured(f"{where}: unknown keys {', '.join(unknown)}.")
    if not isinstance(name, str) or not re.match(MCP_NAME_PATTERN, name):
        raise ImproperlyConfigured(
            f"{where}: the name must be letters, digits, _ and - (at most 40), starting with a "
            "letter or digit."
        )
    transport, url, command = _where_it_runs(item, where)
    headers = check_headers(item["headers"], where) if "headers" in item else None
    enabled = item.get("enabled")
    if enabled is not None and not isinstance(enabled, bool):
        raise ImproperlyConfigured(f"{where}: enabled must be true or false.")
    env = item.get("env")
    if env is not None and (
        not isinstance(env, dict)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
    ):
        raise ImproperlyConfigured(f"{where}: env must be an object of names to strings.")
    return McpServerEntry(
        name=name,
        url=url,
        headers=headers,
        approval=_names(item, "approval", where),
        enabled=enabled,
        transport=transport,
        command=command,
        args=_names(item, "args", where),
        env=env,
        timeout=check_timeout(item.get("timeout"), where),
        allow=_names(item, "allow", where),
        deny=_names(item, "deny", where),
        given=frozenset(str(k) for k in item),
    )


def _names(item: dict[str, Any], key: str, where: str) -> list[str] | None:
    value = item.get(key)
    if value is not None and (
        not isinstance(value, list) or not all(isinstance(a, str) for a in value)
    ):
        raise ImproperlyConfigured(f"{where}: {key} must be a list of strings.")
    return value


def check_timeout(value: object, where: str) -> float | None:
    """None (AGENT_MCP_TIMEOUT) or seconds in (0, 600]."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 600:
        raise ImproperlyConfigured(f"{where}: timeout must be a number of seconds in (0, 600].")
    return float(value)


def check_url(url: object, where: str) -> str:
    try:
        if not isinstance(url, str) or len(url) > 2000:
            raise ValidationError("not a string")
        URLValidator(schemes=["http", "https"])(url)
    except ValidationError:
        raise ImproperlyConfigured(f"{where}: the url must be an http(s) URL.") from None
    return url


def _where_it_runs(item: dict[str, Any], where: str) -> tuple[str, str, str]:
    """(transport, url, command): a url for http and sse, a command for stdio."""
    command = item.get("command")
    transport = item.get("transport") or ("stdio" if command else "http")
    if transport not in TRANSPORT_NAMES:
        raise ImproperlyConfigured(f"{where}: transport must be one of http, sse, stdio.")
    if transport != "stdio":
        return transport, check_url(item.get("url"), where), ""
    if not isinstance(command, str) or not command.strip() or len(command) > 500:
        raise ImproperlyConfigured(f"{where}: a stdio server needs a command (a program).")
    return transport, "", command


def configured_servers() -> list[McpServerEntry]:
    """The entries of AGENT_MCP_SERVERS, checked (ImproperlyConfigured naming the bad one)."""
    entries = [_entry(i, item) for i, item in enumerate(_raw())]
    names = [e.name for e in entries]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ImproperlyConfigured(f"AGENT_MCP_SERVERS names {', '.join(twice)} more than once.")
    return entries
