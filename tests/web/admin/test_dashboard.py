from __future__ import annotations

import json
import shutil
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import NoReverseMatch, reverse
from django.utils import timezone

from checkpoints.models import Checkpoint
from checkpoints.services import checkpoint_create
from ops.models import AuditRecord
from ops.selectors import USERS_PER_PAGE
from sessions_app.models import Branch, Message, Session
from sessions_app.services import branch_set_state, message_append, session_create
from sessions_app.turns import turn_fail, turn_start
from tests.conftest import say

pytestmark = pytest.mark.django_db

URL = "/admin/dashboard/"
SCRIPT = "<script>alert('x')</script>"
ESCAPED_SCRIPT = "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;"
# Bounds every request of the page: the admin's own (session, user) and one query per read.
MAX_QUERIES = 12


@pytest.fixture
def admin_client_(client, admin_user):
    client.force_login(admin_user)
    return client


def current(session: Session) -> Branch:
    return Branch.objects.get(session=session, is_current=True)


def staff(django_user_model, username: str, *perms: str):
    """A staff member holding only `perms` ("app_label.codename")."""
    user = django_user_model.objects.create_user(username, password="staff-password-1")  # noqa: S106 - a test user's password
    user.is_staff = True
    user.save()
    for perm in perms:
        app_label, codename = perm.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    return user


def failed_turn(session: Session, error: str):
    turn = turn_start(session=session, message="please")
    assert turn_fail(turn=turn, error=error)
    turn.refresh_from_db()
    return turn


def expected_storage(user) -> int:
    """What the dashboard must count for `user`, worked out in Python from the rows: UTF-8 bytes
    of each message's text, tool result and JSON fields, and of each checkpoint's state."""

    def json_text(value) -> int:
        return 0 if value is None else len(json.dumps(value).encode())

    total = 0
    for m in Message.objects.filter(branch__session__owner=user):
        total += len(m.content.encode()) + len(m.tool_result.encode())
        total += json_text(m.tool_args) + json_text(m.tool_calls)
    for cp in Checkpoint.objects.filter(branch__session__owner=user):
        total += json_text(cp.session_state)
    return total


def build(n: int, start: int = 0) -> None:
    """n users, each with a session, messages, a checkpoint and a failed turn."""
    from accounts.models import User

    for i in range(start, start + n):
        owner = User.objects.create(username=f"user{i}")  # no password: hashing is slow
        session = session_create(owner=owner, name=f"session {i}")
        say(current(session), f"question {i}", f"answer {i}")
        checkpoint_create(branch=current(session), name=f"cp {i}")
        failed_turn(session, f"error {i}")
        AuditRecord.objects.create(
            rule="prune_auto_checkpoints", trigger="schedule", status="done", affected=i
        )


def section_ids(body: str) -> set[str]:
    names = ("dashboard-totals", "dashboard-users", "dashboard-failed-turns", "dashboard-audit")
    return {name for name in names if f'id="{name}"' in body}


# --- what the superuser sees --------------------------------------------------------------------


