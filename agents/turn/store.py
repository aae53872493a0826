"""Step 5, store: the run's new messages, the reply (cut off at a length limit, marked), the
branch's state, the automatic checkpoint after tool use and a rollback the model asked for, in
one transaction ending with `turn_finish`. The services announce each change once it commits
(checkpoint.created, branch.changed, turn.finished)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from agno.run.agent import RunOutput
from django.conf import settings
from django.db import transaction

from checkpoints.models import Checkpoint
from checkpoints.services import checkpoint_create
from core.errors import DomainError, InvalidInput
from sessions_app.models import Branch
from sessions_app.services import branch_set_state
from sessions_app.turns import (
    CUT_NOTE,
    BranchMoved,
    NewMessage,
    TurnTakenOver,
    continued_reply,
    cut_off,
    turn_finish,
    turn_store_messages,
)
from usage.services import usage_record

from ..history import from_agno
from ..model import ChatModel, reply_cut_off, reply_interrupted, tool_limit_hit
from ..summaries import summaries_after_turn
from ..tools import REFUSED
from .common import TurnMeta, TurnRun, fail_turn
from .settle import Settled, record_unstored, stopped_or_recorded
from .stream import Streamed, flush, send_delta, send_tool_finished, send_tool_started

log = logging.getLogger("agents.turn.store")


@dataclass
class Answer:
    """What the run added, ready to store."""

    new: list[NewMessage]
    reply: str
    tools_used: list[str]


def store(run: TurnRun, got: Streamed, settled: Settled) -> None:
    """Store the answer; the turn fails with the reason when it cannot be."""
    meta = settled.meta
    before = meta.copy()  # what a failure records: the run's, without the answer's
    try:
        answer = prepare(run, got, settled.output, meta)
        stored = answer is not None and _commit(run, answer, meta, got)
    except Exception as exc:
        log.exception("turn %s: the answer could not be stored", run.turn.pk)
        error = f"The answer could not be stored: {type(exc).__name__}: {exc}"
        fail_turn(run.turn, error, before)
        stored = False
    if not stored:
        record_unstored(run, got)  # no message holds its calls: the ledger does


def prepare(run: TurnRun, got: Streamed, output: RunOutput, meta: TurnMeta) -> Answer | None:
    """The run's messages as rows, its reply and the tools it used; None (the turn failed)
    for an empty reply. A reply cut short by a length limit (AGENT_MAX_REPLY_CHARS, or
    max_tokens at the server) is kept, marked as cut off, with finish_reason "length"; one
    whose stream ended without a finish is kept too, with "interrupted"."""
    ran = {t.tool_call_id for t in output.tools or [] if t.tool_call_id and not t.tool_call_error}
    new = from_agno(
        output.messages or [],
        model=meta["model"],
        ran=ran,
        effects=run.state.tool_effects,
        images=output.images,  # MCP tools' images, kept with the results that name them
    )
    report_unrun_tools(run, new, got)
    continues = continued_reply(run.turn)
    if continues is not None and new and new[0].role == "assistant" and not new[0].tool_calls:
        new[0].metadata["continues"] = continues  # joined to the reply it extends
    for m in new:
        if m.role != "tool":
            continue
        if run.state.was_refused(m.tool_call_id, m.tool_args):
            m.effect = "none"  # a call the owner refused did not run: it had no effect
            m.metadata["refused"] = True  # shown as "not run", never as "failed"
        if m.tool_name in run.agent.builtin_tools and m.content.startswith(REFUSED):
            m.metadata["error"] = True  # a built-in that refused did nothing: no tool used
        if run.state.may_have_run(m.tool_name, m.tool_args):
            m.metadata["may_have_run"] = True  # given up on past its deadline (tool_deadline)
    reply = output.content if isinstance(output.content, str) else str(output.content or "")
    if not reply.strip():
        fail_turn(run.turn, "The model sent an empty reply.", meta)
        return None
    reply = _finish(run, got, new, reply, meta, usage_of(output))
    used = [
        m.tool_name for m in new if m.role == "tool" and m.tool_name and not m.metadata.get("error")
    ]
    return Answer(new=new, reply=reply, tools_used=used)


def _finish(
    run: TurnRun,
    got: Streamed,
    new: list[NewMessage],
    reply: str,
    meta: TurnMeta,
    usage: dict[str, int],
) -> str:
    """The finish reason and usage, into the turn's metadata and the reply's message; the
    reply cut off (and the browser told so) when it passed a length limit."""
    last = new[-1] if new and new[-1].role == "assistant" else None
    limit = settings.AGENT_MAX_REPLY_CHARS
    cut = reply_cut_off(run.agent.model) or (last is not None and len(last.content) > limit)
    meta["usage"] = usage
    meta["finish_reason"] = finish_reason_of(run, cut)
    if cut:
        reply = cut_off(reply, limit)
        send_delta(got, CUT_NOTE)
        flush(got)
    if last is not None:
        last.metadata.update({"latency_ms": meta["latency_ms"], **usage})
        last.metadata["finish_reason"] = meta["finish_reason"]
        if cut:
            last.content = cut_off(last.content, limit)
        if meta["demo"]:
            last.metadata["demo"] = True
        if meta.get("notices"):
            last.metadata["notices"] = meta["notices"]  # shown with the reply (_message.html)
    return reply


def _commit(run: TurnRun, answer: Answer, meta: TurnMeta, got: Streamed) -> bool:
    """Store the answer; False when the turn ended otherwise meanwhile and nothing holds its
    calls (its branch moved). Cancelled or taken over just before: what it did is kept as a
    stopped turn's, or its calls go into the ledger (settle.stopped_or_recorded)."""
    turn = run.turn
    try:
        with transaction.atomic():
            branch = turn_store_messages(turn=turn, messages=answer.new, savepoint=False)
            turn.branch = branch  # as it now is: the after-work reads its length from it
            _save_state(run, branch, meta)
            auto = _auto_checkpoint(run, branch, answer.new)
            rolled_back_to = _rollback(run, meta)
            if not turn_finish(
                turn=turn,
                reply=answer.reply,
                tools_used=answer.tools_used,
                checkpoint_id=auto.pk if auto is not None else None,
                rolled_back_to_id=rolled_back_to.pk if rolled_back_to is not None else None,
                metadata=dict(meta),
            ):
                raise TurnTakenOver("This turn ended elsewhere before its answer was stored.")
    except TurnTakenOver as exc:
        log.info("turn %s: %s", turn.pk, exc)
        stopped_or_recorded(run, got, meta)  # when it was cancelled just before its end
        return True  # its calls are on record, as messages or in the ledger
    except BranchMoved as exc:
        fail_turn(turn, str(exc), meta)
        return False
    # Whether to summarise ahead, judged from what the fitting read (the history before the
    # user's message: a continuation's has none) and what the store wrote.
    asked = [turn.user_message] if turn.user_message_id and turn.user_message else []
    summaries_after_turn(turn=turn, fit=run.fit, added=[*asked, *answer.new])
    return True


