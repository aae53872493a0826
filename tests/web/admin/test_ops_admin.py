"""The audit records in the admin: listed, filtered, read-only; buttons that run a retention rule
now or dry, for the staff allowed to."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from ops.models import AuditRecord
from sessions_app.models import Session
from sessions_app.services import session_create

pytestmark = pytest.mark.django_db(transaction=True)

LIST = "admin:ops_auditrecord_changelist"
RUN = "admin:ops_auditrecord_run"


@pytest.fixture
def root(admin_user) -> Client:
    client = Client()
    client.force_login(admin_user)
    return client


def test_the_records_are_listed_filtered_and_never_editable(root):
    AuditRecord.objects.create(
        rule="prune_auto_checkpoints", trigger="schedule", schedule="Nightly", status="done"
    )
    AuditRecord.objects.create(
        rule="archive_idle_sessions",
        trigger="command",
        actor_name="<b>ops</b>",
        status="failed",
        error="<script>x</script>",
    )
    page = root.get(reverse(LIST))
    assert page.status_code == 200
    assert b"schedule \xe2\x80\x9cNightly\xe2\x80\x9d" in page.content
    assert b"&lt;script&gt;x&lt;/script&gt;" in page.content
    assert b"<script>x" not in page.content
    assert b"command: &lt;b&gt;ops&lt;/b&gt;" in page.content
    only = root.get(reverse(LIST), {"rule": "archive_idle_sessions"})
    assert b"Nightly" not in only.content
    assert b"ops" in only.content
    failed = root.get(reverse(LIST), {"status": "failed", "trigger": "command"})
    assert b"&lt;b&gt;ops" in failed.content
    record = AuditRecord.objects.first()
    assert root.get(reverse("admin:ops_auditrecord_add")).status_code == 403
    delete = reverse("admin:ops_auditrecord_delete", args=[record.pk])
    assert root.post(delete, {"post": "yes"}).status_code == 403
    assert AuditRecord.objects.count() == 2


def test_run_now_and_dry_run_from_the_list(root, alice, celery_eager):
    idle = session_create(owner=alice, name="old")
    Session.objects.filter(pk=idle.pk).update(updated_at=timezone.now() - timedelta(days=90))
    page = root.get(reverse(LIST))
    assert b"Dry run: archive idle sessions" in page.content
    answer = root.post(reverse(RUN), {"rule": "archive_idle_sessions", "dry_run": "1"}, follow=True)
    assert (
        b"A dry run of \xe2\x80\x9cArchive idle sessions\xe2\x80\x9d is under way" in answer.content
    )
    dry = AuditRecord.objects.get()
    assert (dry.dry_run, dry.trigger, dry.by, dry.affected) == (True, "admin", "admin: admin", 1)
    assert Session.objects.get(pk=idle.pk).archived_at is None
    root.post(reverse(RUN), {"rule": "archive_idle_sessions", "dry_run": "0"})
    assert Session.objects.get(pk=idle.pk).archived_at is not None
    assert AuditRecord.objects.filter(dry_run=False, affected=1, status="done").count() == 1
    unknown = root.post(reverse(RUN), {"rule": "erase_user"}, follow=True)
    assert b"Unknown rule: nothing was run." in unknown.content
    assert AuditRecord.objects.count() == 2
    assert root.get(reverse(RUN)).status_code == 405


def test_staff_without_the_permission_see_no_buttons_and_cannot_run(django_user_model, alice):
    clerk = django_user_model.objects.create_user("clerk", password="x-Password-1", is_staff=True)  # noqa: S106 - a test user's password
    clerk.user_permissions.add(
        Permission.objects.get(content_type__app_label="ops", codename="view_auditrecord")
    )
    client = Client()
    client.force_login(clerk)
    page = client.get(reverse(LIST))
    assert page.status_code == 200
    assert b"Run now" not in page.content
    assert client.post(reverse(RUN), {"rule": "archive_idle_sessions"}).status_code == 403
    assert not AuditRecord.objects.exists()
