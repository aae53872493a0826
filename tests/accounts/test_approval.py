"""ACCOUNTS_PENDING (issue 40, item 2): a new account waits for an administrator's approval; until
then it signs in nowhere (its right password shows a clear page, a wrong one says nothing of it),
and no door lets it in (an API key, the terminal `chat`, the admin's login). Approval and refusal
are the admin's actions, in bulk too, each an audit record; the user is told at their next
sign-in. The first administrator never waits."""

from __future__ import annotations

import html

import pytest
from django.contrib.admin import helpers
from django.contrib.auth import SESSION_KEY
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from accounts.models import User
from accounts.services import apikey_create, user_signup
from ops.approvals import accounts_approve, accounts_refuse
from ops.audit import Who
from ops.models import AuditRecord

pytestmark = pytest.mark.django_db

PASSWORD = "correct-horse-battery-9"  # noqa: S105 - a test user's password
WAITING = "Your account is waiting for an administrator's approval."
REFUSED = "An administrator refused this account."
APPROVED = "An administrator approved your account: welcome."


@pytest.fixture
def pending(settings):
    settings.ACCOUNTS_PENDING = True


def sign_up(client: Client, username: str):
    data = {"username": username, "password": PASSWORD, "password2": PASSWORD}
    return client.post(reverse("accounts:signup"), data)


def sign_in(client: Client, username: str, password: str = PASSWORD):
    data = {"username": username, "password": password}
    return client.post(reverse("accounts:login"), data, follow=True)


def text(response) -> str:
    return html.unescape(" ".join(response.content.decode().split()))


def test_the_first_account_is_the_administrator_and_the_next_ones_wait(client, pending):
    first = sign_up(client, "root")
    assert first.status_code == 302
    assert User.objects.get(username="root").approval == User.Approval.APPROVED
    client.logout()

    answer = sign_up(client, "ada")
    assert answer.status_code == 200
    assert WAITING in text(answer)
    assert 'data-testid="account-waiting"' in answer.content.decode()
    ada = User.objects.get(username="ada")
    assert (ada.approval, ada.is_active) == (User.Approval.PENDING, False)
    assert SESSION_KEY not in client.session
    assert client.get(reverse("chat:home")).status_code == 302  # to the login page


def test_a_waiting_account_sees_why_only_with_its_own_password(client, pending, admin_user):
    sign_up(client, "ada")
    answer = sign_in(client, "ada")
    assert answer.status_code == 403
    assert WAITING in text(answer)
    assert SESSION_KEY not in client.session
    wrong = sign_in(client, "ada", "not-the-password-1")
    assert wrong.status_code == 200
    assert WAITING not in text(wrong)
    assert "approval" not in text(wrong).lower()
    # The admin's login says it too, and lets nobody in.
    admin = client.post(reverse("admin:login"), {"username": "ada", "password": PASSWORD})
    assert WAITING in text(admin)
    assert SESSION_KEY not in client.session


def test_no_door_lets_a_waiting_account_in(client, pending, admin_user):
    sign_up(client, "ada")
    ada = User.objects.get(username="ada")
    _, secret = apikey_create(user=ada, name="made by an operator")
    api = client.get("/api/v1/sessions/", HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert api.status_code == 401
    with pytest.raises(CommandError, match="waits for an administrator's approval"):
        call_command("chat", "--user", "ada")
    # Once approved, the same key works.
    accounts_approve(user_ids=[ada.pk], who=Who.admin(admin_user))
    assert client.get("/api/v1/sessions/", HTTP_AUTHORIZATION=f"Bearer {secret}").status_code == 200


def test_approval_in_bulk_is_recorded_and_told_once_at_the_next_sign_in(
    client, pending, admin_user
):
    for name in ("ada", "bea", "cyd"):
        sign_up(client, name)
    ids = list(User.objects.filter(username__in=["ada", "bea"]).values_list("pk", flat=True))
    staff = Client()
    staff.force_login(admin_user)
    action = {"action": "approve", helpers.ACTION_CHECKBOX_NAME: [*ids, admin_user.pk]}
    answer = staff.post(reverse("admin:accounts_user_changelist"), action, follow=True)
    assert "2 accounts approved; 1 left as it was (already decided)" in text(answer)

    record = AuditRecord.objects.get(rule=AuditRecord.Rule.APPROVE_ACCOUNTS)
    assert (record.status, record.affected, record.actor) == ("done", 2, admin_user)
    assert record.details["users"]["items"] == ["ada", "bea"]
    assert User.objects.get(username="cyd").approval == User.Approval.PENDING

    first = sign_in(client, "ada")
    assert first.redirect_chain[-1][0] == reverse("chat:home")
    assert APPROVED in text(first)
    client.logout()
    assert APPROVED not in text(sign_in(client, "ada"))


def test_refusal_is_recorded_said_at_sign_in_and_leaves_approved_accounts_alone(
    client, pending, admin_user, alice
):
    sign_up(client, "ada")
    ada = User.objects.get(username="ada")
    record = accounts_refuse(user_ids=[ada.pk, alice.pk], who=Who.admin(admin_user))
    assert (record.rule, record.affected, record.details["left"]) == ("refuse_accounts", 1, 1)
    assert User.objects.get(pk=alice.pk).approval == User.Approval.APPROVED
    ada.refresh_from_db()
    assert (ada.approval, ada.is_active) == (User.Approval.REFUSED, False)
    answer = sign_in(client, "ada")
    assert answer.status_code == 403
    assert REFUSED in text(answer)
    # An administrator may still change their mind.
    accounts_approve(user_ids=[ada.pk], who=Who.admin(admin_user))
    assert sign_in(client, "ada").redirect_chain[-1][0] == reverse("chat:home")


def test_turning_a_waiting_account_on_by_hand_is_an_approval_on_the_record(
    client, pending, admin_user
):
    sign_up(client, "ada")
    ada = User.objects.get(username="ada")
    staff = Client()
    staff.force_login(admin_user)
    form = staff.get(reverse("admin:accounts_user_change", args=[ada.pk]))
    assert "Waiting for approval" in text(form)
    data = {
        "username": "ada",
        "is_active": "on",
        "metadata": "{}",
        "date_joined_0": "2026-12-01",
        "date_joined_1": "10:00:00",
    }
    answer = staff.post(reverse("admin:accounts_user_change", args=[ada.pk]), data)
    assert answer.status_code == 302, text(answer)[:2000]
    ada.refresh_from_db()
    assert (ada.approval, ada.is_active) == (User.Approval.APPROVED, True)
    assert AuditRecord.objects.filter(rule=AuditRecord.Rule.APPROVE_ACCOUNTS).count() == 1


def test_without_the_setting_accounts_are_approved_at_once(db):
    user_signup(username="root", password=PASSWORD)
    ada = user_signup(username="ada", password=PASSWORD)
    assert (ada.approval, ada.is_active) == (User.Approval.APPROVED, True)
