"""The effects ledger in the admin (web.admin.ledger): read-only, listed per session from the
session's page, filtered by status, tool and user, searched by tool name, its texts escaped and
bounded, shown only to staff who may govern conversations, in one query per list whatever its
length."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from checkpoints.services import checkpoint_create, checkpoint_restore
from sessions_app.models import LEDGER_TEXT_LIMIT, Branch, LedgerEntry, Session
from sessions_app.services import session_create
from tests.conftest import say

pytestmark = pytest.mark.django_db

LIST = reverse("admin:sessions_app_ledgerentry_changelist")
SCRIPT = "<script>alert('ledger')</script>"


def change_url(entry: LedgerEntry) -> str:
    return reverse("admin:sessions_app_ledgerentry_change", args=[entry.pk])


def entry(session: Session, tool: str, status: str = "ran", **fields) -> LedgerEntry:
    branch = Branch.objects.get(session=session, is_current=True)
    values = {
        "branch_ref": branch.pk,
        "position": branch.message_count,
        "tool_args": {"to": "bob"},
        "tool_result": f"{tool} done",
        **fields,
    }
    return LedgerEntry.objects.create(
        session=session, user=session.owner, tool_name=tool, status=status, **values
    )


@pytest.fixture
def admin_client_(client, admin_user):
    client.force_login(admin_user)
    return client


@pytest.fixture
def ledgers(alice, bob):
    """Alice's session with three calls, another of hers with one, and bob's with one."""
    mine = session_create(owner=alice, name="alice's work")
    entry(mine, "notes__add_note")
    entry(mine, "time__convert_time", "failed")
    entry(mine, "write_remote", "may_have_run")
    other = session_create(owner=alice, name="alice's other")
    entry(other, "notes__add_note")
    theirs = session_create(owner=bob, name="bob's")
    entry(theirs, "send_message")
    return mine, other, theirs


def listed(response) -> list[str]:
    assert response.status_code == 200
    return sorted(e.tool_name for e in response.context["cl"].result_list)


def test_the_session_page_links_to_its_entries_and_they_are_listed_alone(admin_client_, ledgers):
    mine = ledgers[0]
    page = admin_client_.get(reverse("admin:sessions_app_session_change", args=[mine.pk]))
    assert page.status_code == 200
    link = re.search(
        r'<a href="([^"]+)" data-testid="effects-ledger-link">3 entries</a>', page.text
    )
    assert link is not None
    assert link.group(1) == f"{LIST}?session={mine.pk}"
    response = admin_client_.get(link.group(1))
    assert listed(response) == ["notes__add_note", "time__convert_time", "write_remote"]
    assert "alice&#x27;s work" in response.text  # the filter names the session chosen


def test_entries_are_filtered_by_status_tool_and_user(admin_client_, ledgers, alice, bob):
    assert listed(admin_client_.get(LIST, {"status": "failed"})) == ["time__convert_time"]
    assert listed(admin_client_.get(LIST, {"status": "may_have_run"})) == ["write_remote"]
    assert listed(admin_client_.get(LIST, {"tool": "notes__add_note"})) == [
        "notes__add_note",
        "notes__add_note",
    ]
    assert listed(admin_client_.get(LIST, {"user": bob.pk})) == ["send_message"]
    assert len(listed(admin_client_.get(LIST, {"user": alice.pk, "status": "ran"}))) == 2
    # With a session chosen, the tool filter offers that session's tools; without one, only the
    # tool chosen (no scan of the whole ledger for its names).
    assert tool_choices(admin_client_.get(LIST, {"session": ledgers[0].pk})) == [
        "notes__add_note",
        "time__convert_time",
        "write_remote",
    ]
    assert tool_choices(admin_client_.get(LIST, {"tool": "send_message"})) == ["send_message"]
    assert tool_choices(admin_client_.get(LIST)) == []


def tool_choices(response) -> list[str]:
    specs = response.context["cl"].filter_specs
    tools = [f for f in specs if getattr(f, "parameter_name", "") == "tool"]  # none: not shown
    return [value for f in tools for value, _ in f.lookup_choices]


def test_entries_are_searched_by_tool_name(admin_client_, ledgers):
    assert listed(admin_client_.get(LIST, {"q": "convert"})) == ["time__convert_time"]
    assert listed(admin_client_.get(LIST, {"q": "NOTES__"})) == [
        "notes__add_note",
        "notes__add_note",
    ]
    assert listed(admin_client_.get(LIST, {"q": "nothing like it"})) == []


@pytest.mark.parametrize("query", [{"user": "x"}, {"session": "-1"}, {"status": "maybe"}])
def test_a_filter_it_cannot_read_lists_nothing_and_fails_nothing(admin_client_, ledgers, query):
    response = admin_client_.get(LIST, query)
    assert response.status_code in (200, 302)
    if response.status_code == 200:
        assert listed(response) == []


def test_arguments_and_results_are_escaped_and_bounded(admin_client_, session):
    long_result = SCRIPT + "r" * (2 * LEDGER_TEXT_LIMIT)
    made = entry(session, "send_message", tool_args={"text": SCRIPT}, tool_result=long_result)
    for url in (LIST, change_url(made)):
        body = admin_client_.get(url).content.decode()
        assert SCRIPT not in body
        assert "&lt;script&gt;alert(&#x27;ledger&#x27;)&lt;/script&gt;" in body
        assert "r" * (LEDGER_TEXT_LIMIT + 1) not in body
    listed_page = admin_client_.get(LIST).content.decode()
    assert "r" * 81 not in listed_page  # a preview in the list


def test_nothing_in_the_admin_adds_changes_or_deletes_an_entry(admin_client_, session):
    made = entry(session, "send_message")
    assert admin_client_.get(reverse("admin:sessions_app_ledgerentry_add")).status_code == 403
    delete = reverse("admin:sessions_app_ledgerentry_delete", args=[made.pk])
    assert admin_client_.get(delete).status_code == 403
    assert admin_client_.post(delete, {"post": "yes"}).status_code == 403
    page = admin_client_.get(change_url(made))
    assert page.status_code == 200
    assert 'name="_save"' not in page.text
    posted = admin_client_.post(change_url(made), {"tool_name": "changed", "status": "failed"})
    assert posted.status_code == 403
    bulk = admin_client_.post(
        LIST, {"action": "delete_selected", "_selected_action": [made.pk], "post": "yes"}
    )
    assert bulk.status_code in (200, 302)
    made.refresh_from_db()
    assert (made.tool_name, made.status) == ("send_message", "ran")


def test_the_change_page_says_what_became_of_the_branch_and_message(admin_client_, session):
    branch = Branch.objects.get(session=session, is_current=True)
    say(branch, "hello", "hi")
    start = checkpoint_create(branch=branch, name="start")
    say(branch, "more", "sure")
    later = checkpoint_create(branch=branch, name="later")
    side = checkpoint_restore(checkpoint=later).branch
    gone = entry(session, "send_message", branch_ref=side.pk, message_ref=10**9)
    checkpoint_restore(checkpoint=start, mode="rewind")  # deletes the side branch
    kept = entry(session, "send_message")
    body = admin_client_.get(change_url(gone)).content.decode()
    assert f"branch {side.pk} (deleted since)" in body
    assert f"message {10**9} (deleted since)" in body
    body = admin_client_.get(change_url(kept)).content.decode()
    assert reverse("admin:sessions_app_branch_change", args=[branch.pk]) in body


def test_staff_need_the_view_and_the_govern_permissions(client, django_user_model, ledgers):
    made = LedgerEntry.objects.filter(session=ledgers[0]).first()
    staff = django_user_model.objects.create(username="clerk", is_staff=True)
    client.force_login(staff)
    assert client.get(LIST).status_code == 403
    assert client.get(change_url(made)).status_code == 403
    staff.user_permissions.add(Permission.objects.get(codename="view_ledgerentry"))
    client.force_login(django_user_model.objects.get(pk=staff.pk))
    assert client.get(LIST).status_code == 403  # users' conversations: governors only
    staff.user_permissions.add(Permission.objects.get(codename="govern_conversations"))
    client.force_login(django_user_model.objects.get(pk=staff.pk))
    assert len(listed(client.get(LIST))) == 5
    assert client.get(change_url(made)).status_code == 200


@pytest.mark.parametrize("user", ["alice", "bob"])
def test_a_user_who_is_not_staff_is_sent_to_the_admin_login(client, ledgers, request, user):
    """Bob cannot read alice's ledger in the admin, nor alice her own: the admin is staff's."""
    client.force_login(request.getfixturevalue(user))
    made = LedgerEntry.objects.filter(session=ledgers[0]).first()
    for url in (LIST, f"{LIST}?session={ledgers[0].pk}", change_url(made)):
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("admin:login"))


def test_the_list_costs_the_same_queries_for_3_and_30_entries(admin_client_, alice):
    session = session_create(owner=alice, name="busy")
    for i in range(3):
        entry(session, f"tool_{i}")
    admin_client_.get(LIST)  # warm up
    with CaptureQueriesContext(connection) as few:
        admin_client_.get(LIST, {"session": session.pk})
    for i in range(3, 30):
        entry(session, f"tool_{i}")
    with CaptureQueriesContext(connection) as many:
        response = admin_client_.get(LIST, {"session": session.pk})
    assert len(response.context["cl"].result_list) == 30
    assert len(many) == len(few)


def test_deleting_a_session_says_its_entries_go_with_it_and_takes_them(admin_client_, ledgers):
    mine, other, _ = ledgers
    url = reverse("admin:sessions_app_session_delete", args=[mine.pk])
    response = admin_client_.get(url)
    assert response.status_code == 200
    assert dict(response.context["model_count"])["effects ledger entries"] == 3
    assert admin_client_.post(url, {"post": "yes"}).status_code == 302
    assert not LedgerEntry.objects.filter(session_id=mine.pk).exists()
    assert LedgerEntry.objects.filter(session=other).count() == 1
