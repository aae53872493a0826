"""Tools for the AGENT_TOOLS tests, named by their dotted paths (tests.agents.custom_tools.*)."""

from __future__ import annotations

CALLS: list[str] = []


def calculate(expression: str) -> str:
    """Calculate mathematical expression."""
    CALLS.append(expression)
    return f"custom says {expression}"


def shout(text: str) -> str:
    """Say the text louder."""
    return text.upper()


NOT_A_TOOL = 42
