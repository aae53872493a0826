"""Every tool call has a deadline, and Stop stops it (issue 36).

A custom tool (seed 003's `RollbackAgent(tools=[...])`, AGENT_TOOLS) or an MCP tool runs on the
process's tool executor (`rollback-tool`), not on the turn's thread; the turn's thread waits for
the first of: its result, its deadline, or the turn's end (a Stop, a take-over).
- The deadline: the tool's own (`tool_effect(..., timeout=...)`, or the MCP server's, which the
  MCP toolset gives the turn's `tool_timeouts`), else AGENT_TOOL_TIMEOUT_SECONDS. Past
  it the call gives the model a `✗ Timeout` result, marked as an error (not among `tools_used`,
  no automatic checkpoint), its tool message is marked `may_have_run` (the effects ledger says
  so for an external call), and the turn goes on.
- A Stop: this process's ring of the turn's doorbell (core.wake: the embedded mode, where the
  cancel and the turn share the process) wakes the wait at once; a cancel from another process
  is read from the turn's row every TURN_STOP_POLL_SECONDS, the bound of a Stop during a model
  stream too. The run then ends as cancelled (agno's RunCancelledException), so the model is not
  asked again; the call, never answered, goes to the ledger as `may_have_run`
  (agents.turn.settle.record_unstored), where the next turn's restore and the model read it.
A Python thread cannot be interrupted: a call given up on keeps its thread until it returns, and
is counted as abandoned meanwhile. A process keeps at most AGENT_TOOL_MAX_ABANDONED of them; at
that count a new call is refused at once with a `✗` result instead of taking another thread
(`/healthz` shows the count, this process's and every other's: ops.health,
agents.tool_reports). Never run again: nothing retries a call.

The built-in tools (files, plan, memory, checkpoints) stay on the turn's thread: they are our
own code, bounded by the database's own timeouts, and they need the turn's database connection
(a turn run inside the caller's transaction, as the Python API from a transaction and the tests
do, is visible only there). A call that runs on the executor closes its thread's database
connection when it ends.

A result that is not a string (a dict, a list, a number, None, bytes, an object) becomes text:
JSON where it can, at most RESULT_CHARS characters (agno would give the model Python's `repr`).
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import nullcontext
from functools import partial
from inspect import isgenerator
from typing import TYPE_CHECKING, Any, TypedDict

from agno.exceptions import RunCancelledException
from agno.tools.function import ToolResult
from django.conf import settings
from django.db import DatabaseError, connection

from core import logs, wake
from sessions_app.approvals import args_digest
from sessions_app.models import Turn
from sessions_app.turns import HELD

from .tool_errors import ToolFailed
from .tool_reports import Reporter

if TYPE_CHECKING:
    from .turn_state import TurnState

log = logging.getLogger("agents.tools")

THREAD_NAME = "rollback-tool"
# Threads for calls that run at once, besides the abandoned ones (a call that finds them all
# busy waits for one, within its deadline).
RUNNING_THREADS = 16
# The most characters of a non-string result given to the model.
RESULT_CHARS = 20_000

TIMED_OUT = (
    "✗ Timeout: {tool} did not answer within {seconds:g} s and was given up on; it may still "
    "have done its work. Do not call it again unless the user asks for it."
)
NOT_STARTED = (
    "✗ Not run: {tool} could not start within {seconds:g} s (every tool thread of this "
    "process was busy); it did not run."
)
TOO_MANY = (
    "✗ Not run: {count} earlier tool calls are still running in this process past their "
    "deadline or a Stop (the most AGENT_TOOL_MAX_ABANDONED allows), so {tool} was not started. "
    "Try again later."
)
STOPPED = "The turn was stopped while {tool} ran; it was given up on and may still be running."

# The events that end a wait for a call besides its result: the turn stopped.
WAKES = frozenset({"turn.cancelled"})


class ToolStats(TypedDict):
    """The process's tool calls given up on (`/healthz`'s `tools`)."""

    abandoned: int  # still running
    abandoned_total: int  # since the process started
    max_abandoned: int


class ToolExecutor:
    """At most `size` daemon threads, started as calls need them and kept for the next calls.
    Not concurrent.futures' ThreadPoolExecutor: its threads are joined when the interpreter
    exits, so one hung tool would keep a worker or a web server from ever stopping."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._queue: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0

    def submit(self, call: Callable[[], Any]) -> Future[Any]:
        future: Future[Any] = Future()
        with self._lock:
            self._queue.put((future, call))
            if self._idle == 0 and self._threads < self.size:
                self._threads += 1
                threading.Thread(target=self._work, name=THREAD_NAME, daemon=True).start()
            else:
                self._idle = max(0, self._idle - 1)  # that idle thread takes it
        return future

    def _work(self) -> None:
        while True:
            future, call = self._queue.get()
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(call())
                except BaseException as exc:
                    future.set_exception(exc)
            del future, call
            with self._lock:
                self._idle += 1