def _save_state(run: TurnRun, branch: Branch, meta: TurnMeta) -> None:
    try:
        branch_set_state(branch=branch, session_state=run.state.persistent_state())
    except InvalidInput as exc:
        # The agent's state outgrew the limits (ROLLBACK_STATE_MAX_BYTES, the depth): the
        # answer is kept, the stored state stays as it was, and the turn says why.
        log.warning("turn %s: the session state was not saved: %s", run.turn.pk, exc.message)
        meta["state_not_saved"] = exc.message


# The effects of a call that changed something: what a checkpoint after it marks.
CHANGES = ("workspace", "external")


def _auto_checkpoint(run: TurnRun, branch: Branch, new: list[NewMessage]) -> Checkpoint | None:
    """After a turn whose calls changed something (when the session wants it): a call of effect
    `workspace` or `external` that ran without error, the checkpoint tools' own aside (a
    checkpoint after reading a file, a failed write or a sum would restore nothing new). Its
    name, after the last such tool, is unique in the session ("after-write_file (2)")."""
    changed = [
        m.tool_name
        for m in new
        if m.role == "tool"
        and m.tool_name
        and m.effect in CHANGES
        and not m.metadata.get("error")
        and m.tool_name not in run.agent.checkpoint_tools
    ]
    if not changed or not run.agent.auto_checkpoint:
        return None
    return checkpoint_create(
        branch=branch,
        name=f"after-{changed[-1]}",
        is_auto=True,
        metadata={
            "trigger": "tool_call",
            "tool_name": changed[-1],
            "message_count": branch.message_count,
            "turn": run.turn.pk,
        },
    )


