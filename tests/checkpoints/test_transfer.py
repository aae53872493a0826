from __future__ import annotations

import copy
import json

import pytest
from django.test import override_settings

from checkpoints.models import Checkpoint
from checkpoints.services import checkpoint_create, checkpoint_restore
from checkpoints.transfer import session_export, session_import
from sessions_app.errors import ImportRejected, ImportTooLarge
from sessions_app.models import Branch, Message, Session
from sessions_app.selectors import branch_history, current_branch
from sessions_app.services import message_append
from tests.conftest import contents, say

pytestmark = pytest.mark.django_db


@pytest.fixture
def rich_session(session, branch):
    """Three branches (one a branch of a branch), tool messages, manual and automatic
    checkpoints, session state."""
    say(branch, "what is 2+3?")
    message_append(
        branch=branch,
        role="assistant",
        content="",
        tool_calls=[{"id": "c1", "type": "function", "function": {"name": "calculate"}}],
    )
    message_append(
        branch=branch,
        role="tool",
        content="5",
        tool_name="calculate",
        tool_args={"expression": "2+3"},
        tool_result="5",
        tool_call_id="c1",
    )
    message_append(branch=branch, role="assistant", content="It is **5**.", metadata={"tokens": 9})
    auto = checkpoint_create(
        branch=branch, name="after-calculate", is_auto=True, metadata={"tool_name": "calculate"}
    )
    say(branch, "and 3+4?", "7")
    b2 = checkpoint_restore(checkpoint=auto).branch
    say(b2, "different question", "different answer")
    cp2 = checkpoint_create(branch=b2, name="b2-end", description="second line")
    b3 = checkpoint_restore(checkpoint=cp2).branch
    say(b3, "third")
    return session


def _shape(session: Session) -> dict:
    """Everything a copy must preserve, independent of database ids."""
    branches = list(Branch.objects.filter(session=session).order_by("created_at", "id"))
    index = {b.pk: i for i, b in enumerate(branches)}
    cps = {c.pk: c.checkpoint_name for c in Checkpoint.objects.filter(branch__session=session)}
    return {
        "name": session.session_name,
        "metadata": session.metadata,
        "branches": [
            {
                "parent": index.get(b.parent_id),
                "name": b.name,
                "fork_position": b.fork_position,
                "forked_from": cps.get(b.forked_from_id),
                "is_current": b.is_current,
                "message_count": b.message_count,
                "checkpoint_count": b.checkpoint_count,
                "state": b.session_state,
                "history": [
                    (
                        m.role,
                        m.content,
                        m.tool_name,
                        m.tool_args,
                        m.tool_result,
                        m.tool_call_id,
                        m.tool_calls,
                        m.metadata,
                    )
                    for m in branch_history(b)
                ],
                "checkpoints": sorted(
                    (c.checkpoint_name, c.description, c.is_auto, c.message_count, c.metadata)
                    for c in b.checkpoints.all()
                ),
            }
            for b in branches
        ],
    }


def test_export_then_import_gives_an_identical_copy(rich_session, bob):
    raw = json.dumps(session_export(session=rich_session))
    copy_ = session_import(owner=bob, raw=raw)
    assert copy_.owner == bob
    assert copy_.pk != rich_session.pk
    assert _shape(copy_) == _shape(rich_session)
    assert contents(branch_history(current_branch(copy_)))[-1] == "third"
    # And the copy exports to the same document, but for ids and time of export.
    again = session_export(session=copy_)
    assert len(again["branches"]) == 3


def test_a_branch_keeps_its_name_through_export_and_import(rich_session, bob):
    from sessions_app.services import branch_rename

    branch_rename(branch=current_branch(rich_session), name="the chosen line")
    doc = session_export(session=rich_session)
    assert sorted(b["name"] for b in doc["branches"]) == ["", "", "the chosen line"]
    copy_ = session_import(owner=bob, raw=json.dumps(doc))
    assert current_branch(copy_).name == "the chosen line"
    assert _shape(copy_) == _shape(rich_session)


