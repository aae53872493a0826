"""The part of agno a turn uses, as a Protocol: what `RollbackAgent` owns and the pipeline
streams. agno's `Agent` satisfies it (mypy checks that where the agent is built); nothing else
of agno's surface is relied on by the turn."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal, Protocol

from agno.models.base import Model
from agno.models.message import Message as AgnoMessage
from agno.run.agent import RunOutput, RunOutputEvent

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

    def run(
        self,
        input: list[AgnoMessage],
        *,
        stream: Literal[True],
        stream_events: bool,
        yield_run_output: bool,
    ) -> Iterator[RunItem]: ...
