"""The effects ledger (sessions_app.models.ledger): every external call a turn stored gets one
entry, `ran` or `failed`, in the transaction that stores the turn's messages; reads, workspace
writes and imported history get none; no rewind, restore or deleted branch removes an entry, and
the session's deletion removes them all."""

from __future__ import annotations

import json

import pytest

from checkpoints.services import branch_rewind, checkpoint_create, checkpoint_restore
from checkpoints.transfer import session_export, session_import
from sessions_app.models import Branch, LedgerEntry, Message, Session
from sessions_app.selectors import current_branch, session_ledger
from sessions_app.services import session_create, session_delete
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


def test_an_imported_session_brings_its_history_but_no_entries(sends, session, alice):
    send(sends, session, "one")
    copy = session_import(owner=alice, raw=json.dumps(session_export(session=session)))
    tool = Message.objects.filter(branch__session=copy, role="tool").get()
    assert tool.effect == "external"
    assert not LedgerEntry.objects.filter(session=copy).exists()
    assert LedgerEntry.objects.filter(session=session).count() == 1
