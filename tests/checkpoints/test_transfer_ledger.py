"""The effects ledger in a session's export (checkpoints.transfer_ledger): every entry travels,
onto the imported branches and tool messages, a reference to what the file does not hold stays
null, an older document without a ledger still imports, and a malformed entry refuses the whole
document with a 400 naming it, writing nothing."""

from __future__ import annotations

import copy
import json
from datetime import timedelta

import pytest
from django.utils import timezone

from checkpoints.models import Checkpoint
from checkpoints.selectors import irreversible_effects
from checkpoints.services import checkpoint_create, checkpoint_restore
from checkpoints.transfer import session_export, session_import
from sessions_app.errors import ImportRejected
from sessions_app.models import LEDGER_TEXT_LIMIT, Branch, LedgerEntry, Message, Session
from sessions_app.selectors import current_branch, session_ledger
from sessions_app.services import message_append
from sessions_app.turns import ledger_record
from tests.conftest import say

pytestmark = pytest.mark.django_db


def call(branch: Branch, text: str, *, failed: bool = False) -> LedgerEntry:
    """An external call stored on `branch` as a turn stores one: its tool message (effect
    external) and its ledger entry (sessions_app.turns.ledger_record)."""
    tool = message_append(
        branch=branch,
        role="tool",
        content=f"sent {text}",
        tool_name="send_message",
        tool_args={"to": "bob", "text": text},
        tool_result=f"sent {text}",
        metadata={"error": True} if failed else None,
    )
    Message.objects.filter(pk=tool.pk).update(effect="external")
    tool.effect = "external"
    message_append(branch=branch, role="assistant", content="Done.")
    owner = Session.objects.get(pk=branch.session_id).owner_id
    (entry,) = ledger_record(
        session_id=branch.session_id, turn_id=None, owner_id=owner, messages=[tool]
    )
    return entry


@pytest.fixture
def ledgered(session, branch, alice):
    """Alice's session whose ledger holds: a call a rewind cut (its message gone), a call on a
    branch that rewind deleted (its branch gone), a call of a stopped turn (no message ever),
    and a call whose message is still in the history, plus one that failed."""
    say(branch, "hi", "hello")
    start = checkpoint_create(branch=branch, name="start")
    call(branch, "cut")
    after = checkpoint_create(branch=branch, name="after")
    side = checkpoint_restore(checkpoint=after).branch
    call(side, "on a deleted branch")
    LedgerEntry.objects.create(
        session=session,
        user=alice,
        branch_ref=branch.pk,
        turn_ref=None,
        message_ref=None,
        position=2,
        tool_name="send_message",
        tool_args={"to": "bob", "text": "stopped"},
        tool_result="",
        status=LedgerEntry.Status.MAY_HAVE_RUN,
    )
    checkpoint_restore(checkpoint=start, mode="rewind")
    assert not Branch.objects.filter(pk=side.pk).exists()
    call(branch, "kept")
    call(branch, "refused by the server", failed=True)
    checkpoint_create(branch=branch, name="end")
    return session


def rows(session: Session) -> list[tuple]:
    """The ledger as it must travel: all but ids and the turn."""
    return [
        (e.position, e.tool_name, e.tool_args, e.tool_result, e.status, e.created_at)
        for e in session_ledger(session)
    ]


def test_an_export_carries_every_entry_with_the_references_the_file_holds(ledgered):
    main = current_branch(ledgered)
    doc = session_export(session=ledgered)
    effects = doc["effects"]
    assert [(e["tool_args"]["text"], e["branch"], e["message"], e["status"]) for e in effects] == [
        ("cut", main.pk, None, "ran"),
        ("on a deleted branch", None, None, "ran"),
        ("stopped", main.pk, None, "may_have_run"),
        ("kept", main.pk, 2, "ran"),
        ("refused by the server", main.pk, 4, "failed"),
    ]
    assert [e["id"] for e in effects] == [e.pk for e in session_ledger(ledgered)]


def test_a_round_trip_keeps_every_entry_on_the_imported_branches_and_messages(ledgered, bob):
    copy_ = session_import(owner=bob, raw=json.dumps(session_export(session=ledgered)))
    assert rows(copy_) == rows(ledgered)
    main = current_branch(copy_)
    entries = list(session_ledger(copy_))
    assert {e.user_id for e in entries} == {bob.pk}
    assert {e.turn_ref for e in entries} == {None}  # turns do not travel
    assert [e.branch_ref for e in entries] == [main.pk, None, main.pk, main.pk, main.pk]
    tools = {m.pk: m for m in Message.objects.filter(branch=main, role="tool")}
    refs = [e.message_ref for e in entries]
    assert refs[:3] == [None, None, None]
    assert [tools[pk].tool_args["text"] for pk in refs[3:]] == ["kept", "refused by the server"]
    # Exported again, the copy gives the same ledger.
    again = session_export(session=copy_)["effects"]
    first = session_export(session=ledgered)["effects"]
    strip = ("id", "branch")
    assert [{k: v for k, v in e.items() if k not in strip} for e in again] == [
        {k: v for k, v in e.items() if k not in strip} for e in first
    ]


