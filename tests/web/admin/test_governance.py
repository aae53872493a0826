"""Governance in the admin (web.admin.governance): the conversation tree, a restore on the
user's behalf with a required reason, the record; and nothing of users' conversations for staff
without governance.govern_conversations."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from checkpoints.models import Checkpoint
from checkpoints.services import checkpoint_create
from governance.models import AuditRecord
from sessions_app.models import Branch, Session, Turn
from sessions_app.services import session_create
from sessions_app.turns import turn_fail, turn_start
from tests.conftest import external_call, say
from workspace.services import file_write

pytestmark = pytest.mark.django_db

SECRET = "alice-private-7d2e"  # noqa: S105 - a marker in alice's texts, no password
XSS = '<img src=x onerror="alert(1)"><script>alert(2)</script>'

# Every model permission a clerk might hold on users' conversations (Django's own).
VIEW_PERMS = [
    ("sessions_app", "view_session"),
    ("sessions_app", "change_session"),
    ("sessions_app", "view_branch"),
    ("sessions_app", "view_message"),
    ("sessions_app", "view_turn"),
    ("sessions_app", "view_summary"),
    ("checkpoints", "view_checkpoint"),
    ("workspace", "view_fileversion"),
    ("workspace", "view_workspaceblob"),
    ("memories", "view_memory"),
    ("governance", "view_auditrecord"),
    ("accounts", "view_user"),
]
CONVERSATION_LISTS = [
    "admin:sessions_app_session_changelist",
    "admin:sessions_app_branch_changelist",
    "admin:sessions_app_message_changelist",
    "admin:sessions_app_turn_changelist",
    "admin:sessions_app_summary_changelist",
    "admin:checkpoints_checkpoint_changelist",
    "admin:memories_memory_changelist",
    "admin:governance_auditrecord_changelist",
]


def staff(django_user_model, username: str, *, govern: bool):
    user = django_user_model.objects.create_user(username, password="staff-password-1")  # noqa: S106 - a test user's password
    user.is_staff = True
    user.save()
    for app_label, codename in VIEW_PERMS:
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    if govern:
        user.user_permissions.add(Permission.objects.get(codename="govern_conversations"))
    return django_user_model.objects.get(pk=user.pk)


@pytest.fixture
def clerk(django_user_model):
    """Staff with every view permission of the conversation models, but not governance's."""
    return staff(django_user_model, "clerk", govern=False)


@pytest.fixture
def governor(django_user_model):
    return staff(django_user_model, "governor", govern=True)


def current(session) -> Branch:
    return Branch.objects.get(session=session, is_current=True)


@pytest.fixture
def world(alice):
    """Alice's session: a checkpoint after the first exchange, more after it, a failed turn."""
    session = session_create(owner=alice, name=f"{SECRET} session")
    branch = current(session)
    say(branch, f"{SECRET} question", f"answer {XSS}")
    early = checkpoint_create(branch=branch, name=f"early {XSS}")
    say(branch, "second question", f"{SECRET} wrong answer")
    late = checkpoint_create(branch=branch, name="late")
    turn = turn_start(session=session, message=f"{SECRET} third")
    turn_fail(turn=turn, error=f"{SECRET} failure")
    return {"session": session, "branch": current(session), "early": early, "late": late}


def tree_url(session: Session) -> str:
    return reverse("admin:governance_tree", args=[session.pk])


# --- without the permission ---------------------------------------------------------------------


def test_staff_without_the_permission_see_no_conversation_admin_anywhere(client, clerk, world):
    client.force_login(clerk)
    session = world["session"]

    index = client.get(reverse("admin:index"))
    assert index.status_code == 200
    body = index.content.decode()
    for app in ("sessions_app", "checkpoints", "memories", "governance"):
        assert f"/admin/{app}/" not in body
    assert SECRET not in body
    for name in CONVERSATION_LISTS:
        assert client.get(reverse(name)).status_code == 403, name
    assert (
        client.get(reverse("admin:sessions_app_message_changelist"), {"q": "alice"}).status_code
        == 403
    )
    change = reverse("admin:sessions_app_session_change", args=[session.pk])
    assert client.get(change).status_code == 403
    assert client.get(tree_url(session)).status_code == 403
    assert client.get(tree_url(session), {"checkpoint": world["early"].pk}).status_code == 403


