"""What the browser's drafts and shortcuts rely on in the pages (the behaviour itself is
tests/e2e/test_signin_drafts_keys.py's): drafts keyed by the user and the session, the edit
form's cancel, the shortcuts' sheet for a signed-in user only."""

from __future__ import annotations

import pytest
from django.urls import reverse

from sessions_app.models import Message
from tests.conftest import say

pytestmark = pytest.mark.django_db


def test_the_composer_and_the_edit_form_key_their_drafts_by_user_and_session(
    client, alice, session, branch
):
    client.force_login(alice)
    say(branch, "hello", "hi")
    page = client.get(reverse("chat:session", args=[session.pk])).content.decode()
    assert f'data-testid="composer" data-draft="{alice.pk}:{session.pk}"' in page
    message = Message.objects.get(branch=branch, position=0)
    form = client.get(
        reverse("chat:edit_form", args=[session.pk, message.pk]), HTTP_HX_REQUEST="true"
    ).content.decode()
    assert f'data-draft="{alice.pk}:{session.pk}"' in form
    assert "data-edit-cancel" in form


def test_the_shortcuts_sheet_and_its_buttons_are_on_a_signed_in_users_pages(client, alice, session):
    client.force_login(alice)
    page = client.get(reverse("chat:session", args=[session.pk])).content.decode()
    assert 'id="shortcuts"' in page
    assert 'data-testid="shortcuts-button"' in page
    assert 'data-testid="composer-shortcuts"' in page
    assert "rollback/shortcuts" in page
    assert "rollback/attention" in page


def test_the_login_page_has_no_sheet_and_says_where_it_returns(client, session):
    url = reverse("chat:session", args=[session.pk])
    page = client.get(f"{reverse('accounts:login')}?next={url}").content.decode()
    assert 'id="shortcuts"' not in page
    assert 'data-testid="login-return"' in page
    assert f'name="next" value="{url}"' in page
    plain = client.get(reverse("accounts:login")).content.decode()
    assert 'data-testid="login-return"' not in plain