def test_an_imported_branch_name_over_200_characters_is_refused(rich_session, bob):
    doc = session_export(session=rich_session)
    doc["branches"][0]["name"] = "n" * 201
    with pytest.raises(ImportRejected):
        session_import(owner=bob, raw=json.dumps(doc))
    assert not Session.objects.filter(owner=bob).exists()


def test_export_is_versioned_and_names_each_branch_once(rich_session):
    doc = session_export(session=rich_session)
    assert doc["format"] == "rollback.session"
    assert doc["version"] == 1
    assert len(doc["branches"]) == 3
    total = sum(len(b["messages"]) for b in doc["branches"])
    assert total == Message.objects.filter(branch__session=rich_session).count()


def _rejects(owner, raw, match, error=ImportRejected):
    sessions = Session.objects.count()
    messages = Message.objects.count()
    with pytest.raises(error, match=match):
        session_import(owner=owner, raw=raw)
    assert Session.objects.count() == sessions
    assert Message.objects.count() == messages


@pytest.mark.parametrize(
    ("raw", "match"),
    [
        ("not json at all", "not valid JSON"),
        (b"\xff\xfe\x00", "not valid JSON"),
        ("[1, 2, 3]", "must be a JSON object"),
        ('{"hello": "world"}', "'format' must be"),
        ("", "not valid JSON"),
    ],
)
def test_import_of_garbage_is_refused_and_nothing_written(bob, raw, match):
    _rejects(bob, raw, match)


def _doc(rich_session):
    return session_export(session=rich_session)


def _wrong_version(d):
    d["version"] = 99


def _string_version(d):
    d["version"] = "1"


def _two_current(d):
    for b in d["branches"]:
        b["is_current"] = True


def _no_current(d):
    for b in d["branches"]:
        b["is_current"] = False


def _gap_in_positions(d):
    d["branches"][0]["messages"][1]["position"] = 7


def _unknown_role(d):
    d["branches"][0]["messages"][0]["role"] = "wizard"


def _long_name(d):
    d["session"]["name"] = "n" * 201


def _long_checkpoint_name(d):
    d["branches"][0]["checkpoints"][0]["name"] = "c" * 201


def _parent_later(d):
    d["branches"][1]["parent"] = d["branches"][2]["id"]


def _fork_beyond_parent(d):
    d["branches"][1]["fork_position"] = 10_000


def _checkpoint_beyond_end(d):
    d["branches"][0]["checkpoints"][0]["message_count"] = 999


def _unknown_field(d):
    d["branches"][0]["surprise"] = 1


def _wrong_type(d):
    d["branches"][0]["messages"] = "many"


def _no_branches(d):
    d["branches"] = []


def _forked_from_unknown(d):
    d["branches"][1]["forked_from"] = 123456789


# A broken document of each kind: how to break an export, and what the refusal says.
MUTATIONS = {
    "wrong version": (_wrong_version, "Unsupported export version 99"),
    "version as text": (_string_version, "Unsupported export version '1'"),
    "two current": (_two_current, "Exactly one branch must be current"),
    "no current": (_no_current, "Exactly one branch must be current"),
    "gap in positions": (_gap_in_positions, "expected 1"),
    "unknown role": (_unknown_role, "role"),
    "long session name": (_long_name, "session.name"),
    "long checkpoint name": (_long_checkpoint_name, "name"),
    "parent after child": (_parent_later, "does not come before it"),
    "fork beyond parent": (_fork_beyond_parent, "forks at message 10000"),
    "checkpoint beyond end": (_checkpoint_beyond_end, "outside the branch"),
    "unknown field": (_unknown_field, "surprise"),
    "wrong type": (_wrong_type, "messages"),
    "no branches": (_no_branches, "branches"),
    "forked from unknown": (_forked_from_unknown, "forked from checkpoint 123456789"),
}


@pytest.mark.parametrize("case", list(MUTATIONS))
def test_import_of_a_broken_document_is_refused_and_nothing_written(rich_session, bob, case):
    mutate, match = MUTATIONS[case]
    doc = copy.deepcopy(_doc(rich_session))
    mutate(doc)
    _rejects(bob, json.dumps(doc), match)


