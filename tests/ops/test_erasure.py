"""Erasing a user on request (the admin action and the command): afterwards no table holds a row
of theirs, or any text they wrote or were called, on SQLite and on PostgreSQL; another user's data
is untouched."""

from __future__ import annotations

from io import StringIO

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client
from django.urls import reverse

from accounts.services import apikey_create
from checkpoints.models import Checkpoint
from checkpoints.services import checkpoint_create, checkpoint_restore
from memories.models import Memory
from memories.services import memory_create
from ops.models import AuditRecord
from sessions_app.models import Branch, LedgerEntry, Message, Session, Summary, Turn
from sessions_app.selectors import sessions_listed
from sessions_app.services import message_append, session_create, summary_store
from sessions_app.turns import turn_fail, turn_start

pytestmark = pytest.mark.django_db(transaction=True)

User = get_user_model()

MARK = "zqxmarkq"  # in every text of the erased user's; found nowhere afterwards


def world_of(username: str, mark: str) -> dict:
    """A user with one of everything: sessions, branches (one restored), messages, a summary,
    checkpoints (named and automatic), turns, a memory, an API key, a browser login, and the
    admin's log entries about them and their session; every text carries `mark`."""
    user = User.objects.create_user(
        username,
        email=f"{username}@{mark}.example",
        password="pw-Secret-123",  # noqa: S106 - a test user's password
    )
    session = session_create(owner=user, name=f"{mark} trip plan")
    branch = Branch.objects.get(session=session, is_current=True)
    message_append(branch=branch, role="user", content=f"my {mark} secret")
    message_append(branch=branch, role="assistant", content=f"kept {mark}")
    summary_store(branch=branch, end=2, content=f"{mark} summary", model="m")
    named = checkpoint_create(branch=branch, name=f"{mark} start", description=mark)
    checkpoint_create(branch=branch, name=f"after-{mark}", is_auto=True)
    checkpoint_restore(checkpoint=named, mode="branch")
    turn = turn_start(session=session, message=f"{mark} again")
    turn_fail(turn=turn, error=f"{mark} failure")
    LedgerEntry.objects.create(  # an external call of a turn's (its row: turns need a model)
        session=session,
        user=user,
        branch_ref=branch.pk,
        turn_ref=turn.pk,
        position=2,
        tool_name="send_message",
        tool_args={"text": f"{mark} note"},
        tool_result=f"sent {mark}",
        status=LedgerEntry.Status.RAN,
    )
    session_create(owner=user, name=f"second {mark}")
    apikey_create(user=user, name=f"{mark} laptop")
    memory_create(
        user=user,
        key=f"{mark}-key",
        category="Project",
        l0_abstract=f"{mark} line",
        l1_overview=f"{mark} overview",
        l2_details=f"{mark} details",
    )
    browser = Client()
    browser.login(username=username, password="pw-Secret-123")  # noqa: S106 - a test user's password
    browser.get(reverse("chat:home"))
    return {"user": user, "session": session, "browser": browser}


def admin_client() -> Client:
    admin = User.objects.create_superuser("root", password="root-Password-1")  # noqa: S106 - a test user's password
    client = Client()
    client.force_login(admin)
    return client


def tables_holding(text: str) -> dict[str, int]:
    """Every table of the database (the app's, Django's, django-celery-beat's, the search
    index's) with rows in which any column, read as text, holds `text`."""
    found = {}
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            columns = [
                c.name for c in connection.introspection.get_table_description(cursor, table)
            ]
            if not columns:
                continue
            quote = connection.ops.quote_name
            if connection.vendor == "sqlite":
                # Bytes, so a blob is searched past a NUL (FTS5 keeps its index in blobs).
                test, value = "instr(CAST({} AS BLOB), CAST(%s AS BLOB)) > 0", text
            else:
                test, value = "CAST({} AS TEXT) LIKE %s", f"%{text}%"
            where = " OR ".join(test.format(quote(c)) for c in columns)
            cursor.execute(
                f"SELECT COUNT(*) FROM {quote(table)} WHERE {where}",  # noqa: S608 - quoted names; the value is a parameter
                [value] * len(columns),
            )
            count = cursor.fetchone()[0]
            if count:
                found[table] = count
    return found


def rows_pointing_at(user_id: int) -> dict[str, int]:
    """Rows of any model (installed apps included) whose foreign key names the user."""
    found = {}
    for model in apps.get_models():
        for field in model._meta.get_fields():
            if field.many_to_one and field.related_model is User and field.concrete:
                count = model._base_manager.filter(**{field.name: user_id}).count()
                if count:
                    found[f"{model._meta.label}.{field.name}"] = count
    return found


def holdings_of(user) -> tuple[int, ...]:
    return (
        Session.objects.filter(owner=user).count(),
        Branch.objects.filter(session__owner=user).count(),
        Message.objects.filter(branch__session__owner=user).count(),
        Summary.objects.filter(last_message__branch__session__owner=user).count(),
        Checkpoint.objects.filter(branch__session__owner=user).count(),
        Turn.objects.filter(session__owner=user).count(),
        LedgerEntry.objects.filter(session__owner=user).count(),
        Memory.objects.filter(user=user).count(),
    )