_lock = threading.Lock()
_pool: tuple[int, ToolExecutor] | None = None
_abandoned: set[Future[Any]] = set()
_abandoned_total = 0
# The count, told to /healthz through the cache for the processes that do not answer it.
_reporter = Reporter(lambda: len(_abandoned))


def _executor() -> ToolExecutor:
    """The process's tool executor (a forked child makes its own). Call with `_lock` held."""
    global _pool
    if _pool is None or _pool[0] != os.getpid():
        _pool = (os.getpid(), ToolExecutor(settings.AGENT_TOOL_MAX_ABANDONED + RUNNING_THREADS))
    return _pool[1]


def stats() -> ToolStats:
    with _lock:
        return {
            "abandoned": len(_abandoned),
            "abandoned_total": _abandoned_total,
            "max_abandoned": settings.AGENT_TOOL_MAX_ABANDONED,
        }


def _submit(tool: str, call: Callable[[], Any]) -> Future[Any]:
    """The call, started on the executor; ToolFailed at once when the process already holds
    AGENT_TOOL_MAX_ABANDONED calls given up on."""
    with _lock:
        count = len(_abandoned)
        if count >= settings.AGENT_TOOL_MAX_ABANDONED:
            log.warning("%s not started: %s tool calls are abandoned in this process", tool, count)
            raise ToolFailed(TOO_MANY.format(count=count, tool=tool))
        return _executor().submit(logs.in_this_context(partial(_run, call)))


def _run(call: Callable[[], Any]) -> Any:
    try:
        return call()
    finally:
        connection.close()  # this thread's, if the tool used the database


def _abandon(tool: str, future: Future[Any], why: str) -> None:
    """The turn gives up on the call: counted until its thread returns."""
    global _abandoned_total
    with _lock:
        _abandoned.add(future)
        _abandoned_total += 1
        count = len(_abandoned)
    log.warning("%s abandoned (%s); %s abandoned calls in this process", tool, why, count)
    future.add_done_callback(_released)
    _reporter.changed()


def _released(future: Future[Any]) -> None:
    with _lock:
        _abandoned.discard(future)
    _reporter.changed()


