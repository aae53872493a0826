"""The headers that tell a browser how to treat the app's responses: a strict Content Security
Policy, the other security headers, and no caching of anything private."""

from __future__ import annotations

import json
import re
from html import unescape

import pytest
from django.urls import reverse

from accounts.services import apikey_create
from checkpoints.services import checkpoint_create, checkpoint_restore
from sessions_app.models import Message, Turn
from tests.conftest import say
from tests.web.api.conftest import bearer_client

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def as_alice(client, alice):
    client.force_login(alice)
    return client


@pytest.fixture
def everything(alice, session, branch):
    """A session with messages, a failed turn, checkpoints and a forked branch, and an API key:
    every partial of the chat and of the profile has something to show."""
    say(branch, "hello", "hi")
    cp = checkpoint_create(branch=branch, name="cp")
    checkpoint_restore(checkpoint=cp, mode="branch")
    Turn.objects.create(
        session=session,
        branch=branch,
        user_message=Message.objects.filter(branch=branch).first(),
        status="failed",
        error="boom",
    )
    apikey_create(user=alice, name="laptop")
    message = Message.objects.get(branch=branch, position=0)
    return {"session": session, "checkpoint": cp, "message": message}


def pages(things: dict) -> list[tuple[str, str, dict]]:
    """(method, url, data) of every page and fragment alice's browser asks for."""
    s, cp, m = things["session"].pk, things["checkpoint"].pk, things["message"].pk
    return [
        ("get", reverse("chat:home"), {}),
        ("get", reverse("chat:session", args=[s]), {}),
        ("get", reverse("chat:session_list"), {}),
        ("get", reverse("chat:earlier", args=[s]), {}),
        ("get", reverse("chat:refresh", args=[s]), {}),
        ("get", reverse("chat:export", args=[s]), {}),
        ("get", reverse("chat:edit_form", args=[s, m]), {}),
        ("get", reverse("chat:checkpoint_detail", args=[cp]), {}),
        ("get", reverse("chat:checkpoint_restore", args=[cp]), {}),
        ("post", reverse("chat:checkpoint_save", args=[s]), {"name": "another"}),
        ("get", reverse("accounts:profile"), {}),
        ("get", reverse("accounts:password_change"), {}),
        ("post", reverse("accounts:apikey_create"), {"name": "new key"}),
        ("get", reverse("api:sessions"), {}),
        ("get", reverse("api:session", args=[s]), {}),
        ("get", reverse("api:messages", args=[s]), {}),
        ("get", reverse("api:keys"), {}),
        ("post", reverse("api:keys"), {"name": "script"}),
    ]


def csp(response) -> dict[str, list[str]]:
    header = response.headers.get("Content-Security-Policy")
    assert header, f"no Content-Security-Policy on {response.request['PATH_INFO']}"
    directives = [part.split() for part in header.split(";") if part.strip()]
    return {name: sources for name, *sources in directives}


def post(client, url: str, data: dict):
    if url.startswith("/api/"):
        return client.post(url, json.dumps(data), content_type="application/json")
    return client.post(url, data, **HX)


@pytest.mark.parametrize(
    ("name", "signed_in"),
    [
        ("accounts:login", False),
        ("accounts:signup", False),
        ("chat:home", True),
        ("accounts:profile", True),
        ("admin:index", True),
    ],
)
def test_pages_carry_a_strict_content_security_policy(client, admin_user, name, signed_in):
    if signed_in:
        client.force_login(admin_user)
    response = client.get(reverse(name), follow=True)
    assert response.status_code == 200
    policy = csp(response)
    assert policy["default-src"] == ["'self'"]
    assert policy["script-src"] == ["'self'"]
    assert policy["style-src"] == ["'self'"]
    assert policy["img-src"] == ["'self'", "data:"]
    assert policy["object-src"] == ["'none'"]
    assert policy["base-uri"] == ["'self'"]
    assert policy["form-action"] == ["'self'"]
    assert policy["frame-ancestors"] == ["'none'"]
    assert policy["connect-src"] == ["'self'", "ws://testserver"]


def test_a_page_served_over_https_lets_its_websocket_use_wss_only(as_alice, everything):
    response = as_alice.get(reverse("chat:session", args=[everything["session"].pk]), secure=True)
    assert csp(response)["connect-src"] == ["'self'", "wss://testserver"]


