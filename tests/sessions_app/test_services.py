from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext

from core.errors import InvalidInput, TooLarge
from sessions_app.errors import (
    BranchNotFound,
    RewindOutOfRange,
    SessionLimitReached,
    SessionNotFound,
)
from sessions_app.models import Branch, Message, Session
from sessions_app.selectors import (
    current_branch,
    get_branch_for_user,
    get_session_for_user,
    sessions_for_user,
)
from sessions_app.services import (
    branch_activate,
    branch_fork,
    branch_set_state,
    message_append,
    session_create,
    session_delete,
    session_update,
)
from tests.conftest import say

pytestmark = pytest.mark.django_db


def test_new_session_has_one_current_empty_branch(alice):
    s = session_create(owner=alice, name="  Trip plan  ", metadata={"tags": ["travel"]})
    assert s.session_name == "Trip plan"
    branches = list(Branch.objects.filter(session=s))
    assert len(branches) == 1
    assert branches[0].is_current
    assert branches[0].message_count == 0
    assert branches[0].agno_session_id


def test_session_without_a_name_gets_a_default(alice):
    assert session_create(owner=alice).session_name == "New session"


def test_session_name_over_200_characters_is_refused_and_nothing_written(alice):
    with pytest.raises(InvalidInput, match="limit is 200"):
        session_create(owner=alice, name="x" * 201)
    assert not Session.objects.exists()
    assert not Branch.objects.exists()


def test_session_metadata_must_be_an_object(alice):
    with pytest.raises(InvalidInput, match="JSON object"):
        session_create(owner=alice, name="s", metadata=["a"])


@pytest.mark.parametrize(
    ("metadata", "says"),
    [
        ({"a": "\x00"}, "The session metadata cannot contain NUL characters."),
        ({"a": "\ud800"}, "cannot contain lone surrogates"),
        ({"a": float("nan")}, "NaN or infinite"),
    ],
)
def test_session_metadata_no_database_can_store_is_refused_on_create_and_update(
    alice, session, metadata, says
):
    with pytest.raises(InvalidInput, match=says):
        session_create(owner=alice, name="s", metadata=metadata)
    with pytest.raises(InvalidInput, match=says):
        session_update(session=session, name="Renamed", metadata=metadata)
    assert Session.objects.count() == 1
    session.refresh_from_db()
    assert session.session_name == "Python basics"
    assert session.metadata == {}


def test_session_metadata_over_the_limit_is_too_large(alice, session, settings):
    settings.ROLLBACK_METADATA_MAX_BYTES = 100
    with pytest.raises(TooLarge, match="The session metadata is 108 bytes as JSON"):
        session_create(owner=alice, metadata={"blob": "x" * 97})
    with pytest.raises(TooLarge):
        session_update(session=session, metadata={"blob": "x" * 97})
    assert Session.objects.count() == 1
    session.refresh_from_db()
    assert session.metadata == {}


def test_sessions_per_user_are_limited_archived_ones_included(alice, bob, settings):
    settings.ROLLBACK_MAX_SESSIONS_PER_USER = 2
    first = session_create(owner=alice)
    session_update(session=first, archived=True)
    session_create(owner=alice)
    with pytest.raises(SessionLimitReached, match="You have 2 sessions; the most one account"):
        session_create(owner=alice)
    assert Session.objects.filter(owner=alice).count() == 2
    session_create(owner=bob)
    session_delete(session=first)
    session_create(owner=alice)


def test_the_agents_state_is_cleaned_and_held_to_the_limit(branch, settings):
    settings.ROLLBACK_STATE_MAX_BYTES = 100
    branch_set_state(branch=branch, session_state={"note\x00": "a\ud800"})
    branch.refresh_from_db()
    assert branch.session_state == {"note": "a\ufffd"}
    with pytest.raises(TooLarge, match="The session state is 109 bytes as JSON"):
        branch_set_state(branch=branch, session_state={"blob": "x" * 98})
    deep: dict = {}
    for _ in range(40):
        deep = {"a": deep}
    with pytest.raises(InvalidInput, match="nested more than 32 levels"):
        branch_set_state(branch=branch, session_state=deep)
    branch.refresh_from_db()
    assert branch.session_state == {"note": "a\ufffd"}


def test_a_state_the_branch_already_holds_is_not_written_again(branch):
    branch_set_state(branch=branch, session_state={"kept": 1})
    with CaptureQueriesContext(connection) as same:
        branch_set_state(branch=branch, session_state={"kept": 1})
    with CaptureQueriesContext(connection) as changed:
        branch_set_state(branch=branch, session_state={"kept": 2})

    assert same.captured_queries == []
    assert [q["sql"].split()[0] for q in changed.captured_queries] == ["SELECT", "UPDATE"]
    branch.refresh_from_db()
    assert branch.session_state == {"kept": 2}


