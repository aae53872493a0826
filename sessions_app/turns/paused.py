"""A turn paused for an approval, as its row keeps it (`metadata.paused`, saved by
`turn_await_approval` in the same update that pauses it: agents.approval_gate builds it): what a
continuation resumes from, what a Stop of the paused turn keeps (`paused_new_messages`) or of
its continuation (`saved_new_messages` of the earlier batches, with what the continuation did),
and the marks a continuation leaves on it (the approved call started; a call that may have
run)."""

from __future__ import annotations

import json
from typing import Any

from django.db import transaction
from django.utils import timezone

from core.validation import JSONObject

from ..approval_checks import answers_of
from ..approvals import (
    MAY_HAVE_RUN_KEY,
    PAUSED_KEY,
    Pending,
    args_digest,
    may_have_run,
    tool_call_key,
)
from ..models import Effect, Message, Turn
from .agent_messages import NewMessage


def paused_state(turn_metadata: object) -> dict[str, Any] | None:
    """The state a paused turn saved (`metadata.paused`): `messages` (the turn's new messages before
    the batch that paused, as dicts), `assistant` (that batch's assistant message: its `content`
    and `tool_calls`), `results` (call id -> [result, error] of the batch's calls that ran;
    [result, error, images] when an MCP tool's result had images), `effects` (each tool's
    effect), `refused` and `given_up` (the calls the turn's attempts refused, and gave up on
    past their deadline, so far: [id or tool, argument hash] each), `session_state` (the run's,
    which the continuation starts from; a pause saved before these were part of the state has
    none of the last three), `pending` (the call that waits) and `started` (the key of an
    approved call a continuation began to run). None for a turn that never paused."""
    state = turn_metadata.get(PAUSED_KEY) if isinstance(turn_metadata, dict) else None
    return state if isinstance(state, dict) else None


def without_pause(metadata: JSONObject) -> JSONObject:
    """A turn's metadata once the turn has ended: the state it saved for its continuation (a
    copy of its messages so far) is of no more use, and goes."""
    return {k: v for k, v in metadata.items() if k != PAUSED_KEY}


def paused_messages(turn: Turn) -> list[dict[str, Any]]:
    """The messages of a paused (or stopped while paused) turn that already happened, oldest
    first, as dicts of agno's Message fields (role, content, tool_calls, tool_call_id,
    tool_name, tool_args, tool_call_error, and `images` on a tool message whose result had
    some): the turn's earlier batches, then the assistant message of the batch that paused and
    the results of that batch's calls that ran. Empty for a turn that never paused."""
    state = paused_state(turn.metadata)
    return saved_messages(state) if state is not None else []


def saved_messages(state: dict[str, Any], *, batch: bool = True) -> list[dict[str, Any]]:
    """`paused_messages` of a saved state; without `batch`, the earlier batches alone (what a
    continuation, which runs the batch again, has of the turn before it)."""
    out = [m for m in state.get("messages") or [] if isinstance(m, dict)]
    assistant = state.get("assistant")
    if not batch or not isinstance(assistant, dict):
        return out
    out.append({"role": "assistant", **assistant})
    got_results = state.get("results")
    results: dict[str, Any] = got_results if isinstance(got_results, dict) else {}
    for call in assistant.get("tool_calls") or []:
        got = results.get(tool_call_key(call)) if isinstance(call, dict) else None
        if isinstance(got, list) and len(got) >= 2:
            fn = call.get("function") or {}
            out.append(
                {
                    "role": "tool",
                    "content": got[0],
                    "tool_call_id": call.get("id"),
                    "tool_name": fn.get("name"),
                    "tool_args": fn.get("arguments"),
                    "tool_call_error": bool(got[1]),
                    "images": got[2] if len(got) > 2 and isinstance(got[2], list) else [],
                }
            )
    return out


def calls_of(saved: object) -> set[tuple[str, str]]:
    """Calls as a pause saves them (`refused`, `given_up`): [id or tool, argument hash] each."""
    pairs = saved if isinstance(saved, list) else []
    return {(str(p[0]), str(p[1])) for p in pairs if isinstance(p, list) and len(p) == 2}


def paused_new_messages(turn: Turn) -> list[NewMessage]:
    """`paused_messages(turn)` ready to store (`saved_new_messages`)."""
    state = paused_state(turn.metadata)
    return saved_new_messages(state) if state is not None else []