def test_every_private_page_fragment_and_api_answer_has_the_policy(as_alice, alice, everything):
    for method, url, data in pages(everything):
        response = post(as_alice, url, data) if method == "post" else as_alice.get(url, **HX)
        assert response.status_code < 400, (url, response.status_code)
        assert "'unsafe-inline'" not in response.headers.get("Content-Security-Policy", "-"), url
        assert csp(response)["script-src"] == ["'self'"], url


def test_pages_send_the_security_headers_django_checks_for(client):
    """Django's defaults, stated in the settings: a guard that none is lost."""
    response = client.get(reverse("accounts:login"))
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["Referrer-Policy"] == "same-origin"
    assert response.headers["Cross-Origin-Opener-Policy"] == "same-origin"
    assert response.headers["X-Frame-Options"] == "DENY"


INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.IGNORECASE)
INLINE_HANDLER = re.compile(r"<[^>]+\son[a-z]+\s*=", re.IGNORECASE)
INLINE_STYLE = re.compile(r"<[^>]+\sstyle\s*=|<style\b", re.IGNORECASE)


def test_no_page_or_fragment_has_inline_script_handler_or_style(as_alice, everything):
    """What the policy would block in the browser: every behaviour is in static/rollback/app.js,
    every look in app.css."""
    for method, url, data in pages(everything):
        if url.startswith("/api/"):
            continue
        for headers in ({}, HX):
            if method == "post":
                response = as_alice.post(url, data, **headers)
            else:
                response = as_alice.get(url, **headers)
            html = response.content.decode()
            assert not INLINE_SCRIPT.search(html), (url, INLINE_SCRIPT.search(html))
            assert not INLINE_HANDLER.search(html), (url, INLINE_HANDLER.search(html))
            assert not INLINE_STYLE.search(html), (url, INLINE_STYLE.search(html))


def test_htmx_is_configured_to_need_neither_eval_nor_inline_styles(as_alice, everything):
    html = as_alice.get(reverse("chat:session", args=[everything["session"].pk])).content.decode()
    meta = re.search(r"<meta name=\"htmx-config\" content='([^']*)'>", html)
    assert meta, "no htmx-config meta tag"
    config = json.loads(unescape(meta.group(1)))
    assert config["allowEval"] is False
    assert config["allowScriptTags"] is False
    assert config["includeIndicatorStyles"] is False
    assert config["historyCacheSize"] == 0  # no snapshot of a private page in localStorage


def test_every_private_page_fragment_and_api_answer_is_never_stored(as_alice, everything):
    for method, url, data in pages(everything):
        response = post(as_alice, url, data) if method == "post" else as_alice.get(url, **HX)
        assert response.status_code < 400, (url, response.status_code)
        cache_control = response.headers.get("Cache-Control", "")
        assert "no-store" in cache_control, (url, cache_control)
        assert "private" in cache_control, (url, cache_control)


def test_the_response_showing_a_new_api_key_is_never_stored(as_alice):
    response = as_alice.post(reverse("accounts:apikey_create"), {"name": "laptop"}, follow=True)
    assert response.redirect_chain == [(reverse("accounts:profile") + "#api-keys", 303)]
    assert 'data-testid="new-api-key"' in response.content.decode()
    assert "no-store" in response.headers["Cache-Control"]


def test_the_api_answer_with_a_new_key_is_never_stored(alice):
    response = bearer_client(alice).post(reverse("api:keys"), {"name": "script"}, format="json")
    assert response.status_code == 201
    assert "no-store" in response.headers["Cache-Control"]


def test_the_api_docs_page_has_no_inline_script_or_style(client):
    html = client.get(reverse("api:docs")).content.decode()
    assert "swagger-ui-bundle.js" in html
    assert not INLINE_SCRIPT.search(html), INLINE_SCRIPT.search(html)
    assert not INLINE_STYLE.search(html), INLINE_STYLE.search(html)
    script = client.get(reverse("api:docs"), {"script": ""})
    assert script.status_code == 200
    assert script.headers["Content-Type"].startswith("application/javascript")
    assert "SwaggerUIBundle" in script.content.decode()
