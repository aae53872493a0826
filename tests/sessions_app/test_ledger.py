"""The effects ledger (sessions_app.models.ledger): every external call a turn stored gets one
entry, `ran` or `failed`, in the transaction that stores the turn's messages; reads and workspace
writes get none, an import brings the document's entries; no rewind, restore, Stop, take-over or
deleted branch removes an entry, and the session's deletion removes them all."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.apps import apps
from django.db import transaction
from django.utils import timezone

from checkpoints.captures import branches_drop
from checkpoints.services import branch_rewind, checkpoint_create, checkpoint_restore
from checkpoints.transfer import session_export, session_import
from sessions_app.models import Branch, LedgerEntry, Message, Session, Turn
from sessions_app.selectors import current_branch, session_ledger
from sessions_app.services import lock_session, session_create, session_delete
from sessions_app.turns import (
    UnstoredCall,
    ledger_record_unstored,
    turn_cancel,
    turn_claim,
    turn_fail,
    turn_recover_stale,
    turn_start,
)
from tests.agents import custom_tools
from tests.conftest import ask, say
from tests.fakes.chat_server import Reply, ToolCall, ToolCalls

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def sends(fake_llm, settings):
    """Turns may call send_message (external) and file_ticket (external, and it raises)."""
    settings.AGENT_TOOLS = [
        "tests.agents.custom_tools.send_message",
        "tests.agents.custom_tools.file_ticket",
    ]
    custom_tools.SENT.clear()
    return fake_llm


def send(llm, session, text: str):
    """A turn whose one call sends `text` to bob; the turn, finished."""
    llm.queue(ToolCalls([ToolCall("send_message", {"to": "bob", "text": text})]), Reply("Sent."))
    turn = ask(session, f"send {text}")
    assert turn.status == "done", turn.error
    return turn


def ledger(session) -> list[tuple[str, object, str]]:
    return [(e.tool_name, e.tool_args, e.status) for e in session_ledger(session)]


def test_an_external_call_that_ran_makes_one_ran_entry(sends, session, alice):
    turn = send(sends, session, "hello")
    assert custom_tools.SENT == ["bob: hello"]
    (entry,) = LedgerEntry.objects.all()
    message = Message.objects.get(role="tool", tool_name="send_message")
    assert (entry.session_id, entry.user_id) == (session.pk, alice.pk)
    assert (entry.branch_ref, entry.turn_ref) == (turn.branch_id, turn.pk)
    assert (entry.message_ref, entry.position) == (message.pk, message.position)
    assert (entry.tool_name, entry.tool_args, entry.status) == (
        "send_message",
        {"to": "bob", "text": "hello"},
        "ran",
    )
    assert entry.tool_result == message.tool_result == "sent to bob"
    assert entry.created_at == message.created_at


def test_a_call_that_raised_or_never_ran_is_failed_never_ran(sends, session):
    sends.queue(
        ToolCalls(
            [
                ToolCall("file_ticket", {"title": "broken"}),  # raises
                ToolCall("no_such_tool", {"x": 1}),  # unknown: never runs
                ToolCall("send_message", '{"to": "bob", "text": '),  # not JSON: never runs
            ]
        ),
        Reply("Sorry."),
    )
    turn = ask(session, "try")
    assert turn.status == "done", turn.error
    assert custom_tools.SENT == []
    # In the history's order: agno answers the calls it cannot run before those it runs.
    assert [(e.tool_name, e.status) for e in session_ledger(session)] == [
        ("no_such_tool", "failed"),
        ("send_message", "failed"),
        ("file_ticket", "failed"),
    ]


def test_reads_and_workspace_writes_make_no_entry(fake_llm, session):
    fake_llm.queue(
        ToolCalls(
            [
                ToolCall("write_file", {"path": "a.md", "content": "a"}),
                ToolCall("read_file", {"path": "a.md"}),
                ToolCall("calculate", {"expression": "2+2"}),
            ]
        ),
        Reply("Done."),
    )
    turn = ask(session, "write and read")
    assert turn.status == "done", turn.error
    assert Message.objects.filter(role="tool").count() == 3
    assert not LedgerEntry.objects.exists()


def test_entries_survive_rewinds_past_them(sends, session, branch):
    say(branch, "hello", "hi")
    start = checkpoint_create(branch=branch, name="start")
    send(sends, session, "one")
    checkpoint_restore(checkpoint=start, mode="rewind")
    send(sends, session, "two")
    branch_rewind(branch=current_branch(session), position=2)
    assert not Message.objects.filter(role="tool").exists()  # the history lost both calls
    assert ledger(session) == [
        ("send_message", {"to": "bob", "text": "one"}, "ran"),
        ("send_message", {"to": "bob", "text": "two"}, "ran"),
    ]


def test_entries_survive_a_restore_as_a_branch_and_the_deletion_of_their_branch(
    sends, session, branch
):
    say(branch, "hello", "hi")
    start = checkpoint_create(branch=branch, name="start")
    send(sends, session, "on main")
    after = checkpoint_create(branch=current_branch(session), name="after")
    restored = checkpoint_restore(checkpoint=after, mode="branch").branch
    turn = send(sends, session, "on the restored branch")
    assert turn.branch_id == restored.pk
    # Rewinding main to its start deletes the branch forked past it, with its messages.
    checkpoint_restore(checkpoint=start, mode="rewind")
    assert not Branch.objects.filter(pk=restored.pk).exists()
    assert not Message.objects.filter(role="tool").exists()
    entries = list(session_ledger(session))
    assert [(e.branch_ref, e.turn_ref, e.tool_args["text"]) for e in entries] == [
        (branch.pk, entries[0].turn_ref, "on main"),
        (restored.pk, turn.pk, "on the restored branch"),
    ]


def test_entries_go_with_their_session_only(sends, session, alice):
    other = session_create(owner=alice, name="other")
    send(sends, session, "one")
    send(sends, other, "two")
    session_delete(session=session)
    assert not Session.objects.filter(pk=session.pk).exists()
    assert [(e.session_id, e.tool_args["text"]) for e in LedgerEntry.objects.all()] == [
        (other.pk, "two")
    ]


def test_an_imported_session_brings_its_history_and_its_entries(sends, session, alice):
    """The messages brought in make no entry of their own: the entries come from the
    document's ledger (checkpoints.transfer_ledger), one each, on the copy's tool message."""
    send(sends, session, "one")
    copy = session_import(owner=alice, raw=json.dumps(session_export(session=session)))
    tool = Message.objects.filter(branch__session=copy, role="tool").get()
    assert tool.effect == "external"
    (entry,) = LedgerEntry.objects.filter(session=copy)
    assert (entry.branch_ref, entry.message_ref, entry.position) == (
        tool.branch_id,
        tool.pk,
        tool.position,
    )
    assert (entry.tool_name, entry.tool_args, entry.status) == (
        "send_message",
        {"to": "bob", "text": "one"},
        "ran",
    )
    assert LedgerEntry.objects.filter(session=session).count() == 1
    assert custom_tools.SENT == ["bob: one"]  # importing ran nothing


# --- What deletes an entry: only its session (and so its user's erasure) -----------------------


def test_an_entry_is_tied_to_nothing_but_its_session_and_its_user():
    """Its branch, turn and message are kept ids, not foreign keys: no deletion of those rows,
    by any path, can reach it. Its two foreign keys cascade from the session and the user."""
    relations = {
        f.name: f.remote_field.on_delete.__name__
        for f in LedgerEntry._meta.get_fields()
        if f.is_relation
    }
    assert relations == {"session": "CASCADE", "user": "CASCADE"}
    pointing_here = [
        f"{f.model._meta.label}.{f.name}"
        for model in apps.get_models()
        for f in model._meta.get_fields(include_hidden=True)
        if f.is_relation and f.concrete and f.related_model is LedgerEntry
    ]
    assert pointing_here == []


def _unstored(turn, text: str) -> None:
    """The call a turn's attempt made before it ended without storing its messages, recorded
    as agents.turn.settle records it."""
    ledger_record_unstored(
        turn=turn,
        calls=[UnstoredCall(tool_name="send_message", args={"text": text}, result=None)],
    )


def test_a_take_over_and_a_turn_out_of_attempts_keep_the_entries_of_every_attempt(
    session, settings
):
    settings.AGENT_TURN_ATTEMPTS = 2
    turn = turn_start(session=session, message="send it")
    for attempt in ("first", "second"):
        claimed = turn_claim(turn_id=turn.pk)
        assert claimed is not None
        _unstored(claimed, attempt)
        Turn.objects.filter(pk=turn.pk).update(
            heartbeat_at=timezone.now() - timedelta(seconds=settings.AGENT_TURN_STALE_SECONDS + 1)
        )
        turn_recover_stale(session_id=session.pk)
    turn.refresh_from_db()
    assert turn.status == "failed"
    assert [(e.tool_args["text"], e.status, e.turn_ref) for e in session_ledger(session)] == [
        ("first", "may_have_run", turn.pk),
        ("second", "may_have_run", turn.pk),
    ]


@pytest.mark.parametrize("end", ["cancel", "fail"])
def test_a_stopped_or_failed_turn_keeps_its_entries(session, end):
    turn = turn_claim(turn_id=turn_start(session=session, message="send it").pk)
    _unstored(turn, "sent before the end")
    if end == "cancel":
        turn_cancel(turn=turn)
    else:
        turn_fail(turn=turn, error="the model went away")
    assert [e.tool_args["text"] for e in session_ledger(session)] == ["sent before the end"]


def test_a_deleted_branch_keeps_its_entries(sends, session, branch):
    say(branch, "hello", "hi")
    cp = checkpoint_create(branch=branch, name="cp")
    side = checkpoint_restore(checkpoint=cp, mode="branch").branch
    send(sends, session, "from the side branch")
    with transaction.atomic():
        lock_session(session.pk)
        branches_drop([side.pk])
    assert not Branch.objects.filter(pk=side.pk).exists()
    assert [(e.branch_ref, e.tool_args["text"]) for e in session_ledger(session)] == [
        (side.pk, "from the side branch")
    ]
