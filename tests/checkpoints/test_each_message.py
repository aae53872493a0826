"""A checkpoint before each message a user sends, when their session or their profile asks for
one (issue 39, item 16): at the position before the message, named after its first words,
automatic (the retention job cleans it like the others), and set from the session's dialog, the
profile and the API."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from accounts.services import preferences_update
from checkpoints.each_message import message_checkpoint_name
from checkpoints.models import Checkpoint
from checkpoints.services import checkpoint_restore
from ops.audit import Who
from ops.retention import prune_auto_checkpoints
from sessions_app.models import Turn
from sessions_app.selectors import branch_history
from sessions_app.services import session_settings_update
from sessions_app.turns import turn_start
from tests.conftest import say

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


def test_none_is_taken_by_default(session, branch):
    turn_start(session=session, message="hello there")
    assert not Checkpoint.objects.exists()


def test_the_sessions_setting_takes_one_just_before_the_message(session, branch):
    say(branch, "first", "answer")
    session_settings_update(session=session, checkpoint_each_message=True)

    turn = turn_start(session=session, message="  Please   rename the files in src and the docs  ")

    checkpoint = Checkpoint.objects.get()
    assert checkpoint.checkpoint_name == "Before: Please rename the files in src and the…"
    assert checkpoint.message_count == turn.user_message_position == 2
    assert (checkpoint.is_auto, checkpoint.metadata) == (True, {"trigger": "message"})
    # Going back to it gives the conversation as it was before the message.
    restored = checkpoint_restore(checkpoint=checkpoint, mode="branch")
    assert [m.content for m in branch_history(restored.branch)] == ["first", "answer"]


def test_the_profile_decides_where_the_session_says_nothing_and_the_session_wins(
    alice, session, branch
):
    preferences_update(
        user=alice, auto_checkpoint=True, theme="system", checkpoint_each_message=True
    )
    session.owner.refresh_from_db()
    turn_start(session=session, message="one")
    assert Checkpoint.objects.count() == 1

    session_settings_update(session=session, checkpoint_each_message=False)
    Turn.objects.update(status="done")  # so that another may start
    turn_start(session=session, message="two")
    assert Checkpoint.objects.count() == 1


def test_a_long_word_is_cut_too():
    assert message_checkpoint_name("x" * 100) == "Before: " + "x" * 40 + "…"
    assert message_checkpoint_name("short one") == "Before: short one"


def test_the_retention_job_cleans_them_like_other_automatic_checkpoints(session, branch, settings):
    session_settings_update(session=session, checkpoint_each_message=True)
    turn_start(session=session, message="old message")
    Checkpoint.objects.update(created_at=timezone.now() - timedelta(days=400))
    settings.RETENTION_AUTO_CHECKPOINT_DAYS = 30
    settings.RETENTION_KEEP_LATEST_AUTO = 0

    prune_auto_checkpoints(who=Who.command("operator"))

    assert not Checkpoint.objects.exists()


def test_the_session_dialog_sets_it_on_off_or_back_to_the_profiles(client, alice, session):
    client.force_login(alice)
    url = reverse("chat:session_settings", args=[session.pk])
    dialog = client.get(url, **HX).content.decode()
    assert 'data-testid="session-checkpoint-each-message"' in dialog
    assert "As on your profile (off)" in dialog

    form = {"instructions": "", "test_command": "", "checkpoint_each_message": "on"}
    assert client.post(url, form, **HX).status_code == 200
    session.refresh_from_db()
    assert session.settings == {"checkpoint_each_message": True}
    assert '<option value="on" selected>' in client.get(url, **HX).content.decode()

    client.post(url, {**form, "checkpoint_each_message": ""}, **HX)
    session.refresh_from_db()
    assert session.settings == {}

    refused = client.post(url, {**form, "checkpoint_each_message": "maybe"}, **HX)
    assert 'data-testid="instructions-error"' in refused.content.decode()
    session.refresh_from_db()
    assert session.settings == {}


def test_the_profile_sets_the_default(client, alice):
    client.force_login(alice)
    page = client.get("/accounts/profile/").content.decode()
    assert 'data-testid="checkpoint-each-message"' in page
    client.post(
        "/accounts/profile/",
        {"auto_checkpoint": "on", "theme": "system", "checkpoint_each_message": "on"},
    )
    alice.refresh_from_db()
    assert alice.preference("checkpoint_each_message") is True