def test_every_restore_of_the_copy_leaves_behind_what_the_originals_would(ledgered, bob):
    copy_ = session_import(owner=bob, raw=json.dumps(session_export(session=ledgered)))

    def left(session: Session) -> dict[tuple[str, str], list[str]]:
        current = current_branch(session)
        found = {}
        for cp in Checkpoint.objects.filter(branch__session=session):
            for mode in ("branch", "rewind"):
                effects = irreversible_effects(cp, mode=mode, current=current)
                found[(cp.checkpoint_name, mode)] = [m.tool_args["text"] for m in effects]
        return found

    original = left(ledgered)
    assert original[("start", "rewind")] == ["cut", "stopped", "kept"]
    assert left(copy_) == original


def test_a_document_without_a_ledger_still_imports_with_an_empty_one(ledgered, bob):
    doc = session_export(session=ledgered)
    del doc["effects"]
    copy_ = session_import(owner=bob, raw=json.dumps(doc))
    assert not LedgerEntry.objects.filter(session=copy_).exists()
    assert Message.objects.filter(branch__session=copy_, role="tool").count() == 2


def test_a_session_without_calls_exports_an_empty_ledger(session, branch, bob):
    say(branch, "hi", "hello")
    doc = session_export(session=session)
    assert doc["effects"] == []
    copy_ = session_import(owner=bob, raw=json.dumps(doc))
    assert not LedgerEntry.objects.filter(session=copy_).exists()


def test_entries_cut_off_at_the_ledgers_limit_travel(session, branch, bob):
    say(branch, "hi", "hello")
    entry = call(branch, "x" * (2 * LEDGER_TEXT_LIMIT))
    assert set(entry.tool_args) == {"cut_off"}
    LedgerEntry.objects.filter(pk=entry.pk).update(tool_result="r" * LEDGER_TEXT_LIMIT)
    copy_ = session_import(owner=bob, raw=json.dumps(session_export(session=session)))
    assert rows(copy_) == rows(session)


# --- Malformed entries ---------------------------------------------------------------------------


def _status(d, e):
    e["status"] = "maybe"


def _position_as_text(d, e):
    e["position"] = "2"


def _args_not_json(d, e):
    e["tool_result"] = 42


def _no_status(d, e):
    del e["status"]


def _unknown_field(d, e):
    e["colour"] = "red"


def _name_empty(d, e):
    e["tool_name"] = ""


def _result_too_long(d, e):
    e["tool_result"] = "r" * (LEDGER_TEXT_LIMIT + 1)


def _args_too_long(d, e):
    e["tool_args"] = {"text": "a" * LEDGER_TEXT_LIMIT}


def _unknown_branch(d, e):
    e["branch"] = 987654


def _message_not_a_tool(d, e):
    e["message"] = 0  # the user's "hi"


def _message_past_the_branch(d, e):
    e["message"] = 500


def _message_without_branch(d, e):
    e["branch"] = None


def _duplicate_id(d, e):
    e["id"] = d["effects"][0]["id"]


def _future(d, e):
    e["created_at"] = (timezone.now() + timedelta(days=30)).isoformat()


def _nul_in_args(d, e):
    e["tool_args"] = {"text": "a\x00b"}


BAD = {
    "an unknown status": (_status, "status"),
    "a position given as text": (_position_as_text, "position"),
    "a result that is not text": (_args_not_json, "tool_result"),
    "no status": (_no_status, "status"),
    "an unknown field": (_unknown_field, "colour"),
    "an empty tool name": (_name_empty, "tool_name"),
    "a result over the limit": (_result_too_long, "limit is 4000"),
    "arguments over the limit": (_args_too_long, "longer than 4000"),
    "a branch not in the file": (_unknown_branch, "branch 987654, which is not in the document"),
    "a message that is not a tool's": (_message_not_a_tool, "not a tool message"),
    "a message past its branch": (_message_past_the_branch, "not in the document"),
    "a message without a branch": (_message_without_branch, "no branch"),
    "an id given twice": (_duplicate_id, "appears twice"),
    "a time in the future": (_future, "out of range"),
    "a NUL in the arguments": (_nul_in_args, "tool_args"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_malformed_entry_refuses_the_document_naming_it_and_writes_nothing(ledgered, bob, case):
    mutate, detail = BAD[case]
    doc = copy.deepcopy(session_export(session=ledgered))
    index = 4 if case != "an id given twice" else 1  # the failed call, whose message is kept
    entry = doc["effects"][index]
    mutate(doc, entry)
    counts = (Session.objects.count(), Message.objects.count(), LedgerEntry.objects.count())
    with pytest.raises(ImportRejected) as raised:
        session_import(owner=bob, raw=json.dumps(doc))
    assert f"effects entry {index} (id {entry['id']!r})" in raw_message(raised.value)
    assert detail in raw_message(raised.value)
    assert raised.value.code != "too_large"  # a 400, not a 413
    assert counts == (
        Session.objects.count(),
        Message.objects.count(),
        LedgerEntry.objects.count(),
    )
    assert not Session.objects.filter(owner=bob).exists()


def raw_message(exc: ImportRejected) -> str:
    return exc.message


@pytest.mark.parametrize("value", [5, "all of them", {"id": 1}])
def test_a_ledger_that_is_not_a_list_is_refused(ledgered, bob, value):
    doc = session_export(session=ledgered)
    doc["effects"] = value
    with pytest.raises(ImportRejected, match="effects"):
        session_import(owner=bob, raw=json.dumps(doc))
    assert not Session.objects.filter(owner=bob).exists()