def test_staff_without_the_permission_cannot_restore(client, clerk, world):
    client.force_login(clerk)
    branches = Branch.objects.count()
    response = client.post(
        tree_url(world["session"]),
        {"checkpoint": world["early"].pk, "mode": "rewind", "reason": "because"},
    )
    assert response.status_code == 403
    assert AuditRecord.objects.count() == 0
    assert Branch.objects.count() == branches
    assert Checkpoint.objects.filter(pk=world["late"].pk).exists()


def test_the_dashboard_shows_them_no_conversation_text(client, clerk, world):
    client.force_login(clerk)
    response = client.get(reverse("admin:dashboard"))
    assert response.status_code == 200  # the usage figures: counts, no text
    body = response.content.decode()
    assert 'id="dashboard-failed-turns"' not in body
    assert SECRET not in body


def test_users_who_are_not_staff_are_sent_to_log_in(client, alice, world):
    client.force_login(alice)
    response = client.get(tree_url(world["session"]))
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


# --- with it ------------------------------------------------------------------------------------


def test_the_session_page_links_its_tree(client, governor, world):
    client.force_login(governor)
    session = world["session"]
    page = client.get(reverse("admin:sessions_app_session_change", args=[session.pk]))
    assert page.status_code == 200
    assert tree_url(session) in page.content.decode()


def test_the_tree_shows_branches_checkpoints_and_escaped_messages(client, governor, world):
    client.force_login(governor)
    response = client.get(tree_url(world["session"]))
    assert response.status_code == 200
    body = response.content.decode()
    assert body.count('data-testid="gov-branch"') == 1
    assert body.count('data-testid="gov-checkpoint"') == 2
    assert body.count('data-testid="gov-message"') == 5
    assert f"{SECRET} question" in body
    assert "alice" in body  # the owner
    assert XSS not in body
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in body
    assert "<script>alert(2)</script>" not in body
    assert 'data-testid="gov-restore"' not in body  # no checkpoint chosen yet


def test_choosing_a_checkpoint_shows_the_form_with_what_a_rewind_deletes(client, governor, world):
    client.force_login(governor)
    response = client.get(tree_url(world["session"]), {"checkpoint": world["early"].pk})
    assert response.status_code == 200
    preview = response.content.decode().split('data-testid="gov-rewind-preview"')[1]
    assert "3 messages after the checkpoint" in " ".join(preview.split())
    assert "1 later checkpoint" in preview


def test_the_form_says_what_comes_back_and_what_no_restore_can_undo(client, governor, world):
    branch = world["branch"]
    file_write(branch=branch, path="notes.md", content="later")
    external_call(branch, "send_email", "<b>sent</b> to bob")
    client.force_login(governor)

    page = client.get(tree_url(world["session"]), {"checkpoint": world["early"].pk})

    html = page.content.decode()
    outcome = html.split('data-testid="gov-restore-outcome"')[1].split("</div>\n      <fieldset")[0]
    assert "the workspace's files go back" in html
    assert "Files: removes <code>notes.md</code>." in outcome
    assert "No restore can undo what these tools did outside Rollback" in outcome
    assert "<code>send_email</code>" in outcome
    assert "&lt;b&gt;sent&lt;/b&gt;" in outcome  # a tool's result is untrusted text


def test_the_tree_names_branches_as_the_user_sees_them_and_the_trail_says_sessions(
    client, governor, world
):
    client.force_login(governor)
    html = client.get(tree_url(world["session"])).content.decode()
    meta = " ".join(html.split('class="gov-meta"')[1].split("</span>")[0].split())
    assert meta.startswith(">5 messages")  # no database id ("branch 22")
    assert f"branch {world['branch'].pk}" not in html
    trail = " ".join(html.split('class="breadcrumbs"')[1].split("</div>")[0].split())
    assert "Sessions" in trail
    assert "External" not in html