def test_superuser_sees_every_section_with_the_right_numbers(
    admin_client_, admin_user, alice, bob, session, branch
):
    # alice: two sessions; text in several scripts, a tool exchange, a checkpoint with state.
    say(branch, "héllo wörld", "答えは 42")
    message_append(
        branch=branch,
        role="assistant",
        tool_calls=[{"id": "c1", "name": "calculate", "arguments": {"expression": "6*7"}}],
    )
    message_append(
        branch=branch,
        role="tool",
        tool_name="calculate",
        tool_args={"expression": "6*7"},
        tool_result="42",
        tool_call_id="c1",
    )
    branch_set_state(branch=branch, session_state={"mood": "curious", "n": [1, 2, 3]})
    checkpoint_create(branch=current(session), name="after the sum")
    second = session_create(owner=alice, name="Second")
    say(current(second), "more")
    alices_failure = failed_turn(second, "the model server answered HTTP 500")
    # bob: one short session.
    bobs = session_create(owner=bob, name="Bob's")
    say(current(bobs), "hi")
    bobs_failure = failed_turn(bobs, "timed out")
    done = AuditRecord.objects.create(
        rule="prune_auto_checkpoints",
        trigger="schedule",
        schedule="nightly retention",
        status="done",
        affected=7,
        finished_at=timezone.now(),
        started_at=timezone.now() - timedelta(hours=1),
    )
    failed = AuditRecord.objects.create(
        rule="erase_user",
        target=f"user {bob.pk}",
        trigger="admin",
        actor=admin_user,
        status="failed",
        dry_run=True,
        error="database is locked",
    )

    response = admin_client_.get(URL)

    assert response.status_code == 200
    body = response.content.decode()
    assert section_ids(body) == {
        "dashboard-totals",
        "dashboard-users",
        "dashboard-failed-turns",
        "dashboard-audit",
    }
    figures = response.context["usage"]
    totals = figures.totals
    assert (totals.users, totals.sessions, totals.messages, totals.checkpoints) == (
        3,
        3,
        Message.objects.count(),
        1,
    )
    # alice: 4 in the first session, 2 in the second (with the failed turn's question); bob: 2.
    assert Message.objects.count() == 8
    assert totals.database_bytes
    assert totals.database_bytes > 0

    rows = [
        (u.username, u.sessions, u.messages, u.storage_bytes, u.last_activity)
        for u in figures.users
    ]
    alice_sessions = Session.objects.filter(owner=alice)
    assert rows == [
        (
            "alice",
            2,
            6,
            expected_storage(alice),
            max(s.updated_at for s in alice_sessions),
        ),
        ("bob", 1, 2, expected_storage(bob), Session.objects.get(owner=bob).updated_at),
        ("admin", 0, 0, 0, None),
    ]
    # The checkpoint's state counts for alice; "héllo" is counted in bytes, not characters.
    alices = figures.users[0]
    assert alices.checkpoint_bytes == len(json.dumps({"mood": "curious", "n": [1, 2, 3]}))
    assert alices.message_bytes > sum(
        len(m.content) for m in Message.objects.filter(branch__session__owner=alice)
    )
    assert reverse("admin:accounts_user_change", args=[alice.pk]) in body
    assert f'title="{alices.storage_bytes} bytes' in body
    assert figures.has_next is False

    assert [t.pk for t in response.context["failed_turns"]] == [bobs_failure.pk, alices_failure.pk]
    assert "the model server answered HTTP 500" in body
    assert reverse("admin:sessions_app_session_change", args=[second.pk]) in body
    assert reverse("admin:sessions_app_turn_change", args=[alices_failure.pk]) in body

    assert [r.pk for r in response.context["audit_records"]] == [failed.pk, done.pk]
    assert "schedule “nightly retention”" in body
    assert "admin: admin" in body
    assert "Erase a user&#x27;s data" in body
    assert "database is locked" in body


def test_storage_is_counted_in_bytes_of_text_json_and_checkpoint_state(
    admin_client_, alice, branch
):
    message_append(branch=branch, role="user", content="ééé")  # 3 characters, 6 bytes
    message_append(
        branch=branch,
        role="tool",
        tool_name="t",
        tool_args={"a": 1},  # {"a": 1}: 8 bytes
        tool_result="ok",  # 2 bytes
        tool_calls=None,  # nothing
    )
    branch_set_state(branch=branch, session_state={"k": "v"})  # {"k": "v"}: 10 bytes
    checkpoint_create(branch=branch, name="one")
    checkpoint_create(branch=branch, name="two")

    (row,) = [u for u in admin_client_.get(URL).context["usage"].users if u.username == "alice"]

    assert (row.message_bytes, row.checkpoint_bytes) == (6 + 8 + 2, 2 * 10)
    assert row.storage_bytes == 36


