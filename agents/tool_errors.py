"""What the model and the page see of a tool that raised: its exception's type and a bounded,
scrubbed message; the full text and traceback go to the server's log only (issue 36: a custom
tool's exception text, which may hold a password, went verbatim to the model and the page).

`tool_errors_hook` is one of the agent's agno tool hooks (agents.rollback_agent), inside the
approval gate: a call it wraps either returns, or raises `ToolFailed`, an AgentRunException, which
agno gives the model as the call's result, marked as an error (so the call is not among the
turn's `tools_used`), without logging a traceback of its own. The built-in tools never raise (they
refuse with a result); a custom or MCP tool may."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

from agno.exceptions import AgentRunException, RunCancelledException

log = logging.getLogger("agents.tools")

# The most characters of an exception's message the model and the page are shown.
TOOL_ERROR_CHARS = 300
HIDDEN = "[hidden]"

# Text that looks like a secret: a URL's user and password, a query or key=value pair whose name
# says secret, an Authorization header's credentials, a known key format, and any long run of
# token characters (a key, a token, a hash).
_SENSITIVE = (
    r"(?:pass(?:word|wd)?|pwd|secret|token|api[_-]?key|apikey|key|auth|credentials?|session"
    r"|sig(?:nature)?)"
)
_PATTERNS = (
    (re.compile(r"(?<=://)[^/\s:@]+:[^/\s@]+(?=@)"), HIDDEN),
    (re.compile(r"(?i)\b(bearer|basic|token)\s+[A-Za-z0-9._~+/=-]{8,}"), rf"\1 {HIDDEN}"),
    (
        re.compile(
            rf"(?i)(\b[\w.-]*{_SENSITIVE}[\w.-]*\s*[=:]\s*)"
            r"(?!\[hidden\]|(?:bearer|basic|token)\s)"
            r"(\"[^\"]*\"|'[^']*'|[^\s,;&]+)"
        ),
        rf"\1{HIDDEN}",
    ),
    (re.compile(r"\b(?:sk|pk|rk|ghp|gho|xox[abp]|AKIA)[-_A-Za-z0-9]{10,}"), HIDDEN),
    (re.compile(r"[A-Za-z0-9_+/=-]{32,}"), HIDDEN),
)


class ToolFailed(AgentRunException):
    """A call that failed, with a text safe to show (the hook's scrubbed one, or an MCP call's
    own: agents.mcp.toolset.McpToolError): the tool's result, marked as an error."""


def scrubbed(text: str, limit: int = TOOL_ERROR_CHARS) -> str:
    """`text` with what looks like a secret replaced by "[hidden]", on one line, at most `limit`
    characters."""
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def failure_text(exc: BaseException) -> str:
    """`✗ ValueError: <scrubbed message>`, or the type alone for an exception without one."""
    message = scrubbed(str(exc))
    return f"✗ {type(exc).__name__}" + (f": {message}" if message else "")


def tool_errors_hook(
    function_name: str, function_call: Callable[..., Any], arguments: dict[str, Any]
) -> Any:
    """agno's tool hook: runs the call; an exception it raises is logged in full and reaches the
    model as `ToolFailed` (its type and scrubbed message). agno's own control exceptions (a
    refusal, a stop, a cancelled run) pass through unchanged."""
    try:
        return function_call(**arguments)
    except (AgentRunException, RunCancelledException):
        raise
    except Exception as exc:
        log.exception("the tool %s raised", function_name)
        raise ToolFailed(failure_text(exc)) from None