def test_import_over_the_size_limit_is_refused(rich_session, bob):
    raw = json.dumps(_doc(rich_session))
    with override_settings(ROLLBACK_IMPORT_MAX_BYTES=len(raw) - 1):
        _rejects(bob, raw, "limit is", error=ImportTooLarge)


def test_import_with_nul_characters_in_json_is_refused_or_stored_cleanly(rich_session, bob):
    doc = _doc(rich_session)
    doc["session"]["metadata"] = {"note": "a\u0000b"}
    doc["branches"][0]["messages"][0]["content"] = "x\u0000y"
    try:
        copy_ = session_import(owner=bob, raw=json.dumps(doc))
    except ImportRejected:
        assert not Session.objects.filter(owner=bob).exists()
    else:
        assert contents(branch_history(current_branch(copy_)))[0] == "xy"


# --- values the database and the pages must be able to hold -----------------------------------


def _value_mutations():
    def at(*path):
        def get(d):
            for key in path:
                d = d[key]
            return d

        return get

    session = at("session")
    branch = at("branches", 0)
    message = at("branches", 0, "messages", 0)
    checkpoint = at("branches", 0, "checkpoints", 0)

    def setting(where, key, value):
        def mutate(d):
            where(d)[key] = value

        return mutate

    deep: dict = {}
    for _ in range(33):
        deep = {"a": deep}
    year_10000 = "9999-12-31T23:59:59-05:00"  # UTC cannot hold it: Python has no year 10000
    year_0 = "0001-01-01T00:00:00+05:00"
    return {
        "session in year 10000": (setting(session, "created_at", year_10000), "out of range"),
        "branch in year 10000": (setting(branch, "created_at", year_10000), "out of range"),
        "message in year 10000": (setting(message, "created_at", year_10000), "out of range"),
        "checkpoint in year 10000": (setting(checkpoint, "created_at", year_10000), "out of"),
        "message in year 0": (setting(message, "created_at", year_0), "out of range"),
        "message before 1970": (setting(message, "created_at", "1969-07-20T20:17:40Z"), "range"),
        "message in 2090": (setting(message, "created_at", "2090-01-01T00:00:00Z"), "tomorrow"),
        "NUL in session metadata": (
            setting(session, "metadata", {"a": "\x00"}),
            "The session metadata cannot contain NUL characters.",
        ),
        "NUL in a metadata key": (
            setting(checkpoint, "metadata", {"\x00": 1}),
            "metadata of checkpoint",
        ),
        "surrogate in branch state": (
            setting(branch, "session_state", {"a": "\ud800"}),
            "session state of branch",
        ),
        "surrogate in checkpoint state": (
            setting(checkpoint, "session_state", {"k": ["\udfff"]}),
            "lone surrogates",
        ),
        "NUL in message metadata": (
            setting(message, "metadata", {"a": "\x00"}),
            "metadata of message 0 of branch",
        ),
        "NUL in tool arguments": (setting(message, "tool_args", {"x": "\x00"}), "tool_args"),
        "deep tool calls": (setting(message, "tool_calls", [deep]), "nested more than 32"),
        "deep branch metadata": (setting(branch, "metadata", deep), "nested more than 32"),
    }


@pytest.mark.parametrize("case", list(_value_mutations()))
def test_import_of_a_value_no_page_could_show_is_refused_and_nothing_written(
    rich_session, bob, case
):
    mutate, match = _value_mutations()[case]
    doc = copy.deepcopy(_doc(rich_session))
    mutate(doc)
    _rejects(bob, json.dumps(doc), match)


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_import_of_nan_or_infinity_is_refused(rich_session, bob, constant):
    raw = json.dumps(_doc(rich_session))
    raw = raw.replace('"metadata": {}', '"metadata": {"n": %s}' % constant, 1)  # noqa: UP031
    _rejects(bob, raw, f"{constant.lstrip('-')} is not a JSON number")


def test_import_of_a_number_too_large_for_a_float_is_refused(rich_session, bob):
    raw = json.dumps(_doc(rich_session)).replace('"metadata": {}', '"metadata": {"n": 1e400}', 1)
    _rejects(bob, raw, "NaN or infinite")


