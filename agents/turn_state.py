"""One attempt at a turn, as the agent's tools and tool hooks see it: `TurnState`.

Made when an attempt starts (`RollbackAgent.attempt`, entered by agents.turn.pipeline, whose
`TurnRun` holds it) and dropped when it ends; meanwhile the agent links it as
`agent.turn_state`, so its tools (bound methods agno calls) and its tool hooks
(agents.approval_gate, agents.tool_deadline) find it.
Everything one turn used to leave on the agent is here: the Turn its file tools write in the
name of and where its user message sits (the checkpoints the model asks for mark it), the MCP
servers' tools it was offered (with their sessions, effects, approvals and deadlines), its
session state (with the rollback the model asked for), the calls that waited for approval, were
refused or given up on. The agent keeps only what lasts across turns: its session, its branch,
its configuration, its tools and its agno agent. A second turn of the same agent starts from a
new state: nothing of the first's is there to reset.

It also says what a pause saves (`pause`: the turn's row keeps it, sessions_app.approvals
`turn_await_approval`) and what a continuation resumes from (`resumed`, read back by
`RollbackAgent.attempt` and `RunCalls.of`).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, cast

from sessions_app.approvals import Pending, args_digest, result_key, tool_call_key
from sessions_app.turns.paused import calls_of, parsed_args

if TYPE_CHECKING:
    from sessions_app.models import Turn

    from .mcp.toolset import McpToolset

# The rollback the model asked for, in the run's session state (the seed's keys): never stored
# with the branch's state, never left for the next turn.
ROLLBACK_KEYS = ("rollback_requested", "rollback_checkpoint_id")


def without_request(state: dict[str, Any] | None) -> dict[str, Any]:
    """A session state without the rollback request: what a branch stores, and what a turn
    starts from."""
    return {k: v for k, v in (state or {}).items() if k not in ROLLBACK_KEYS}


class Hold(Protocol):
    """The attempt's hold on its turn (agents.turn.claim.Heartbeat): `lost` once the turn is no
    longer this worker's (then the run stops early), `cancelled` when a Stop took it."""

    lost: bool
    cancelled: bool

    def check_cancelled(self) -> None: ...


@dataclass(frozen=True)
class Announced:
    """A call the stream saw start: its id and the model's own arguments."""

    call_id: str
    args: dict[str, Any]


@dataclass
class RunCalls:
    """The calls of one agno run of the attempt, as the approval gate follows them (a request
    fitted again after the window overflowed is a new run, with new ones): those the stream
    announced and the gate has not taken yet, the results of those that ran, and, in a
    continuation, the saved results of the batch it replays and the call that was answered."""

    announced: dict[str, list[Announced]] = field(default_factory=dict)
    # This run's calls that ran, by `result_key`: [result, error], or [result, error, images]
    # for an MCP result with images (agents.approval_gate; saved when the turn pauses).
    results: dict[str, list[Any]] = field(default_factory=dict)
    # A continuation's saved results of the batch it replays, by `result_key`.
    replayed: dict[str, list[Any]] = field(default_factory=dict)
    resuming: Pending | None = None  # the call the owner answered
    started: str | None = None  # an approved call a continuation began to run ("<attempt>:<n>")
    # The replayed calls whose start (and, with a saved result, whose end) the attempt that
    # paused already announced: a continuation does not announce them again.
    told_started: set[str] = field(default_factory=set)
    told_finished: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, resumed: dict[str, Any] | None) -> RunCalls:
        """A run's calls: none yet, and what a continuation's saved state says of its batch."""
        if resumed is None:
            return cls()
        results = resumed.get("results")
        pending = resumed.get("pending")
        started = resumed.get("started")
        return cls(
            replayed={k: v for k, v in (results or {}).items() if isinstance(v, list)},
            resuming=cast("Pending", pending) if isinstance(pending, dict) else None,
            started=started if isinstance(started, str) else None,
        )

    def announce(self, tool_name: str | None, call_id: str | None, args: object = None) -> None:
        """The stream saw ToolCallStarted for this call: its tool runs next, on this thread."""
        if tool_name and call_id:
            given = dict(args) if isinstance(args, dict) else {}
            self.announced.setdefault(tool_name, []).append(Announced(call_id, given))
            key = result_key(call_id, given)
            resuming = self.resuming
            if key in self.replayed:  # it ran before the pause: its start and end were told
                self.told_started.add(key)
                self.told_finished.add(key)
            elif (
                resuming is not None
                and (resuming["tool_call_id"], resuming["tool_name"]) == (call_id, tool_name)
                and resuming["args_sha256"] == args_digest(given)
            ):
                self.told_started.add(key)  # the call that waited: its start was told

    def already_told(self, call_id: str | None, args: object, *, finished: bool) -> bool:
        """Whether the attempt that paused already sent this event of a replayed call
        (`tool.started`, or with `finished` `tool.finished`): once is what the pages and the
        API's clients hear of each call. Each answers once (ids repeat)."""
        if not call_id:
            return False
        told = self.told_finished if finished else self.told_started
        key = result_key(call_id, dict(args) if isinstance(args, dict) else {})
        if key not in told:
            return False
        told.discard(key)
        return True

    def take(self, tool_name: str, arguments: dict[str, Any]) -> Announced:
        """The call agno runs now: the first announced of this tool."""
        waiting = self.announced.get(tool_name)
        if waiting:
            return waiting.pop(0)
        # Not announced (a run whose events were not streamed): the call still waits, under an
        # id of its own the owner answers to.
        return Announced(f"approval_{uuid.uuid4().hex[:16]}", model_args(arguments))


