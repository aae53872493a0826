"""Step 2, fit: the branch's history up to the turn's user message, fitted into the model's
window (summarising what does not fit), as the messages agno sends.

The user's most relevant memories ride in the instructions (within MEMORY_PROMPT_CHARS) and
the fitting counts them. Fitted again, smaller, after the server refused the request as too
long (`retry`): that second chance is the pipeline's, shared with the stream step.
"""

from __future__ import annotations

from typing import Literal

from agno.models.message import Message as AgnoMessage
from django.conf import settings

from sessions_app.turns import continued_reply

from ..context import ContextTooSmall, SummaryFailed, fit_turn, left_behind_note
from ..history import CONTINUE_INSTRUCTION, alternate, continuation_request, to_agno
from ..mcp.vision import REPLAY_IMAGES, attached_images, sees_images
from ..model import ChatModel
from .claim import OWNER_HAS_MEMORIES, claim_may_find
from .common import TurnRun, fail_turn

# The fitting failed as too long for the window: fit again, smaller (or with the window the
# server stated), if the turn still has its second chance.
AGAIN: Literal["again"] = "again"


def memories_of(run: TurnRun) -> str | None:
    """The owner's custom instructions (agents.instructions, first: right after the built-in
    ones); the L0 lines of the user's memories most relevant to the message, as instructions;
    after a restore that left external effects behind, the note naming them
    (context.left_behind_note), so the model does not repeat them unasked. The fitting counts
    all of it (`extra_chars`)."""
    memories = claim_may_find(run.turn, OWNER_HAS_MEMORIES)
    notes = (
        run.agent.owner_instructions(run.turn),
        run.agent.memory_note(run.turn.message, budget=settings.MEMORY_PROMPT_CHARS)
        if memories
        else None,
        left_behind_note(run.agent.internal_session),
    )
    return "\n\n".join(note for note in notes if note) or None


def fit(
    run: TurnRun, memories: str | None, *, retry: bool
) -> list[AgnoMessage] | Literal["again"] | None:
    """The messages to send, AGAIN, or None when the turn ended here (failed, or no longer this
    worker's). Sets the agent's extra context (memories, the summary note) for the run."""
    agent, turn = run.agent, run.turn
    continues = continued_reply(turn) is not None
    # A continuation's history ends with the cut-off reply, at the turn's position.
    end = (turn.user_message_position or 0) + (1 if continues else 0)
    try:
        run.fit = fit_turn(
            session=agent.external_session,
            branch=agent.internal_session,
            end=end,
            message=CONTINUE_INSTRUCTION if continues else turn.message,
            model=run.label,
            stop=lambda: run.beat.lost,
            # The memories' note, and the MCP servers' tools offered this turn.
            extra_chars=len(memories or "") + run.state.mcp.schema_chars,
            retry=retry,
        )
    except ContextTooSmall as exc:
        fail_turn(turn, exc.message, {"model": run.label})
        return None
    except SummaryFailed as exc:
        if exc.overflow and not retry and not run.beat.lost:
            return AGAIN
        _summary_failed(run, exc)
        return None
    notes = [note for note in (memories, run.fit.context_note) if note]
    agent.additional_context = "\n\n".join(notes) or None
    if isinstance(agent.model, ChatModel):
        agent.model.begin_turn()
    # A tool's images reach a vision model only (agents.mcp.vision); the last few again.
    # (the agent's agno Agent sends the turn's own ones: RollbackAgent, send_media_to_model).
    sees = sees_images(agent.model)
    history = to_agno(run.fit.history, images=REPLAY_IMAGES if sees else 0)
    if continues:
        return alternate(continuation_request(history))
    # The images the composer attached go with the message to a model that sees them.
    attached = attached_images(agent.internal_session, turn.message) if sees else []
    return alternate(
        [*history, AgnoMessage(role="user", content=turn.message, images=attached or None)]
    )


def _summary_failed(run: TurnRun, exc: SummaryFailed) -> None:
    if run.beat.lost:
        run.beat.check_cancelled()
        return
    fail_turn(
        run.turn,
        "The earlier messages of this conversation could not be summarised to fit the "
        f"model's window: {exc} Nothing was lost; send your message again once the model "
        "server answers.",
        {"model": run.label},
    )