def test_users_are_listed_most_storage_first_fifty_to_a_page(admin_client_, django_user_model):
    users = [
        django_user_model.objects.create(username=f"user{i:02}") for i in range(USERS_PER_PAGE + 2)
    ]
    # user00 to user09 have 1 to 10 bytes; the others (and the admin) none.
    for size, user in enumerate(users[:10], start=1):
        say(current(session_create(owner=user)), "x" * size)

    first = admin_client_.get(URL).context["usage"]
    assert len(first.users) == USERS_PER_PAGE
    assert first.has_next
    assert [u.username for u in first.users[:10]] == [f"user{i:02}" for i in range(9, -1, -1)]
    body = admin_client_.get(URL).content.decode()
    assert 'href="?page=2"' in body
    assert reverse("admin:accounts_user_changelist") in body

    second = admin_client_.get(URL, {"page": "2"}).context["usage"]
    # 53 users with the admin: those without storage follow in the order they joined.
    assert [u.username for u in first.users[10:12]] == ["admin", "user10"]
    assert [u.username for u in second.users] == ["user49", "user50", "user51"]
    assert not second.has_next
    assert second.first_rank == USERS_PER_PAGE + 1

    for junk in ("0", "-1", "abc", "99999999999999999999"):
        assert admin_client_.get(URL, {"page": junk}).context["usage"].page == 1


def test_the_usage_figures_are_cached_for_a_minute_and_say_when_they_were_computed(
    admin_client_, alice, branch
):
    say(branch, "one")
    before = admin_client_.get(URL).context["usage"]
    say(branch, "two")

    again = admin_client_.get(URL)
    assert again.context["usage"].totals.messages == before.totals.messages == 1
    assert again.context["usage"].computed_at == before.computed_at
    words = " ".join(again.content.decode().split())
    assert "computed at most once every 60 seconds (these at" in words

    cache.clear()  # a minute later
    assert admin_client_.get(URL).context["usage"].totals.messages == 2


# --- who may see it -----------------------------------------------------------------------------


def test_anonymous_and_non_staff_users_are_sent_to_the_admin_login(client, alice):
    for who in (None, alice):
        if who is not None:
            client.force_login(who)
        response = client.get(URL)
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("admin:login"))


def test_staff_without_view_permissions_is_refused_and_not_offered_the_link(
    client, django_user_model, alice, session
):
    failed_turn(session, "secret failure")
    clerk = staff(django_user_model, "clerk")
    client.force_login(clerk)

    assert client.get(URL).status_code == 403
    assert client.post(URL).status_code == 403
    index = client.get(reverse("admin:index"))
    assert index.status_code == 200
    assert URL not in index.content.decode()


@pytest.mark.parametrize(
    ("perms", "sections"),
    [
        (("ops.view_auditrecord",), {"dashboard-audit"}),
        (
            (
                "sessions_app.view_turn",
                "sessions_app.view_session",
                "accounts.view_user",
                # Failed turns are conversation data: for those who may govern (issue 26).
                "governance.govern_conversations",
            ),
            {"dashboard-failed-turns"},
        ),
        (
            (
                "accounts.view_user",
                "sessions_app.view_session",
                "sessions_app.view_message",
                "checkpoints.view_checkpoint",
                "workspace.view_fileversion",
                "workspace.view_workspaceblob",
            ),
            {"dashboard-totals", "dashboard-users"},
        ),
        # Turns without the users and sessions they belong to: not enough for the failed turns.
        (("sessions_app.view_turn", "ops.view_auditrecord"), {"dashboard-audit"}),
    ],
)
def test_staff_see_only_the_sections_their_view_permissions_cover(
    client, django_user_model, alice, session, perms, sections
):
    say(current(session), "alice's words")
    failed_turn(session, "alice's failure")
    AuditRecord.objects.create(rule="archive_idle_sessions", trigger="command", actor_name="ops")
    client.force_login(staff(django_user_model, "clerk", *perms))

    response = client.get(URL)

    assert response.status_code == 200
    body = response.content.decode()
    assert section_ids(body) == sections
    shows_users = bool(sections & {"dashboard-users", "dashboard-failed-turns"})
    assert ("alice" in body) is shows_users
    assert ("alice&#x27;s failure" in body) is ("dashboard-failed-turns" in sections)
    assert URL in client.get(reverse("admin:index")).content.decode()