@dataclass
class TurnState:
    """One attempt at `turn`: what its tools and hooks read and write (module docstring)."""

    turn: Turn
    hold: Hold
    # The MCP servers' tools offered to this attempt, and their sessions (agents.mcp.toolset).
    mcp: McpToolset
    # The run's session state: the branch's (or, in a continuation, the one its pause saved),
    # which the plan tools change and the rollback tool adds its request to. The agent's
    # `session_state` is this dict while the turn runs and after it.
    session_state: dict[str, Any]
    # The agent's tools and the MCP ones, together: each one's effect (`none`, `workspace`,
    # `external`), those whose calls wait for the owner's approval, and each one's own deadline
    # in seconds (agents.tool_deadline: AGENT_TOOL_TIMEOUT_SECONDS for the others).
    tool_effects: dict[str, str]
    tool_approvals: set[str]
    tool_timeouts: dict[str, float]
    # A continuation: the state its turn saved when it paused (sessions_app.turns.paused.
    # paused_state), or None for an attempt run from the user's message.
    resumed: dict[str, Any] | None = None
    # How many of this turn's calls have waited for approval: each is named by its place
    # (agents.approval_gate), so calls whose ids repeat are never taken for one another.
    approval_calls: int = 0
    # The calls the gate refused (the owner refused, or no answer came in time), by id and the
    # hash of their arguments (ids repeat): they did not run, so their tool messages record no
    # effect (agents.turn.store).
    refused: set[tuple[str, str]] = field(default_factory=set)
    # The calls given up on after they started (past their deadline, or no answer came), by tool
    # and the hash of their arguments: their tool messages say they may have run.
    given_up: set[tuple[str, str]] = field(default_factory=set)
    # A call paused this attempt: its state is on the turn's row, and its run ends here.
    paused: bool = False
    calls: RunCalls = field(default_factory=RunCalls)
    # The images of the turn's MCP results (as a tool message stores them), by `result_key`:
    # the calls this attempt ran or replayed (agents.approval_gate), and, in a continuation,
    # those of the earlier batches its pause saved. What a pause saves, and what a Stop keeps,
    # holds them with their results (a model that sees images is given them again).
    tool_images: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for m in (self.resumed or {}).get("messages") or []:
            images = m.get("images") if isinstance(m, dict) else None
            if isinstance(images, list) and images:
                self.tool_images[
                    result_key(str(m.get("tool_call_id") or ""), parsed_args(m.get("tool_args")))
                ] = images

    def note_images(self, call_id: str, args: object, images: list[dict[str, Any]]) -> None:
        if images:
            self.tool_images[result_key(call_id, parsed_args(args))] = images

    def images_of(self, call_id: str, args: object) -> list[dict[str, Any]]:
        return self.tool_images.get(result_key(call_id, parsed_args(args)), [])

    @property
    def position(self) -> int | None:
        """Where the turn's user message sits: checkpoints the model asks for mark the
        conversation as it stood when the user asked."""
        return self.turn.user_message_position

    @property
    def notices(self) -> list[str]:
        """For the turn's metadata: an MCP server that was down or left out."""
        return self.mcp.notices

    def new_run(self) -> RunCalls:
        """An agno run of this attempt begins: its calls, and (a continuation) the saved batch
        it replays; the turn's calls that waited keep their numbers across continuations."""
        self.calls = RunCalls.of(self.resumed)
        if self.calls.resuming is not None:
            self.approval_calls = max(self.approval_calls, int(self.calls.resuming["call"]))
        return self.calls

    def was_refused(self, call_id: str, args: object) -> bool:
        return (call_id, args_digest(args if args is not None else {})) in self.refused

    def may_have_run(self, tool: str, args: object) -> bool:
        """Whether a call of this tool and arguments was given up on after it started."""
        return (tool, args_digest(args if args is not None else {})) in self.given_up

    def persistent_state(self) -> dict[str, Any]:
        """The session state to store on the branch: without the rollback request."""
        return without_request(self.session_state)

    def pause(self, run_context: Any) -> dict[str, Any]:
        """What a pause saves of this attempt (`metadata.paused`, with the call that waits):
        from agno's live messages (the hook's run context) the turn's new messages before the
        batch and the batch's assistant message, the results of the batch's calls that ran,
        each tool's effect, the calls refused and given up on so far (so a Stop of the paused
        turn stores its calls as they are, with no agent at hand: sessions_app.turns.paused,
        and its continuation stores them as this attempt would have), and the session state,
        which the continuation starts from."""
        messages = list(getattr(run_context, "messages", None) or [])
        new = [
            m
            for m in messages
            if m.role not in ("system", "developer")
            and m.add_to_agent_memory
            and not m.from_history
        ]
        if new and new[0].role == "user":
            new = new[1:]  # the turn's own message, stored when it started
        assistant = new.pop() if new and new[-1].role == "assistant" else None
        tool_calls = assistant.tool_calls if assistant is not None else None
        batch = [c for c in (tool_calls or []) if isinstance(c, dict)]
        keys = {tool_call_key(c) for c in batch}
        saved: dict[str, Any] = {
            "messages": [self._with_images(message_dict(m)) for m in new],
            "assistant": {"content": _text(assistant.content), "tool_calls": batch}
            if assistant
            else None,
            "results": {k: v for k, v in self.calls.results.items() if k in keys},
            "effects": dict(self.tool_effects),
            "refused": _listed(self.refused),
            "given_up": _listed(self.given_up),
        }
        if _is_json(self.session_state):
            saved["session_state"] = self.session_state
        return saved

    def _with_images(self, saved: dict[str, Any]) -> dict[str, Any]:
        """A saved tool message with its result's images (agno took them off the message)."""
        if saved["role"] == "tool":
            images = self.images_of(str(saved["tool_call_id"] or ""), saved["tool_args"])
            if images:
                saved["images"] = images
        return saved


