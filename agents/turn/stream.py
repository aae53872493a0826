"""Step 3, stream: run the agent and relay what the model says as it says it.

Every model event reaches the browser through `relay` (text into the turn's reply stream, which
numbers, coalesces, stores and publishes it as `message.delta`: sessions_app.reply_stream; tool
calls as `tool.started` / `tool.finished`, after the text before them has gone out); the store
step's late additions (the cut-off note, tools agno refused to run) go out through the same
helpers here. The run stops early, closing the model's stream, when the turn was cancelled or
taken from this worker.
"""

from __future__ import annotations

import gc
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from agno.models.message import Message as AgnoMessage
from agno.models.response import ToolExecution
from agno.run.agent import (
    RunContentEvent,
    RunErrorEvent,
    RunOutput,
    ToolCallCompletedEvent,
    ToolCallStartedEvent,
)
from agno.run.base import RunStatus

from core import events
from core.db import release_connection
from sessions_app.models import Turn
from sessions_app.reply_stream import ReplyStream
from sessions_app.turns import UnstoredCall

from .common import TurnRun
from .surface import RunItem

log = logging.getLogger("agents.turn.stream")


@dataclass
class Streamed:
    """What a run relayed: its output, its error, and the reply's text streamed so far."""

    partial: ReplyStream | None  # the reply so far: stored, numbered and published
    output: RunOutput | None = None
    error: str | None = None
    text: list[str] = field(default_factory=list)
    started: set[str] = field(default_factory=set)  # the tool calls whose start was relayed
    # Every call the stream saw, by id: its tool, arguments and (once it answered) its result
    # and whether it failed; what the ledger keeps of a turn that stores no messages.
    calls: dict[str, UnstoredCall] = field(default_factory=dict)
    # When the run's first request to the model went out, and when the reply's first text
    # arrived (time.monotonic()).
    sent_at: float = field(default_factory=time.monotonic)
    first_at: float | None = None

    @property
    def failure(self) -> str | None:
        """The run's error, or the error text of an output agno marked failed."""
        if self.error:
            return self.error
        if self.output is None or self.output.status != RunStatus.error:
            return None
        return None if self.output.content is None else str(self.output.content)


def stream(run: TurnRun, messages: list[AgnoMessage]) -> Streamed:
    """Run the agent on `messages`; whatever the run raises becomes its error."""
    got = Streamed(partial=run.partial)
    try:
        _run(run, messages, got)
    except Exception as exc:
        log.exception("turn %s failed", run.turn.pk)
        got.output, got.error = None, f"{type(exc).__name__}: {exc}"
    return got


def _run(run: TurnRun, messages: list[AgnoMessage], got: Streamed) -> None:
    release_connection()  # the model may take seconds: the stream needs no database
    state = run.state
    # This run's calls, as the approval gate follows them (a continuation: the batch it replays).
    calls = state.new_run()
    items = run.agent.stream(messages)
    try:
        for item in items:
            run.beat.tick()
            if state.paused:
                # A call waits for approval: the turn's state is saved and agno's run is closed
                # here, before anything else of its batch runs (agents.approval_gate).
                return
            if run.beat.lost:
                note_finished(item, got)  # a call that answered as the turn stopped: it ran
                got.output = got.error = None
                return
            told = False
            if isinstance(item, ToolCallStartedEvent) and item.tool is not None:
                # Its tool runs next, on this thread: the gate learns which call it is.
                calls.announce(item.tool.tool_name, item.tool.tool_call_id, item.tool.tool_args)
            if isinstance(item, ToolCallStartedEvent | ToolCallCompletedEvent) and item.tool:
                # A continuation replays the batch that paused: what of it was told is not again.
                finished = isinstance(item, ToolCallCompletedEvent)
                tool = item.tool
                told = calls.already_told(tool.tool_call_id, tool.tool_args, finished=finished)
            relay(run.turn, item, got, told=told)
    finally:
        if got.partial is not None:
            got.partial.flush()  # all of the text goes out before the turn's end
        close = getattr(items, "close", None)  # a generator: ends agno's run
        if close is not None:
            close()
        if run.beat.lost:
            # The model's HTTP response is closed only when openai's Stream is finalised, and it
            # sits in a reference cycle (the Stream and its own generator): collect it now, so
            # the request to the model ends at once instead of at some later collection.
            gc.collect()


