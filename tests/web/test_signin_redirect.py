"""An ended login leads to the whole sign-in page, which returns to the page (web.middleware's
WholePageSignInMiddleware): never a login form swapped into the chat or a panel."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client
from django.urls import reverse

from checkpoints.models import Checkpoint
from sessions_app.models import Message
from tests.web.test_chat_pages import _routes
from tests.web.test_chat_pages import alices_things as alices_things_fixture

pytestmark = pytest.mark.django_db
alices_things = pytest.fixture(alices_things_fixture.__wrapped__, name="alices_things")


def _next_of(url: str) -> str:
    parts = urlsplit(url)
    assert parts.path == reverse("accounts:login")
    return parse_qs(parts.query)["next"][0]


def test_every_htmx_request_of_a_signed_out_page_redirects_the_whole_page(client, alices_things):
    session = alices_things[0]
    page = f"http://testserver{reverse('chat:session', args=[session.pk])}?q=python"
    for method, url in _routes(*alices_things):
        response = getattr(client, method)(url, HTTP_HX_REQUEST="true", HTTP_HX_CURRENT_URL=page)
        assert response.status_code == 200, (method, url)
        assert response.content == b"", (method, url)  # nothing to swap anywhere
        assert _next_of(response["HX-Redirect"]) == f"/chat/{session.pk}/?q=python"
        assert "no-store" in response["Cache-Control"]


def test_a_message_sent_after_logging_out_is_not_stored(client, alice, session, branch):
    client.force_login(alice)
    client.logout()
    page = f"http://testserver{reverse('chat:session', args=[session.pk])}"
    response = client.post(
        reverse("chat:send", args=[session.pk]),
        {"message": "kept in the draft"},
        HTTP_HX_REQUEST="true",
        HTTP_HX_CURRENT_URL=page,
    )
    assert _next_of(response["HX-Redirect"]) == f"/chat/{session.pk}/"
    assert not Message.objects.filter(branch=branch).exists()
    response = client.post(
        reverse("chat:checkpoint_save", args=[session.pk]),
        {"name": "x"},
        HTTP_HX_REQUEST="true",
        HTTP_HX_CURRENT_URL=page,
    )
    assert "HX-Redirect" in response
    assert not Checkpoint.objects.exists()


def test_a_current_url_of_another_site_is_not_a_place_to_return_to(client, session):
    response = client.post(
        reverse("chat:send", args=[session.pk]),
        {"message": "hi"},
        HTTP_HX_REQUEST="true",
        HTTP_HX_CURRENT_URL="https://evil.example/chat/1/",
    )
    assert response["HX-Redirect"] == reverse("accounts:login")


def test_a_plain_form_post_returns_to_the_page_it_was_posted_from(client, session):
    page = f"http://testserver{reverse('chat:session', args=[session.pk])}"
    response = client.post(reverse("chat:new"), HTTP_REFERER=page)
    assert response.status_code == 302
    assert _next_of(response["Location"]) == f"/chat/{session.pk}/"
    response = client.post(reverse("chat:new"), HTTP_REFERER="https://evil.example/")
    assert response["Location"] == reverse("accounts:login")


def test_a_plain_page_load_keeps_its_own_address_as_next(client, session):
    url = reverse("chat:session", args=[session.pk])
    response = client.get(url)
    assert response.status_code == 302
    assert _next_of(response["Location"]) == url


def test_signing_in_returns_to_the_chat_page(client, alice, session):
    page = reverse("chat:session", args=[session.pk])
    response = client.post(
        f"{reverse('accounts:login')}?next={page}",
        {"username": "alice", "password": "alice-password-1", "next": page},
    )
    assert response.status_code == 302
    assert response["Location"] == page


def test_logging_out_ends_on_the_login_page_without_a_way_back(client, alice, session):
    client.force_login(alice)
    page = f"http://testserver{reverse('chat:session', args=[session.pk])}"
    response = client.post(reverse("accounts:logout"), HTTP_REFERER=page)
    assert response["Location"] == reverse("accounts:login")


def test_the_api_keeps_its_json_refusal(client, session):
    response = client.post(
        f"/api/v1/sessions/{session.pk}/turns/",
        {"message": "hi"},
        content_type="application/json",
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code in (401, 403)
    assert "HX-Redirect" not in response
    assert "detail" in response.json()


def test_an_htmx_post_without_its_csrf_cookie_leads_to_the_sign_in(session):
    client = Client(enforce_csrf_checks=True)
    page = f"http://testserver{reverse('chat:session', args=[session.pk])}"
    response = client.post(
        reverse("chat:send", args=[session.pk]),
        {"message": "hi"},
        HTTP_HX_REQUEST="true",
        HTTP_HX_CURRENT_URL=page,
    )
    assert _next_of(response["HX-Redirect"]) == f"/chat/{session.pk}/"
    assert response.content == b""
    assert not Message.objects.exists()


def test_a_signed_in_users_csrf_refusal_is_left_as_it_is(alice, session):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    response = client.post(
        reverse("chat:send", args=[session.pk]), {"message": "hi"}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 403
    assert "HX-Redirect" not in response
