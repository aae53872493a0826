"""What a turn uses, as Protocols: `AgnoAgent`, the part of agno's `Agent` that `RollbackAgent`
owns and the pipeline streams (agno's `Agent` satisfies it: mypy checks that where the agent is
built; nothing else of agno's surface is relied on), and `TurnAgent`, the part of
`RollbackAgent` the steps use. The pipeline names no class of agents.rollback_agent, which
imports the pipeline (`RollbackAgent.run`): the dependency goes one way."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Literal, Protocol

from agno.models.base import Model
from agno.models.message import Message as AgnoMessage
from agno.run.agent import RunOutput, RunOutputEvent

if TYPE_CHECKING:
    from checkpoints.models import Checkpoint
    from core.events import Event
    from sessions_app.models import Branch, Session, Turn

    from ..turn_state import Hold, TurnState

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
    tools: Any  # the agent's tools, and the running turn's MCP tools (a callable: agno asks)

    def run(
        self,
        input: list[AgnoMessage],
        *,
        stream: Literal[True],
        stream_events: bool,
        yield_run_output: bool,
    ) -> Iterator[RunItem]: ...


class TurnAgent(Protocol):
    """The agent a turn runs (`agents.rollback_agent.RollbackAgent`), as the steps use it: what
    lasts across its turns (its session and branch, its settings and tools, the run's stream,
    the outcome of its last turn and rollback) and the attempt it opens for each turn
    (`attempt`: the attempt's state, agents.turn_state, which its tools and hooks read)."""

    external_session: Session
    internal_session: Branch
    auto_checkpoint: bool
    carry_out_rollbacks: bool
    checkpoint_tools: frozenset[str]
    builtin_tools: set[str]  # they refuse with a result (agents.tools.REFUSED)
    last_turn: Turn | None
    last_rollback: Checkpoint | None
    # The Python API's callbacks when its call gives none (agents.turn.pipeline.run_message): a
    # listener of the session's events, and the answer to a call that needs approval (its
    # `pending_approval` in, True approves; None leaves the turn awaiting approval).
    on_event: Callable[[Event], None] | None
    approver: Callable[[Any], bool] | None

    @property
    def model(self) -> Model | None: ...

    @property
    def additional_context(self) -> str | None: ...

    @additional_context.setter
    def additional_context(self, value: str | None) -> None: ...

    @property
    def requested_rollback(self) -> int | None: ...

    def attempt(self, turn: Turn, *, hold: Hold) -> AbstractContextManager[TurnState]: ...

    def stream(self, messages: list[AgnoMessage]) -> Iterator[RunItem]: ...

    def refresh_branch(self) -> Branch: ...

    def branch_for(self, turn: Turn) -> Branch: ...

    def owner_instructions(self, turn: Turn) -> str | None: ...

    def carry_out_rollback(self) -> bool: ...

    def memory_note(self, message: str, *, budget: int) -> str | None: ...

    def close_mcp_sessions(self) -> None: ...
