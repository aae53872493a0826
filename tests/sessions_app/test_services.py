from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from sessions_app.errors import (
    BranchNotFound,
    InvalidInput,
    RewindOutOfRange,
    SessionNotFound,
)
from sessions_app.models import ExternalSession, InternalSession, Message
from sessions_app.selectors import (
    current_branch,
    get_branch_for_user,
    get_session_for_user,
    sessions_for_user,
)
from sessions_app.services import (
    branch_activate,
    branch_fork,
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
    branches = list(InternalSession.objects.filter(session=s))
    assert len(branches) == 1
    assert branches[0].is_current and branches[0].message_count == 0
    assert branches[0].agno_session_id


def test_session_without_a_name_gets_a_default(alice):
    assert session_create(owner=alice).session_name == "New session"


def test_session_name_over_200_characters_is_refused_and_nothing_written(alice):
    with pytest.raises(InvalidInput, match="limit is 200"):
        session_create(owner=alice, name="x" * 201)
    assert not ExternalSession.objects.exists()
    assert not InternalSession.objects.exists()


def test_session_metadata_must_be_an_object(alice):
    with pytest.raises(InvalidInput, match="JSON object"):
        session_create(owner=alice, name="s", metadata=["a"])


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
    assert stored.tool_args == {"expression": "2+3"} and stored.tool_call_id == "call_1"


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
    assert InternalSession.objects.filter(session=session, is_current=True).count() == 1


def test_the_database_refuses_a_second_current_branch(session, branch):
    with pytest.raises(IntegrityError), transaction.atomic():
        InternalSession.objects.create(session=session, is_current=True)
    assert InternalSession.objects.filter(session=session).count() == 1


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
    assert InternalSession.objects.count() == 1


def test_delete_session_removes_everything(session, branch):
    say(branch, "a", "b")
    branch_fork(branch=branch, position=1)
    session_delete(session=session)
    assert not InternalSession.objects.exists()
    assert not Message.objects.exists()
    with pytest.raises(SessionNotFound):
        session_delete(session=session)