def test_a_refused_state_leaves_the_callers_transaction_usable(branch):
    with transaction.atomic():
        with pytest.raises(InvalidInput):
            branch_set_state(branch=branch, session_state=_deep())
        branch_set_state(branch=branch, session_state={"after": True})  # still usable

    branch.refresh_from_db()
    assert branch.session_state == {"after": True}


def _deep() -> dict:
    deep: dict = {}
    for _ in range(40):
        deep = {"a": deep}
    return deep


@pytest.mark.parametrize(
    "chosen", [{"model": "gpt-4-32k"}, {"temperature": 5}], ids=["model", "temperature"]
)
def test_a_session_choosing_a_model_or_temperature_not_allowed_is_refused(alice, settings, chosen):
    settings.AGENT_MODEL, settings.AGENT_ALLOWED_MODELS = "house-model", ["cheap-model"]
    with pytest.raises(InvalidInput, match=r"not allowed|from 0 to 2"):
        session_create(owner=alice, name="s", metadata={"settings": chosen})
    assert not Session.objects.exists()
    session = session_create(owner=alice, name="s", metadata={"settings": {"model": "cheap-model"}})
    with pytest.raises(InvalidInput, match=r"not allowed|from 0 to 2"):
        session_update(session=session, metadata={"settings": chosen})
    session.refresh_from_db()
    assert session.metadata == {"settings": {"model": "cheap-model"}}


def test_rename_and_refuse_an_empty_name(session):
    session_update(session=session, name="Renamed")
    session.refresh_from_db()
    assert session.session_name == "Renamed"
    with pytest.raises(InvalidInput):
        session_update(session=session, name="   ")
    session.refresh_from_db()
    assert session.session_name == "Renamed"


def test_messages_get_consecutive_positions(branch):
    first = message_append(branch=branch, role="user", content="hi")
    second = message_append(
        branch=branch,
        role="tool",
        content="5",
        tool_name="calculate",
        tool_args={"expression": "2+3"},
        tool_result="5",
        tool_call_id="call_1",
    )
    assert (first.position, second.position) == (0, 1)
    branch.refresh_from_db()
    assert branch.message_count == 2
    stored = Message.objects.get(pk=second.pk)
    assert stored.tool_args == {"expression": "2+3"}
    assert stored.tool_call_id == "call_1"


def test_unknown_role_is_refused(branch):
    with pytest.raises(InvalidInput, match="role"):
        message_append(branch=branch, role="robot", content="x")
    assert not Message.objects.exists()


def test_another_users_session_and_branch_are_not_found(session, branch, bob):
    with pytest.raises(SessionNotFound):
        get_session_for_user(bob, session.pk)
    with pytest.raises(BranchNotFound):
        get_branch_for_user(bob, branch.pk)
    assert list(sessions_for_user(bob)) == []


@pytest.mark.parametrize("bad", [None, "", "abc", -1, 0, 2**70, "1; drop table"])
def test_malformed_ids_are_not_found(alice, bad):
    with pytest.raises(SessionNotFound):
        get_session_for_user(alice, bad)


def test_anonymous_user_sees_nothing(session):
    from django.contrib.auth.models import AnonymousUser

    with pytest.raises(SessionNotFound):
        get_session_for_user(AnonymousUser(), session.pk)


def test_activate_moves_the_current_flag(session, branch):
    say(branch, "a", "b")
    other = branch_fork(branch=branch, position=1)
    assert current_branch(session).pk == other.pk
    branch_activate(branch=branch)
    assert current_branch(session).pk == branch.pk
    assert Branch.objects.filter(session=session, is_current=True).count() == 1


def test_the_database_refuses_a_second_current_branch(session, branch):
    with pytest.raises(IntegrityError), transaction.atomic():
        Branch.objects.create(session=session, is_current=True)
    assert Branch.objects.filter(session=session).count() == 1


def test_the_database_refuses_a_duplicate_position(branch):
    message_append(branch=branch, role="user", content="a")
    with pytest.raises(IntegrityError), transaction.atomic():
        Message.objects.create(branch=branch, position=0, role="user", content="again")


def test_fork_outside_the_history_is_refused(branch):
    say(branch, "a", "b")
    with pytest.raises(RewindOutOfRange):
        branch_fork(branch=branch, position=3)
    with pytest.raises(RewindOutOfRange):
        branch_fork(branch=branch, position=-1)
    assert Branch.objects.count() == 1


def test_delete_session_removes_everything(session, branch):
    say(branch, "a", "b")
    branch_fork(branch=branch, position=1)
    session_delete(session=session)
    assert not Branch.objects.exists()
    assert not Message.objects.exists()
    with pytest.raises(SessionNotFound):
        session_delete(session=session)
