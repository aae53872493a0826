"""A tool that acts outside and waits for its owner's approval, for the approval tests
(AGENT_TOOLS = ["tests.agents.approval_tools.send_email"])."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from agents.tools import tool_effect

SENT: list[tuple[str, str]] = []
# Called while send_email runs (after it sent): a test's way to act mid-call.
DURING: list[Callable[[], None]] = []


@tool_effect("external", approval=True)
def send_email(to: str, subject: str) -> str:
    """Send an email to someone."""
    SENT.append((to, subject))
    for act in DURING:
        act()
    return f"sent to {to}"


@tool_effect("external", approval=True)
def slow_send_email(to: str, subject: str) -> str:
    """Send an email to someone (slowly): for the served tests, which kill its worker mid-call.
    Each run adds a line to the file APPROVAL_TOOL_LOG names, then takes a minute."""
    with Path(os.environ["APPROVAL_TOOL_LOG"]).open("a") as log:
        log.write(f"{to} {subject}\n")
    time.sleep(60)
    return f"sent to {to}"


def pause(turn, tool_call_id: str, args: dict, *, tool_name: str = "send_email", call: int = 1):
    """Pause a claimed turn on a call, as its worker's gate does (agents.approval_gate): True when
    it paused."""
    from sessions_app.approvals import pending_call, turn_await_approval

    pending = pending_call(
        turn=turn, call=call, tool_call_id=tool_call_id, tool_name=tool_name, args=args
    )
    # The state a worker's pause saves (agents.turn_state.TurnState.pause): the batch that holds
    # the call, nothing of it run yet (and no session state: the agent's is resumed).
    batch = {
        "content": "",
        "tool_calls": [
            {
                "id": tool_call_id,
                "type": "function",
                "function": {"name": tool_name, "arguments": json.dumps(args)},
            }
        ],
    }
    state = {"messages": [], "assistant": batch, "results": {}}
    return turn_await_approval(turn=turn, pending=pending, paused=state)


NOTED: list[str] = []


@tool_effect("external")
def note_outside(text: str) -> str:
    """Write a note somewhere outside (needs no approval)."""
    NOTED.append(text)
    return f"noted {text}"


@tool_effect("external", approval=True)
def logged_send_email(to: str, subject: str) -> str:
    """Send an email to someone (for the served tests: each run adds a line to the file
    APPROVAL_TOOL_LOG names, so a test counts the runs across processes)."""
    with Path(os.environ["APPROVAL_TOOL_LOG"]).open("a") as log:
        log.write(f"{to} {subject}\n")
    return f"sent to {to}"
