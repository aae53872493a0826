"""What a stopped turn keeps (`turn_keep_stopped`): its messages of the calls that ran (the
assistant's tool calls and the tool messages of the calls that answered, with their effects)
and its reply so far, ending in one assistant message marked stopped, even an empty one, so the
page has a line to show ("Stopped: notes__add_note ran; write_file did not") and a reply to
regenerate, and the model's history has a place for its note (agents.history). Which of its
calls ran, failed, may have run or did not run goes in `stopped_calls`, on that message and on
the turn. One function for every way a turn is stopped: the cancel itself (the reply the pages
show), the worker that ran the turn once it notices, and a paused turn's saved messages."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core import events
from core.validation import JSONObject, storable_json, storable_text

from ..models import Branch, Message, Session, Turn
from ..services import lock_session, message_append
from .agent_messages import NewMessage, ledger_record, stored_rows
from .paused import without_pause
from .start import continued_reply
from .texts import bounded

# How each call of a stopped turn ended, as `stopped_calls` records it.
RAN, FAILED, MAY_HAVE_RUN, NOT_RUN = "ran", "failed", "may_have_run", "not_run"
_SAID = {RAN: "ran", FAILED: "failed", MAY_HAVE_RUN: "may have run", NOT_RUN: "did not"}


def stopped_calls(
    messages: Iterable[NewMessage], may_have_run: Collection[str] = ()
) -> list[JSONObject]:
    """Each call the assistant's messages made, in order, with how it ended: `ran` or `failed`
    (its tool message says; `not_run` for one its owner refused), `may_have_run` (its id is in
    `may_have_run`: it started and never answered) or `not_run`. A tool message answers the
    first call of its id not yet answered since the assistant message that made it (model
    servers repeat ids)."""
    out: list[JSONObject] = []
    open_calls: list[JSONObject] = []
    for m in messages:
        if m.role == Message.Role.ASSISTANT and m.tool_calls:
            _close(open_calls, may_have_run, out)
            for call in m.tool_calls:
                if not isinstance(call, dict):
                    continue
                fn = call.get("function") if isinstance(call.get("function"), dict) else {}
                name = str((fn or {}).get("name") or "")
                open_calls.append({"id": str(call.get("id") or ""), "tool": name, "outcome": ""})
        elif m.role == Message.Role.TOOL:
            match = next(
                (c for c in open_calls if c["id"] == m.tool_call_id and not c["outcome"]), None
            )
            if match is not None:
                error, refused = m.metadata.get("error"), m.metadata.get("refused")
                match["outcome"] = NOT_RUN if refused else FAILED if error else RAN
    _close(open_calls, may_have_run, out)
    return out


def _close(
    open_calls: list[JSONObject], may_have_run: Collection[str], out: list[JSONObject]
) -> None:
    for c in open_calls:
        if not c["outcome"]:
            c["outcome"] = MAY_HAVE_RUN if c["id"] in may_have_run else NOT_RUN
    out.extend(open_calls)
    open_calls.clear()


def _marked(messages: list[NewMessage], may_have_run: Collection[str]) -> list[NewMessage]:
    """`messages`, their assistant tool calls marked as a stopped turn's (`stopped_turn`, and
    the ids of those that may have run): the model's history answers the calls that never did
    (agents.history)."""
    for m in messages:
        if m.role == Message.Role.ASSISTANT and m.tool_calls:
            ids = [c.get("id") for c in m.tool_calls if isinstance(c, dict)]
            started = [i for i in ids if i in may_have_run]
            m.metadata = {**m.metadata, "stopped_turn": True, "may_have_run": started}
    return messages


def stopped_line(metadata: Any) -> str:
    """The line a stopped reply shows: "Stopped: notes__add_note ran; write_file did not", or
    "Stopped before the reply" when nothing was said and no call was made; empty for a message
    that is not a stopped reply, or one stopped mid-text with no calls (its badge says it)."""
    if not isinstance(metadata, dict) or not metadata.get("stopped"):
        return ""
    calls = metadata.get("stopped_calls")
    calls = [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []
    if not calls:
        return "" if metadata.get("said") else "Stopped before the reply"
    parts = []
    for outcome, said in _SAID.items():
        named = (str(c.get("tool")) for c in calls if c.get("outcome") == outcome)
        names = list(dict.fromkeys(named))
        if names:
            parts.append(f"{', '.join(names)} {said}")
    return "Stopped: " + "; ".join(parts)


def _marks(text: str, calls: list[JSONObject], turn: Turn) -> JSONObject:
    marks: JSONObject = {"stopped": True, "finish_reason": "cancelled", "stopped_calls": calls}
    if text.strip():
        marks["said"] = True
    continues = continued_reply(turn)  # a stopped continuation still extends its reply
    if continues is not None:
        marks["continues"] = continues
    return marks


@transaction.atomic
def turn_keep_stopped(
    *,
    turn: Turn,
    reply: str,
    messages: list[NewMessage] | None = None,
    may_have_run: Collection[str] = (),
    metadata: JSONObject | None = None,
) -> bool:
    """Store what a cancelled turn of `turn`'s attempt did before it stopped: `messages` (the
    assistant's tool calls and the tool messages of the calls that answered, as the worker, or a
    paused turn's saved state, has them) and, last, `reply` (the text streamed so far, possibly
    empty) as an assistant message marked {"stopped": true, "finish_reason": "cancelled",
    "stopped_calls": [...]}. The external calls among them go into the effects ledger with
    their messages; `tools_used` names the calls that ran without error; the turn's workspace
    writes are kept (`turn_cancel` no longer drops them): a write that ran is the turn's.

    Only for a cancelled turn of that attempt, while its branch still ends with the turn's user
    message, or with the reply the cancel kept (`turn_cancel` keeps the reply the pages show at
    once): then `messages` go in before it and the worker's metadata is added to it. A second
    call adds nothing. False when `messages` could not be stored (the caller then records the
    calls in the ledger without messages: ledger_record_unstored)."""
    if turn.branch_id is None:
        return False
    session = lock_session(turn.session_id)
    row = (
        Turn.objects.select_for_update()
        .filter(pk=turn.pk, status=Turn.Status.CANCELLED, attempts=turn.attempts)
        .first()
    )
    branch = Branch.objects.select_for_update().filter(pk=turn.branch_id).first()
    if row is None or branch is None:
        return False
    messages = _marked(list(messages or []), may_have_run)
    base = (turn.user_message_position or 0) + 1
    kept = Message.objects.filter(pk=row.reply_message_id).first() if row.reply_message_id else None
    if kept is not None:
        return _add_to_kept(
            turn, row, branch, kept, reply, messages, may_have_run, metadata, session
        )
    if branch.message_count != base:
        return False
    text = bounded(storable_text(reply), settings.AGENT_MAX_REPLY_CHARS)
    calls = stopped_calls(messages, may_have_run)
    marks = _marks(text, calls, turn)
    if not text.strip() and not messages and "continues" in marks:
        return False  # a stopped continuation that added nothing: its reply stays as it was
    stored = stored_rows(branch, base, messages)
    last = message_append(
        branch=branch,
        role=Message.Role.ASSISTANT,
        content=text,
        metadata={**(metadata or {}), **marks},
    )
    _recorded(turn, row, session, stored, last, calls, metadata)
    return True


def _add_to_kept(
    turn: Turn,
    row: Turn,
    branch: Branch,
    kept: Message,
    reply: str,
    messages: list[NewMessage],
    may_have_run: Collection[str],
    metadata: JSONObject | None,
    session: Session,
) -> bool:
    """The cancel kept the reply shown: `messages` go in before it (it moves down by as many),
    and the worker's metadata is added to it (its text too, when none had reached the pages).
    Only once (`worker_kept`), and only while the branch still ends with it and nothing was
    forked after the user's message meanwhile."""
    if not kept.metadata.get("stopped") or kept.metadata.get("worker_kept"):
        return False  # not a stopped reply, or the worker already added to it
    base = kept.position
    forked = Branch.objects.filter(parent_id=branch.pk, fork_position__gt=base).exists()
    if messages and (branch.message_count != base + 1 or forked):
        return False
    calls = stopped_calls(messages, may_have_run)
    extra = {k: v for k, v in (metadata or {}).items() if k not in ("stopped", "finish_reason")}
    kept.metadata = storable_json(
        {**kept.metadata, **extra, "stopped_calls": calls, "worker_kept": True}
    )
    text = bounded(storable_text(reply), settings.AGENT_MAX_REPLY_CHARS)
    changed = bool(messages) or (not kept.content and bool(text.strip()))
    if not kept.content and text.strip():  # nothing had reached the pages: the worker's text
        kept.content = text
        kept.metadata["said"] = True
    kept.position = base + len(messages)
    Message.objects.filter(pk=kept.pk).update(
        position=kept.position, metadata=kept.metadata, content=kept.content
    )
    stored = stored_rows(branch, base, messages)
    if messages:
        Branch.objects.filter(pk=branch.pk).update(message_count=kept.position + 1)
    if changed:
        events.branch_changed(session=turn.session_id, branch=branch.pk)  # pages show it
    _recorded(turn, row, session, stored, kept, calls, metadata)
    return True


def _recorded(
    turn: Turn,
    row: Turn,
    session: Session,
    stored: list[Message],
    last: Message,
    calls: list[JSONObject],
    extra: JSONObject | None,
) -> None:
    """The ledger's entries of the stored calls; the turn's reply, tools used and summary. The
    turn's workspace writes stay: a write that ran is a real write of the turn (issue 36)."""
    ledger_record(
        session_id=turn.session_id, turn_id=turn.pk, owner_id=session.owner_id, messages=stored
    )
    used = [
        m.tool_name
        for m in stored
        if m.role == Message.Role.TOOL and m.tool_name and not m.metadata.get("error")
    ]
    worker = {k: v for k, v in (extra or {}).items() if k not in ("stopped", "finish_reason")}
    meta = {**without_pause(row.metadata), **worker, "stopped_calls": calls}
    Turn.objects.filter(pk=turn.pk).update(
        reply_message=last, tools_used=storable_json(used), metadata=storable_json(meta)
    )
    turn.reply_message, turn.tools_used, turn.metadata = last, used, meta
    Session.objects.filter(pk=turn.session_id).update(updated_at=timezone.now())