def test_restore_as_branch_on_the_users_behalf_is_recorded(client, governor, alice, world):
    client.force_login(governor)
    session = world["session"]

    response = client.post(
        tree_url(session),
        {"checkpoint": world["early"].pk, "mode": "branch", "reason": " Alice asked by mail "},
    )

    assert response.status_code == 302
    record = AuditRecord.objects.get()
    new = current(session)
    assert response["Location"] == f"{tree_url(session)}?branch={new.pk}"
    assert new.forked_from_id == world["early"].pk
    assert (record.actor, record.user, record.session) == (governor, alice, session)
    assert record.reason == "Alice asked by mail"
    assert record.action == "restore_as_branch"
    shown = client.get(response["Location"]).content.decode()
    assert 'data-testid="gov-record"' in shown
    assert "Alice asked by mail" in shown
    listed = client.get(reverse("admin:governance_auditrecord_changelist")).content.decode()
    assert "Alice asked by mail" in listed
    assert "governor" in listed


def test_rewind_on_the_users_behalf_deletes_what_came_after(client, governor, world):
    client.force_login(governor)
    response = client.post(
        tree_url(world["session"]),
        {"checkpoint": world["early"].pk, "mode": "rewind", "reason": "Remove the leak"},
    )
    assert response.status_code == 302
    record = AuditRecord.objects.get()
    assert (record.action, record.deleted_messages, record.deleted_checkpoints) == ("rewind", 3, 1)
    assert not Checkpoint.objects.filter(pk=world["late"].pk).exists()


@pytest.mark.parametrize(
    "reason", ["", "   ", "x" * 2001, "nul \x00 here"], ids=["empty", "blank", "long", "nul"]
)
def test_a_bad_reason_is_a_form_error_and_nothing_is_written(client, governor, world, reason):
    client.force_login(governor)
    branches = Branch.objects.count()
    response = client.post(
        tree_url(world["session"]),
        {"checkpoint": world["early"].pk, "mode": "rewind", "reason": reason},
    )
    assert response.status_code == 400
    assert 'class="errorlist' in response.content.decode()
    assert AuditRecord.objects.count() == 0
    assert Branch.objects.count() == branches
    assert Checkpoint.objects.filter(pk=world["late"].pk).exists()


def test_another_sessions_checkpoint_is_refused(client, governor, alice, bob, world):
    client.force_login(governor)
    other = session_create(owner=bob, name="bob's")
    say(current(other), "bob's question")
    bobs = checkpoint_create(branch=current(other), name="bob's checkpoint")
    for checkpoint in (bobs.pk, 10**9, "abc"):
        response = client.post(
            tree_url(world["session"]),
            {"checkpoint": checkpoint, "mode": "branch", "reason": "wrong session"},
        )
        assert response.status_code == 400, checkpoint
    assert "That checkpoint is not in this conversation." in response.content.decode()
    assert AuditRecord.objects.count() == 0
    assert Branch.objects.filter(session=other).count() == 1


def test_another_sessions_checkpoint_says_why(client, governor, bob, world):
    client.force_login(governor)
    other = session_create(owner=bob, name="bob's")
    bobs = checkpoint_create(branch=current(other), name="bob's checkpoint")
    response = client.post(
        tree_url(world["session"]),
        {"checkpoint": bobs.pk, "mode": "branch", "reason": "wrong session"},
    )
    assert "That checkpoint is not in this conversation." in response.content.decode()


def test_a_restore_while_a_turn_runs_is_refused_with_a_message(client, governor, world):
    client.force_login(governor)
    turn_start(session=world["session"], message="still going")
    response = client.post(
        tree_url(world["session"]),
        {"checkpoint": world["early"].pk, "mode": "branch", "reason": "now"},
    )
    assert response.status_code == 400
    assert "restore once its turn has ended" in response.content.decode()
    assert AuditRecord.objects.count() == 0
    assert Turn.objects.filter(session=world["session"]).active().count() == 1