def test_import_nested_past_pythons_recursion_limit_is_refused(bob):
    _rejects(bob, "[" * 100_000 + "]" * 100_000, "nested more than 40 levels deep")
    _rejects(bob, '{"format": "rollback.session", "x": ' + "[" * 50 + "]" * 50 + "}", "nested")


def test_import_of_state_or_metadata_over_the_limits_is_too_large(rich_session, bob, settings):
    settings.ROLLBACK_STATE_MAX_BYTES = 1000
    settings.ROLLBACK_METADATA_MAX_BYTES = 1000
    doc = _doc(rich_session)
    doc["branches"][1]["checkpoints"][0]["session_state"] = {"blob": "x" * 1000}
    match = "session state of checkpoint .* the limit is 1000"
    _rejects(bob, json.dumps(doc), match, ImportTooLarge)
    doc = _doc(rich_session)
    doc["session"]["metadata"] = {"blob": "x" * 1000}
    _rejects(bob, json.dumps(doc), "session metadata is 1011 bytes", ImportTooLarge)


def test_import_beyond_the_sessions_per_user_limit_is_refused(rich_session, bob, settings):
    from sessions_app.errors import SessionLimitReached

    settings.ROLLBACK_MAX_SESSIONS_PER_USER = 1
    raw = json.dumps(_doc(rich_session))
    session_import(owner=bob, raw=raw)
    _rejects(bob, raw, "the most one account may keep is 1", SessionLimitReached)


def test_import_cleans_conversation_text_no_database_can_store(rich_session, bob):
    doc = _doc(rich_session)
    message = doc["branches"][0]["messages"][0]
    message.update(content="a\ud800b\x00c", tool_result="r\udc00")
    copy_ = session_import(owner=bob, raw=json.dumps(doc))
    first = branch_history(current_branch(copy_))[0]
    assert first.content == "a\ufffdbc"
    assert first.tool_result == "r\ufffd"


def test_import_keeps_times_at_the_edges_of_the_range(rich_session, bob):
    doc = _doc(rich_session)
    doc["session"]["created_at"] = "1970-01-01T00:00:00Z"
    doc["branches"][0]["messages"][0]["created_at"] = "1970-01-01T01:00:00+01:00"
    copy_ = session_import(owner=bob, raw=json.dumps(doc))
    assert copy_.created_at.year == 1970
    first = Message.objects.filter(branch__session=copy_).order_by("branch_id", "position")[0]
    assert first.created_at.isoformat() == "1970-01-01T00:00:00+00:00"


# --- Session keys ------------------------------------------------------------------------------

KEY = "agent:shket:per-peer:telegram:12345"


def test_export_carries_the_session_key_and_an_import_keeps_it_when_free(bob, alice):
    from sessions_app.services import session_for_key

    keyed = session_for_key(owner=alice, session_key=KEY)
    doc = session_export(session=keyed)
    assert doc["session"]["session_key"] == KEY
    # Moved to another account (or server): the integration's key goes on finding it there.
    moved = session_import(owner=bob, raw=json.dumps(doc))
    assert moved.session_key == KEY
    assert session_for_key(owner=bob, session_key=KEY).pk == moved.pk


def test_an_import_never_takes_over_a_key_in_use(alice):
    from sessions_app.services import session_for_key

    keyed = session_for_key(owner=alice, session_key=KEY)
    copy_ = session_import(owner=alice, raw=json.dumps(session_export(session=keyed)))
    assert copy_.pk != keyed.pk
    assert copy_.session_key == ""
    assert session_for_key(owner=alice, session_key=KEY).pk == keyed.pk
    assert session_export(session=copy_)["session"]["session_key"] is None


def test_a_document_without_a_session_key_still_imports(rich_session, bob):
    doc = session_export(session=rich_session)
    assert doc["session"].pop("session_key") is None
    assert session_import(owner=bob, raw=json.dumps(doc)).session_key == ""


@pytest.mark.parametrize("key", ["agent:shket:main", "agent:x:everyone:1", 12345, "a\x00"])
def test_an_import_with_a_malformed_session_key_is_refused_and_nothing_written(
    rich_session, bob, key
):
    doc = session_export(session=rich_session)
    doc["session"]["session_key"] = key
    _rejects(bob, json.dumps(doc), "session")