def saved_calls(resumed: dict[str, Any] | None, key: str) -> set[tuple[str, str]]:
    """The calls a continuation's pause saved under `key` (`refused`, `given_up`): the turn's
    calls refused or given up on by its earlier attempts, as (id or tool, argument hash)."""
    return calls_of((resumed or {}).get(key))


def starting_state(resumed: dict[str, Any] | None, held: dict[str, Any] | None) -> dict[str, Any]:
    """The session state an attempt starts from, a new dict: in a continuation, the one its
    pause saved (a rollback the model asked for before the pause included: the turn is the
    same); else the one the agent holds, without a rollback request (the last turn's request
    stays with the last turn). A pause saved before the state was part of it has none."""
    saved = (resumed or {}).get("session_state")
    return dict(saved) if isinstance(saved, dict) else without_request(held)


def message_dict(m: Any) -> dict[str, Any]:
    return {
        "role": m.role,
        "content": _text(m.content),
        "tool_calls": m.tool_calls,
        "tool_call_id": m.tool_call_id,
        "tool_name": m.tool_name,
        "tool_args": m.tool_args,
        "tool_call_error": m.tool_call_error,
    }


def model_args(arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments agno passes a tool, less what it injects (the agent, the run context)."""
    return {
        k: v
        for k, v in arguments.items()
        if isinstance(v, str | int | float | bool | list | dict | type(None))
    }


def _listed(calls: set[tuple[str, str]]) -> list[list[str]]:
    return sorted([first, digest] for first, digest in calls)


def _text(content: Any) -> str | None:
    return content if content is None or isinstance(content, str) else str(content)


def _is_json(value: object) -> bool:
    """Whether the row can keep it (a custom tool may put anything in the session state; the
    branch refuses such a state when the turn stores it, and the pause leaves it out)."""
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True