def saved_new_messages(state: dict[str, Any], *, batch: bool = True) -> list[NewMessage]:
    """`saved_messages(state, batch=batch)` ready to store (sessions_app.turns.
    turn_keep_stopped): each tool message with its tool's effect as the pause saved it
    (`effects`; `external`, the safe assumption, for a name it does not know; `none` for a call
    refused: it did not run), marked an error when its call failed or was refused, and as one
    that may have run when it was given up on past its deadline, with its images."""
    saved = state.get("effects")
    effects: dict[str, Any] = saved if isinstance(saved, dict) else {}
    refused, given_up = calls_of(state.get("refused")), calls_of(state.get("given_up"))
    out: list[NewMessage] = []
    for m in saved_messages(state, batch=batch):
        role = str(m.get("role") or "")
        content = m.get("content") if isinstance(m.get("content"), str) else ""
        if role == Message.Role.ASSISTANT:
            calls = m.get("tool_calls") if isinstance(m.get("tool_calls"), list) else None
            out.append(NewMessage(role=role, content=content or "", tool_calls=calls or None))
        elif role == Message.Role.TOOL:
            name = str(m.get("tool_name") or "")
            call_id = str(m.get("tool_call_id") or "")
            args = parsed_args(m.get("tool_args"))
            digest = args_digest(args if args is not None else {})
            effect = str(effects.get(name) or Effect.EXTERNAL)
            if (call_id, digest) in refused:
                effect = Effect.NONE
            metadata: dict[str, Any] = {"error": True} if m.get("tool_call_error") else {}
            if (name, digest) in given_up:
                metadata["may_have_run"] = True
            if m.get("images"):
                metadata["images"] = m["images"]
            out.append(
                NewMessage(
                    role=role,
                    content=content or "",
                    tool_name=name,
                    tool_args=args,
                    tool_result=content or "",
                    tool_call_id=call_id,
                    metadata=metadata,
                    effect=effect if effect in Effect.values else Effect.EXTERNAL,
                )
            )
    return out


def parsed_args(args: Any) -> Any:
    """A call's arguments as the model sent them (JSON text) or as parsed."""
    if isinstance(args, str):
        try:
            return json.loads(args)
        except ValueError:
            return args
    return args


def turn_call_started(*, turn: Turn, key: str) -> bool:
    """A continuation holding `turn`'s attempt is about to run the approved call `key`
    ("<attempt>:<call>"): recorded first, so a worker killed during the call leaves it on record
    as one that may have run, and the next continuation never runs it again unasked."""
    with transaction.atomic():
        mine = Turn.objects.filter(pk=turn.pk, status=Turn.Status.RUNNING, attempts=turn.attempts)
        metadata = mine.values_list("metadata", flat=True).first()
        state = paused_state(metadata)
        if not isinstance(metadata, dict) or state is None:
            return False
        saved = {**metadata, PAUSED_KEY: {**state, "started": key}}
        if not mine.update(metadata=saved):
            return False
    turn.metadata = saved
    return True


def turn_note_may_have_run(*, turn: Turn, pending: Pending) -> None:
    """The approved call `pending` was started by a continuation whose worker died: on record
    (`metadata.may_have_run`) for good; it is not run again."""
    record = {
        "tool_call_id": pending["tool_call_id"],
        "tool_name": pending["tool_name"],
        "args": pending["args"],
        "args_sha256": pending["args_sha256"],
        "attempt": pending["attempt"],
        "call": pending["call"],
        "answered_at": "",
        "recorded_at": timezone.now().isoformat(),
    }
    records = [dict(r) for r in may_have_run(turn.metadata)]
    if any(
        r.get("attempt") == record["attempt"] and r.get("call") == record["call"] for r in records
    ):
        return
    metadata = {**turn.metadata, MAY_HAVE_RUN_KEY: [*records, record]}
    if Turn.objects.filter(pk=turn.pk, attempts=turn.attempts).update(metadata=metadata):
        turn.metadata = metadata


def with_may_have_run(metadata: JSONObject, attempt: int) -> JSONObject:
    """`metadata` with the calls attempt `attempt` approved added to its `may_have_run` record:
    its worker died (the recovery takes the turn over or fails it), and each may have run
    before it did. The record is never shortened; a call already on it is not added twice."""
    records = list(may_have_run(metadata))
    known = {(r.get("attempt"), r.get("call")) for r in records}
    now = timezone.now().isoformat()
    answers = [a for a in answers_of(metadata).values() if isinstance(a, dict)]
    for answer in sorted(answers, key=lambda a: int(a.get("call") or 0)):
        if not answer.get("approved"):
            continue
        if answer.get("attempt") != attempt or (attempt, answer.get("call")) in known:
            continue
        records.append(
            {
                "tool_call_id": str(answer.get("tool_call_id", "")),
                "tool_name": str(answer.get("tool_name", "")),
                "args": answer.get("args"),
                "args_sha256": str(answer.get("args_sha256", "")),
                "attempt": attempt,
                "call": int(answer.get("call") or 0),
                "answered_at": str(answer.get("answered_at", "")),
                "recorded_at": now,
            }
        )
    if len(records) == len(may_have_run(metadata)):
        return metadata
    return {**metadata, MAY_HAVE_RUN_KEY: [dict(r) for r in records]}
