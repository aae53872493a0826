"""Tools for the AGENT_TOOLS tests, named by their dotted paths (tests.agents.custom_tools.*)."""

from __future__ import annotations

import threading

from agents.tools import tool_effect

CALLS: list[str] = []


def calculate(expression: str) -> str:
    """Calculate mathematical expression."""
    CALLS.append(expression)
    return f"custom says {expression}"


def shout(text: str) -> str:
    """Say the text louder."""
    return text.upper()


NOT_A_TOOL = 42


# Custom tools with declared effects (agents.tools.tool_effect), for the effect tests.
SENT: list[str] = []


def send_message(to: str, text: str) -> str:
    """Send a message to someone outside (declares nothing: its effect is external)."""
    SENT.append(f"{to}: {text}")
    return f"sent to {to}"


@tool_effect("none")
def lookup_order(order_id: str) -> str:
    """Look an order up (only reads)."""
    return f"order {order_id}: shipped"


def file_ticket(title: str) -> str:
    """File a ticket with an outside tracker (declares nothing: external); this one fails."""
    raise RuntimeError("the tracker refused the ticket")


def log_in(service: str) -> str:
    """Log in to a service (raises, quoting its connection string: a secret)."""
    raise RuntimeError(
        f"could not log in to {service} at postgres://admin:hunter2@db.internal/prod "
        "with api_key=sk-live-4f9a8b7c6d5e4f3a2b1c"
    )


# Slow tools, for the tests that Stop a turn while a tool runs (tests/agents/test_stopped_turns).
# What lets the slow tools below finish: a test sets it once the turn has given up on them (a
# Stop), so "the Stop came while the tool ran" holds however slow the machine is.
RELEASE = threading.Event()


def slow_send(to: str, text: str) -> str:
    """Send a message outside, slowly (external): a Stop comes while it runs."""
    RELEASE.wait(30)
    SENT.append(f"{to}: {text}")
    return f"sent to {to}"


def slow_fail(title: str) -> str:
    """File a ticket outside, slowly, and fail (external): a Stop comes while it runs."""
    RELEASE.wait(30)
    raise RuntimeError("the tracker refused the ticket")