def test_an_unknown_session_is_a_404(client, governor):
    client.force_login(governor)
    assert client.get(reverse("admin:governance_tree", args=[10**9])).status_code == 404


def test_a_branch_chosen_shows_its_messages(client, governor, world):
    client.force_login(governor)
    session = world["session"]
    client.post(
        tree_url(session),
        {"checkpoint": world["early"].pk, "mode": "branch", "reason": "look"},
    )
    old = world["branch"]
    body = client.get(tree_url(session), {"branch": old.pk}).content.decode()
    assert f"{SECRET} wrong answer" in body
    new = current(session)
    body = client.get(tree_url(session), {"branch": new.pk}).content.decode()
    assert f"{SECRET} wrong answer" not in body
    assert body.count('data-testid="gov-branch"') == 2


# --- restore scopes on the user's behalf --------------------------------------------------------


def files_of(branch: Branch) -> dict[str, str]:
    from workspace.selectors import workspace_file, workspace_files

    return {f.path: workspace_file(branch, f.path)[1] for f in workspace_files(branch)}


@pytest.fixture
def with_files(world):
    """World, with a file at the early checkpoint changed since and another added."""
    branch = world["branch"]
    file_write(branch=branch, path="plan.md", content="then")
    world["early"] = checkpoint_create(branch=branch, name="with files")
    say(branch, "more", "more answer")
    file_write(branch=branch, path="plan.md", content="now")
    file_write(branch=branch, path="added.txt", content="added")
    return world


def test_the_form_offers_what_to_restore(client, governor, world):
    client.force_login(governor)
    html = client.get(f"{tree_url(world['session'])}?checkpoint={world['early'].pk}").text
    assert 'data-testid="gov-scopes"' in html
    for value in ("all", "conversation", "files"):
        assert f'value="{value}"' in html
    assert "Conversation only" in html
    assert "Files only" in html


def test_files_only_on_the_users_behalf_keeps_the_conversation(client, governor, alice, with_files):
    client.force_login(governor)
    session, branch = with_files["session"], with_files["branch"]
    count = branch.message_count
    response = client.post(
        tree_url(session),
        {
            "checkpoint": with_files["early"].pk,
            "mode": "branch",
            "scope": "files",
            "reason": "Alice asked for her plan back",
        },
    )
    assert response.status_code == 302
    record = AuditRecord.objects.get()
    assert (record.scope, record.branch_ref) == ("files", branch.pk)
    assert current(session).pk == branch.pk
    branch.refresh_from_db()
    assert branch.message_count == count
    assert files_of(branch) == {"plan.md": "then"}
    client.force_login(alice)
    page = client.get(reverse("chat:session", args=[session.pk])).text
    assert "restored the files of checkpoint" in page


def test_conversation_only_on_the_users_behalf_keeps_the_files(client, governor, with_files):
    client.force_login(governor)
    session = with_files["session"]
    response = client.post(
        tree_url(session),
        {
            "checkpoint": with_files["early"].pk,
            "mode": "rewind",
            "scope": "conversation",
            "reason": "Remove the later talk",
        },
    )
    assert response.status_code == 302
    record = AuditRecord.objects.get()
    assert (record.action, record.scope) == ("rewind", "conversation")
    branch = current(session)
    assert branch.message_count == with_files["early"].message_count
    assert files_of(branch) == {"plan.md": "now", "added.txt": "added"}


def test_an_unknown_scope_is_a_form_error_and_nothing_is_written(client, governor, with_files):
    client.force_login(governor)
    branch = with_files["branch"]
    branches = Branch.objects.count()
    response = client.post(
        tree_url(with_files["session"]),
        {
            "checkpoint": with_files["early"].pk,
            "mode": "branch",
            "scope": "everything",
            "reason": "A reason",
        },
    )
    assert response.status_code == 400
    assert 'data-testid="gov-scope-error"' in response.text
    assert AuditRecord.objects.count() == 0
    assert Branch.objects.count() == branches
    assert files_of(branch) == {"plan.md": "now", "added.txt": "added"}
