"""POST /api/v1/telegram/link/: a one-time code that links a Telegram chat."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.test import Client
from django.utils import timezone

from integrations.models import TelegramLinkCode
from integrations.telegram.links import code_hash, link_code_consume

pytestmark = pytest.mark.django_db
URL = "/api/v1/telegram/link/"


@pytest.fixture
def bridge_on(settings):
    settings.TELEGRAM_BOT_TOKEN = "123:test-token"  # noqa: S105 (a test value)


def test_a_code_is_201_with_its_expiry_and_links_the_callers_chat(api, alice, bridge_on):
    response = api.post(URL, format="json")
    assert response.status_code == 201
    body = response.json()
    assert set(body) == {"code", "expires_at"}
    expires = datetime.fromisoformat(body["expires_at"])
    assert timedelta(minutes=9) < expires - timezone.now() <= timedelta(minutes=10)
    assert TelegramLinkCode.objects.get(user=alice).code_hash == code_hash(body["code"])
    assert link_code_consume(code=body["code"], chat_id=5, title="").user == alice


def test_bobs_code_links_bobs_chat_not_alices(bob_api, bob, alice, bridge_on):
    code = bob_api.post(URL, format="json").json()["code"]
    assert link_code_consume(code=code, chat_id=5, title="").user == bob
    assert not TelegramLinkCode.objects.filter(user=alice).exists()


def test_the_bridge_off_is_404_with_a_clear_error(api):
    response = api.post(URL, format="json")
    assert response.status_code == 404
    assert response.json() == {"detail": "The Telegram bridge is not enabled on this server."}
    assert not TelegramLinkCode.objects.exists()


def test_without_credentials_it_is_401(client, bridge_on):
    response = client.post(URL, content_type="application/json")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert not TelegramLinkCode.objects.exists()


def test_get_is_405(api, bridge_on):
    assert api.get(URL).status_code == 405


def test_the_browser_session_needs_csrf(alice, bridge_on):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(alice)
    response = browser.post(URL, content_type="application/json")
    assert response.status_code == 403
    assert not TelegramLinkCode.objects.exists()
