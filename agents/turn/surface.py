"""What a turn uses, as Protocols: `AgnoAgent`, the part of agno's `Agent` that `RollbackAgent`
owns and the pipeline streams (agno's `Agent` satisfies it: mypy checks that where the agent is
built; nothing else of agno's surface is relied on), and `TurnAgent`, the part of
`RollbackAgent` the steps use. The pipeline names no class of agents.rollback_agent, which
imports the pipeline (`RollbackAgent.run`): the dependency goes one way."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Literal, Protocol

from agno.models.base import Model
from agno.models.message import Message as AgnoMessage
from agno.run.agent import RunOutput, RunOutputEvent

if TYPE_CHECKING:
    from agents.mcp.toolset import McpToolset
    from checkpoints.models import Checkpoint
    from core.events import Event
    from sessions_app.models import Branch, Session, Turn

# One item of a streamed run: an event (RunContent, ToolCallStarted, ToolCallCompleted,
# RunError, ...) and, last, the run's RunOutput (`yield_run_output=True`).
RunItem = RunOutputEvent | RunOutput


class AgnoAgent(Protocol):
    """An agno agent as the turn runs it: its model, the state its tools write (the rollback
    request), the context the turn adds to its instructions, and one streamed run."""

    name: str | None
    model: Model | None
    session_state: dict[str, Any] | None
    additional_context: str | None
    tools: Any  # a list; its MCP tools are replaced at the start of each turn

    def run(
        self,
        input: list[AgnoMessage],
        *,
        stream: Literal[True],
        stream_events: bool,
        yield_run_output: bool,
    ) -> Iterator[RunItem]: ...


class Gate(Protocol):
    """Where the agent's calls that need approval wait (agents.approval_gate.ApprovalGate): told the
    run they belong to, the state a continuation resumes from, and each call's id as the stream
    sees it start; `paused` once a call paused the turn."""

    paused: bool

    def resume(self, state: dict[str, Any] | None) -> None: ...

    # The run is a TurnRun (agents.turn.common, which imports this module: named by Any here).
    def begin(self, run: Any) -> None: ...

    def announce(self, tool_name: str | None, call_id: str | None, args: object = None) -> None: ...

    # Whether the attempt that paused already sent this event of a call a continuation replays.
    def already_told(self, call_id: str | None, args: object, *, finished: bool) -> bool: ...

    # Whether it refused the call of this id and arguments (the owner refused, or no answer came
    # in time): it did not run, so its tool message records no effect.
    def was_refused(self, call_id: str, args: object) -> bool: ...


class Deadlines(Protocol):
    """The agent's tool deadlines (agents.tool_deadline.ToolDeadlines), as the store step asks
    them."""

    # Whether a call of this tool and arguments was given up on after it started (its deadline
    # passed): its tool message, and its ledger entry, say it may have run.
    def may_have_run(self, tool: str, args: object) -> bool: ...


class TurnAgent(Protocol):
    """The agent a turn runs (`agents.rollback_agent.RollbackAgent`), as the steps use it: its
    session and branch, its settings, the run's stream, the state its tools wrote and the
    rollback the model asked for."""

    external_session: Session
    internal_session: Branch
    auto_checkpoint: bool
    carry_out_rollbacks: bool
    checkpoint_tools: frozenset[str]
    builtin_tools: set[str]  # they refuse with a result (agents.tools.REFUSED)
    tool_effects: dict[str, str]
    running_turn: Turn | None
    created_checkpoints: list[Checkpoint]
    last_turn: Turn | None
    last_rollback: Checkpoint | None
    turn_position: int | None
    on_event: Callable[[Event], None] | None
    # The Python API's answer to a call that needs approval (its `pending_approval` in, True
    # approves), or None: the turn is left awaiting approval (agents.turn.pipeline.run_message).
    approver: Callable[[Any], bool] | None
    notices: list[str]  # for the turn's metadata: an MCP server that was down
    mcp: McpToolset  # the MCP servers' tools offered this turn (offer_mcp_tools)

    @property
    def approvals(self) -> Gate: ...

    @property
    def deadlines(self) -> Deadlines: ...

    @property
    def model(self) -> Model | None: ...

    @property
    def additional_context(self) -> str | None: ...

    @additional_context.setter
    def additional_context(self, value: str | None) -> None: ...

    @property
    def requested_rollback(self) -> int | None: ...

    def stream(self, messages: list[AgnoMessage]) -> Iterator[RunItem]: ...

    def refresh_branch(self) -> Branch: ...

    def persistent_state(self) -> dict[str, Any]: ...

    def clear_rollback_request(self) -> None: ...

    def carry_out_rollback(self) -> bool: ...

    def memory_note(self, message: str, *, budget: int) -> str | None: ...

    def offer_mcp_tools(self) -> None: ...

    def close_mcp_sessions(self) -> None: ...