# --- what it shows, safely ----------------------------------------------------------------------


def test_user_controlled_text_is_escaped(admin_client_, django_user_model, admin_user):
    mallory = django_user_model.objects.create(username=f"mallory{SCRIPT}")
    session = session_create(owner=mallory, name=f"<img src=x onerror=alert(1)>{SCRIPT}")
    say(current(session), "hello")
    long_error = f"{SCRIPT} " + "details " * 40
    failed_turn(session, long_error)
    short = session_create(owner=mallory, name="short")
    failed_turn(short, f"<b>short</b>{SCRIPT}")
    AuditRecord.objects.create(
        rule="erase_user",
        target=f"user {SCRIPT}",
        trigger="command",
        actor_name=f"op{SCRIPT}",
        status="failed",
        error=f"{SCRIPT} in the audit",
    )

    body = admin_client_.get(URL).content.decode()

    assert SCRIPT not in body
    assert "<img src=x" not in body
    assert "<b>short</b>" not in body
    assert f"mallory{ESCAPED_SCRIPT}" in body
    assert f"&lt;img src=x onerror=alert(1)&gt;{ESCAPED_SCRIPT}" in body
    assert f"&lt;b&gt;short&lt;/b&gt;{ESCAPED_SCRIPT}" in body
    assert f"{ESCAPED_SCRIPT} in the audit" in body
    assert f"op{ESCAPED_SCRIPT}" in body
    # The long error: its start in the summary, the whole of it once opened.
    assert "<details><summary>" in body
    assert body.count(ESCAPED_SCRIPT + " details") == 2
    assert ("details " * 40).strip() in body


def test_query_count_does_not_grow_with_the_number_of_users(
    admin_client_, django_assert_max_num_queries
):
    def cold_get():
        cache.clear()  # the usage figures computed afresh: the page's most expensive request
        with (
            CaptureQueriesContext(connection) as queries,
            django_assert_max_num_queries(MAX_QUERIES),
        ):
            response = admin_client_.get(URL)
        assert response.status_code == 200
        return response, len(queries)

    build(3)
    _, few = cold_get()
    build(30, start=3)
    response, many = cold_get()
    counts = [few, many]
    assert len(response.context["usage"].users) == 33 + 1  # and the admin
    assert len(response.context["failed_turns"]) == 20
    assert counts[0] == counts[1], counts
    # Within the minute the usage figures are not read again.
    with CaptureQueriesContext(connection) as cached:
        admin_client_.get(URL)
    assert len(cached) < counts[1]


def test_the_admin_index_links_the_dashboard(admin_client_):
    body = admin_client_.get(reverse("admin:index")).content.decode()
    assert f'href="{URL}"' in body
    assert reverse("admin:dashboard") == URL


def test_the_audit_section_links_the_audit_records_list_when_it_exists(admin_client_):
    """The audit records' list comes with the ops rules' admin; until it exists the dashboard
    shows its records without the link."""
    try:
        url = reverse("admin:ops_auditrecord_changelist")
    except NoReverseMatch:
        url = None
    body = admin_client_.get(URL).content.decode()
    assert 'id="dashboard-audit"' in body
    assert ("All audit records" in body) is (url is not None)
    if url is not None:
        assert f'href="{url}"' in body


def test_the_admins_index_says_whether_the_sandboxed_shell_works_and_why_not(
    client, admin_user, settings
):
    client.force_login(admin_user)
    body = client.get(reverse("admin:index")).content.decode()
    if shutil.which(settings.SANDBOX_BWRAP):
        assert "Available: run_shell and run_tests are offered" in body
    settings.SANDBOX = "off"
    body = client.get(reverse("admin:index")).content.decode()
    assert "Not available: run_shell and run_tests are not offered" in body
    assert "turned off (SANDBOX=off)" in body