class ToolDeadlines:
    """One agent's deadlines: the tool names that run on the turn's thread (its built-ins),
    each of its own tools' timeout in seconds (`timeouts`, the agent's `tool_timeouts`: the
    custom tools' declared ones), and how to find the running attempt (`state_of`: the agent's
    `turn_state`), whose `tool_timeouts` add its MCP tools', whose turn's Stop ends a wait, and
    which keeps the calls given up on (their tool messages say `may_have_run`)."""

    def __init__(
        self,
        *,
        inline: set[str] | frozenset[str],
        timeouts: dict[str, float],
        state_of: Callable[[], TurnState | None],
    ) -> None:
        self.inline = inline
        self.timeouts = timeouts
        self.state_of = state_of

    def seconds(self, tool: str, state: TurnState | None = None) -> float:
        own = (state.tool_timeouts if state is not None else self.timeouts).get(tool)
        return float(own) if own else float(settings.AGENT_TOOL_TIMEOUT_SECONDS)

    def hook(
        self, function_name: str, function_call: Callable[..., Any], arguments: dict[str, Any]
    ) -> Any:
        """agno's tool hook (inside the approval gate and the error hook): a built-in runs
        here; any other tool on the executor, within its deadline (module docstring)."""
        if function_name in self.inline:
            return function_call(**arguments)
        state = self.state_of()
        seconds = self.seconds(function_name, state)
        future = _submit(function_name, partial(function_call, **arguments))
        turn = state.turn if state is not None else None
        try:
            self._wait(function_name, future, seconds, turn)
        except BaseException:
            if not future.cancelled():  # it started: whatever it does, it may have done
                _given_up(state, function_name, arguments)
            raise
        try:
            result = future.result()
        except Exception as exc:
            # A failure that says no answer came (agents.mcp: a lost connection, the server's
            # timeout): the call started, so it may have run.
            if getattr(exc, "may_have_run", False):
                _given_up(state, function_name, arguments)
            raise
        return as_text(result)

    def _wait(self, tool: str, future: Future[Any], seconds: float, turn: Turn | None) -> None:
        """Return once the call answered; raise when the deadline or the turn's end came
        first."""
        rung = threading.Event()
        future.add_done_callback(lambda _: rung.set())
        deadline = time.monotonic() + seconds
        poll = settings.TURN_STOP_POLL_SECONDS
        watch = wake.watching(turn.pk, WAKES, rung) if turn is not None else nullcontext(rung)
        with watch:
            while not future.done():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    if future.cancel():  # it never started: it did not run
                        raise ToolFailed(NOT_STARTED.format(tool=tool, seconds=seconds))
                    _abandon(tool, future, f"past its deadline of {seconds:g} s")
                    raise ToolFailed(TIMED_OUT.format(tool=tool, seconds=seconds))
                rung.wait(min(poll, remaining))
                rung.clear()
                if not future.done() and turn is not None and _ended(turn):
                    if not future.cancel():
                        _abandon(tool, future, f"turn {turn.pk} stopped")
                    raise RunCancelledException(STOPPED.format(tool=tool))


def _given_up(state: TurnState | None, tool: str, arguments: dict[str, Any]) -> None:
    """The call, on record in its attempt as one that may have run (outside a turn nothing
    stores its message)."""
    if state is not None:
        state.given_up.add((tool, args_digest(arguments)))


def _ended(turn: Turn) -> bool:
    """Whether the turn is no longer this attempt's (stopped, taken over, gone): one read."""
    try:
        held = Turn.objects.filter(pk=turn.pk, status__in=HELD, attempts=turn.attempts).exists()
    except DatabaseError:  # the database is away for a moment: look again next poll
        log.warning("turn %s: could not read whether it was stopped", turn.pk, exc_info=True)
        return False
    if connection.settings_dict.get("OPTIONS", {}).get("pool") and not connection.in_atomic_block:
        connection.close()  # a long wait holds no pooled connection
    return not held


def as_text(result: Any, limit: int = RESULT_CHARS) -> Any:
    """A tool's result as the model gets it: a string, agno's ToolResult or a generator as they
    are; anything else as JSON where it can (else its `repr`), at most `limit` characters."""
    if isinstance(result, str | ToolResult) or isgenerator(result) or isinstance(result, Iterator):
        return result
    if isinstance(result, bytes | bytearray):
        try:
            text = bytes(result).decode("utf-8")
        except UnicodeDecodeError:
            text = f"<{len(result)} bytes of binary data>"
    else:
        try:
            text = json.dumps(result, ensure_ascii=False, default=_jsonable)
        except (TypeError, ValueError):  # a cycle, a key JSON cannot hold
            text = _repr(result)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _jsonable(value: object) -> object:
    dump = getattr(value, "model_dump", None)  # a pydantic model
    if callable(dump):
        return dump(mode="json")
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return _repr(value)


def _repr(value: object) -> str:
    try:
        return repr(value)[:RESULT_CHARS]
    except Exception:
        return f"<{type(value).__name__}>"