def test_the_admin_erases_a_user_leaving_nothing_of_theirs_in_any_table():
    alice = world_of("alice-erase", MARK)
    bob = world_of("bob-stays", "bobmarkq")
    admin = admin_client()
    # The admin edits alice's session: its log entry repeats the session's name.
    url = reverse("admin:sessions_app_session_change", args=[alice["session"].pk])
    page = admin.get(url)
    assert page.status_code == 200
    admin.post(
        url,
        {
            "session_name": f"{MARK} renamed",
            "metadata": "{}",
            "archived_at_0": "",
            "archived_at_1": "",
            "branches-TOTAL_FORMS": "0",
            "branches-INITIAL_FORMS": "0",
        },
    )
    # The probe finds her text before, the search index's own storage included.
    before = tables_holding(MARK)
    assert before["sessions_app_message"] == 3
    assert before["memories_memory"] == 1
    assert before["sessions_app_ledgerentry"] == 1
    if connection.vendor == "sqlite":
        assert before["sessions_app_message_fts_data"] >= 1
        assert before["memories_memory_fts_data"] >= 1
    bob_before = holdings_of(bob["user"])
    user_id = alice["user"].pk

    changelist = reverse("admin:accounts_user_changelist")
    action = {"action": "erase", "_selected_action": [user_id]}
    confirm = admin.post(changelist, action)
    assert confirm.status_code == 200
    assert b"Erase these users completely?" in confirm.content
    assert b"messages: 3" in confirm.content
    assert b"alice-erase" in confirm.content
    assert User.objects.filter(pk=user_id).exists()  # asking erased nothing

    done = admin.post(changelist, {**action, "confirmed": "yes"}, follow=True)
    assert f"User {user_id} is erased".encode() in done.content

    assert tables_holding(MARK) == {}
    assert tables_holding("alice-erase") == {}
    assert rows_pointing_at(user_id) == {}
    assert not User.objects.filter(pk=user_id).exists()
    # Her browser is signed out; bob's data is all there.
    assert "/login/" in alice["browser"].get(reverse("chat:home"))["Location"]
    assert holdings_of(bob["user"]) == bob_before
    found = sessions_listed(bob["user"], query="bobmarkq secret")
    assert list(found) == [bob["session"]]  # the search index still serves everyone else
    assert "/login/" not in bob["browser"].get(reverse("chat:home")).get("Location", "")
    record = AuditRecord.objects.get(rule=AuditRecord.Rule.ERASE_USER)
    assert (record.status, record.target, record.by) == ("done", f"user {user_id}", "admin: root")
    assert record.details["rows"]["sessions"] == 2
    assert record.details["rows"]["messages"] == 3
    assert record.details["rows"]["effects"] == 1
    assert record.details["rows"]["browser_logins"] == 1
    assert record.details["rows"]["admin_log_entries"] >= 1


def test_an_admin_cannot_erase_themselves():
    admin = admin_client()
    root = User.objects.get(username="root")
    changelist = reverse("admin:accounts_user_changelist")
    answer = admin.post(
        changelist,
        {"action": "erase", "_selected_action": [root.pk], "confirmed": "yes"},
        follow=True,
    )
    assert b"You cannot erase yourself" in answer.content
    assert User.objects.filter(pk=root.pk).exists()


def test_the_command_erases_and_its_dry_run_only_counts():
    alice = world_of("alice-cmd", MARK)
    user_id = alice["user"].pk
    before = holdings_of(alice["user"])
    out = StringIO()
    call_command("erase_user", "alice-cmd", "--dry-run", stdout=out)
    assert "Erase a user's data (dry run): would change" in out.getvalue()
    assert '"messages": 3' in out.getvalue()
    assert holdings_of(alice["user"]) == before

    call_command("erase_user", "ALICE-CMD", "--noinput", stdout=StringIO())
    assert tables_holding(MARK) == {}
    assert rows_pointing_at(user_id) == {}
    records = AuditRecord.objects.filter(rule="erase_user").order_by("started_at")
    assert [(r.dry_run, r.trigger, r.status) for r in records] == [
        (True, "command", "done"),
        (False, "command", "done"),
    ]


def test_the_command_refuses_an_unknown_user_and_an_unconfirmed_erasure(monkeypatch):
    world_of("alice-keep", MARK)
    with pytest.raises(CommandError, match="There is no user 'nobody'"):
        call_command("erase_user", "nobody")
    monkeypatch.setattr("builtins.input", lambda prompt: "alice")
    with pytest.raises(CommandError, match="Not confirmed: nothing was erased"):
        call_command("erase_user", "alice-keep")
    assert User.objects.filter(username="alice-keep").exists()
    assert not AuditRecord.objects.exists()


def test_an_erased_staff_users_name_leaves_the_audit_records():
    staff = User.objects.create_user("opsperson", password="x-Password-123", is_staff=True)  # noqa: S106 - a test user's password
    AuditRecord.objects.create(
        rule=AuditRecord.Rule.ARCHIVE_IDLE_SESSIONS,
        trigger="admin",
        actor=staff,
        actor_name="opsperson",
        status="done",
    )
    call_command("erase_user", "opsperson", "--noinput", stdout=StringIO())
    assert tables_holding("opsperson") == {}
    assert AuditRecord.objects.filter(rule="archive_idle_sessions").get().by == "admin"