def _rollback(run: TurnRun, meta: TurnMeta) -> Checkpoint | None:
    """A rollback the model asked for: carried out when the agent carries out rollbacks (the
    web and API turns), else left requested for the caller (seed 003's API)."""
    agent = run.agent
    requested = agent.requested_rollback
    if requested is None:
        return None
    if not agent.carry_out_rollbacks:
        meta["rollback_requested"] = requested
        return None
    try:
        if agent.carry_out_rollback():
            # The branch it made: the page tells the user they were moved there.
            meta["rollback_branch"] = agent.internal_session.pk
            return agent.last_rollback
    except DomainError as exc:
        meta["rollback_error"] = exc.message
    return None


def finish_reason_of(run: TurnRun, cut: bool) -> str:
    """Why the run's reply ended: the tool-call limit, a length limit, a stream that ended
    without a finish, or the model's own stop."""
    model = run.agent.model
    if tool_limit_hit(model):
        return "tool_limit"
    if cut:
        return "length"
    if reply_interrupted(model):
        return "interrupted"
    return "stop"


def record_usage(run: TurnRun, got: Streamed) -> None:
    """The attempt's model calls, as one usage transaction of the turn's owner
    (usage.services.usage_record), whether its answer is stored, paused, stopped or lost. A
    failure to record is logged: the turn goes on."""
    model = run.agent.model
    if isinstance(model, ChatModel):  # every response it streamed, whatever became of the run
        spent = model.take_spent()
        used = {"input_tokens": spent[0], "output_tokens": spent[1]}
    else:  # the demo model: the run's own metrics
        used = usage_of(got.output) if got.output is not None else {}
    if not any(used.values()):
        return
    turn = run.turn
    try:
        usage_record(
            user_id=turn.session.owner_id,
            model=run.label,
            input_tokens=used["input_tokens"],
            output_tokens=used["output_tokens"],
            session_id=turn.session_id,
            branch_id=turn.branch_id,
            turn_id=turn.pk,
        )
    except Exception:
        log.exception("turn %s: its usage could not be recorded", turn.pk)


def usage_of(output: RunOutput) -> dict[str, int]:
    metrics = output.metrics
    if metrics is None:
        return {}
    usage = {
        "input_tokens": metrics.input_tokens or 0,
        "output_tokens": metrics.output_tokens or 0,
        "total_tokens": metrics.total_tokens or 0,
    }
    return usage if any(usage.values()) else {}


def report_unrun_tools(run: TurnRun, new: list[NewMessage], got: Streamed) -> None:
    """agno sends no events for a tool call it refused (an unknown tool, arguments that are
    not JSON, a call past the limit): report each as started and finished with an error, so
    that every call has exactly one `tool.started` and one `tool.finished`."""
    for m in new:
        if m.role != "tool" or not m.metadata.get("error") or m.tool_call_id in got.started:
            continue
        call_id = m.tool_call_id or None
        send_tool_started(run.turn, m.tool_name, m.tool_args, call_id)
        send_tool_finished(run.turn, m.tool_name, call_id, m.tool_result, True)
