"""A tool that acts outside and waits for its owner's approval, for the approval tests
(AGENT_TOOLS = ["tests.agents.approval_tools.send_email"])."""

from __future__ import annotations

from agents.tools import tool_effect

SENT: list[tuple[str, str]] = []


@tool_effect("external", approval=True)
def send_email(to: str, subject: str) -> str:
    """Send an email to someone."""
    SENT.append((to, subject))
    return f"sent to {to}"
