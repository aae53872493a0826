"""The 404 and 500 pages: styled like the app, with a way back; JSON under /api/."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse


@pytest.mark.django_db
def test_a_missing_chat_is_the_styled_404_page(client, alice):
    client.force_login(alice)
    response = client.get("/chat/999999/")
    assert response.status_code == 404
    html = response.content.decode()
    assert "rollback/app.css" in html
    assert 'data-testid="error-page"' in html
    assert f'href="{reverse("chat:home")}" data-testid="error-home"' in html


@pytest.mark.django_db
def test_another_users_chat_is_the_same_404_page(client, bob, session):
    client.force_login(bob)
    response = client.get(f"/chat/{session.pk}/")
    assert response.status_code == 404
    assert 'data-testid="error-page"' in response.content.decode()
    assert session.session_name not in response.content.decode()


@pytest.mark.django_db
def test_an_unknown_address_is_the_styled_404_page(client):
    response = client.get("/no/such/page/")
    assert response.status_code == 404
    page = response.content.decode()
    assert 'data-testid="error-page"' in page
    # Signed out: a way to sign in, never "your conversations".
    assert f'href="{reverse("accounts:login")}" data-testid="error-sign-in"' in page
    assert "Back to your conversations" not in page


@pytest.mark.django_db
def test_the_api_answers_404_in_json(client, alice):
    client.force_login(alice)
    for url in ("/api/v1/sessions/999999/", "/api/v1/nowhere/", "/api/v2/sessions/"):
        response = client.get(url)
        assert response.status_code == 404, url
        assert response["Content-Type"] == "application/json", url
        assert set(response.json()) == {"detail"}, url
        assert "found" in response.json()["detail"], url


@pytest.mark.urls("tests.web.boom_urls")
def test_a_server_error_is_the_static_500_page():
    # No django_db mark: the 500 page is served even when the database is out of reach.
    client = Client(raise_request_exception=False)
    response = client.get("/boom/")
    assert response.status_code == 500
    html = response.content.decode()
    assert "rollback/app.css" in html
    assert 'data-testid="error-page"' in html
    assert 'href="/" data-testid="error-home"' in html
    assert "boom" not in html


@pytest.mark.urls("tests.web.boom_urls")
def test_a_server_error_under_the_api_is_json():
    response = Client(raise_request_exception=False).get("/api/v1/boom/")
    assert response.status_code == 500
    assert response.json() == {"detail": "Server error."}


@pytest.mark.urls("tests.web.boom_urls")
@pytest.mark.parametrize("down", ["database-down", "redis-down"])
def test_a_server_that_does_not_answer_is_a_503_page_needing_no_server_nor_static_files(down):
    """PostgreSQL's or Redis's error (or an error raised from one) is an outage: 503, with a
    page rendered without the request's context (no database, no session), nor any static
    file (no manifest)."""
    response = Client(raise_request_exception=False).get(f"/{down}/")
    assert response.status_code == 503
    assert response["Retry-After"] == "30"
    html = response.content.decode()
    assert 'data-testid="unavailable-page"' in html
    assert "Rollback is unavailable" in html
    assert "/static/" not in html
    assert "5999" not in html
    assert "6999" not in html


@pytest.mark.urls("tests.web.boom_urls")
@pytest.mark.parametrize("down", ["database-down", "redis-down"])
def test_a_server_that_does_not_answer_is_a_503_in_json_under_the_api(down):
    response = Client(raise_request_exception=False).get(f"/api/v1/{down}/")
    assert response.status_code == 503
    assert response["Content-Type"] == "application/json"
    assert set(response.json()) == {"detail"}
    assert "Rollback is unavailable" in response.json()["detail"]


@pytest.mark.urls("tests.web.boom_urls")
def test_the_500_page_is_served_when_the_static_files_were_never_collected(settings, tmp_path):
    """Production's manifest storage with no manifest (collectstatic never ran): `{% static %}`
    fails there, and before, the 500 page failed with it."""
    settings.STATIC_ROOT = tmp_path
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
    }
    response = Client(raise_request_exception=False).get("/boom/")
    assert response.status_code == 500
    html = response.content.decode()
    assert 'data-testid="error-page"' in html
    assert 'href="/static/rollback/app.css"' in html