def relay(turn: Turn, item: RunItem, got: Streamed, *, told: bool = False) -> None:
    """One item of agno's stream: noted in `got`, and sent on to the browser (a tool event
    unless the attempt that paused already sent it: `told`)."""
    if isinstance(item, RunOutput):
        got.output = item
    elif isinstance(item, RunContentEvent):
        if isinstance(item.content, str) and item.content:
            if got.first_at is None:
                got.first_at = time.monotonic()
            got.text.append(item.content)
            send_delta(got, item.content)
    elif isinstance(item, ToolCallStartedEvent) and item.tool is not None:
        got.started.add(item.tool.tool_call_id or "")
        got.calls[_started_key(got, item.tool)] = UnstoredCall(
            item.tool.tool_name or "",
            item.tool.tool_args,
            None,
            call_id=item.tool.tool_call_id or "",
        )
        flush(got)  # the text before the tool goes out before it
        if not told:
            send_tool_started(
                turn, item.tool.tool_name or "", item.tool.tool_args, item.tool.tool_call_id
            )
    elif isinstance(item, ToolCallCompletedEvent) and item.tool is not None:
        flush(got)
        release_connection()  # a tool that used the database is done with it
        tool = item.tool
        note_finished(item, got)
        if not told:
            send_tool_finished(
                turn,
                tool.tool_name or "",
                tool.tool_call_id,
                tool.result,
                bool(tool.tool_call_error),
            )
    elif isinstance(item, RunErrorEvent):
        got.error = item.content or "the model call failed"


def note_finished(item: RunItem, got: Streamed) -> None:
    """A call's answer, noted in `got.calls` (on the first of its key still open: model servers
    repeat ids, so each start of a repeated id is a call of its own)."""
    if not isinstance(item, ToolCallCompletedEvent) or item.tool is None:
        return
    tool = item.tool
    key = _call_key(tool)
    keys = [key, *(f"{key}#{n}" for n in range(2, len(got.calls) + 2))]
    key = next((k for k in keys if k in got.calls and got.calls[k].result is None), key)
    got.calls[key] = UnstoredCall(
        tool.tool_name or "",
        tool.tool_args,
        str(tool.result or ""),
        bool(tool.tool_call_error),
        call_id=tool.tool_call_id or "",
    )


def _started_key(got: Streamed, tool: ToolExecution) -> str:
    """A new call's key in `got.calls`: its id, or `id#2`, `id#3`... when the id was seen."""
    key, n = _call_key(tool), 1
    found = key
    while found in got.calls:
        n += 1
        found = f"{key}#{n}"
    return found


def _call_key(tool: ToolExecution) -> str:
    """A call's id, or (from a server that sends none) its tool and arguments: the same for its
    start and its end, so an answered call is never also kept as one that never answered."""
    if tool.tool_call_id:
        return tool.tool_call_id
    return f"{tool.tool_name}:{json.dumps(tool.tool_args, sort_keys=True, default=str)}"


def send_delta(got: Streamed, text: str) -> None:
    """Text of the reply, into the turn's reply stream: stored (for a reload or a socket that
    connects late), numbered and sent as a `message.delta`, a few pieces per 50 ms at most."""
    if got.partial is not None:
        got.partial.add(text)


def flush(got: Streamed) -> None:
    """Send the text buffered in the reply stream now (before a tool event, at the end)."""
    if got.partial is not None:
        got.partial.flush()


def send_tool_started(turn: Turn, tool: str, args: Any, call_id: str | None) -> None:
    events.tool_started(
        session=turn.session_id, turn=turn.pk, tool=tool, args=args, call_id=call_id
    )


def send_tool_finished(
    turn: Turn, tool: str, call_id: str | None, result: Any, error: bool
) -> None:
    events.tool_finished(
        session=turn.session_id,
        turn=turn.pk,
        tool=tool,
        call_id=call_id,
        result=result,
        error=error,
    )
