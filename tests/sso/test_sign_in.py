"""Single sign-on against a real OpenID Connect provider (issue 40, item 1): the full redirect,
the code exchange and the ID token's checks; accounts found by the provider's subject, never by
an e-mail address; SSO sign-up on or off; accounts that wait for approval; and each way it can
fail (a wrong state, a replayed code, a provider that is down, tokens that do not check out)
ends on the login page saying why, signed out. The provider is a subprocess of the tests
(tests.oidc_provider.server), so `make check` leaves these out and `make test` runs them."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

import jwt
import pytest
from django.core.exceptions import SuspiciousOperation
from django.urls import reverse

from accounts import oidc
from accounts.models import SsoIdentity, User

from .conftest import CLIENT_ID, PASSWORD, come_back, provider_answer, signed_in_as, start, text

pytestmark = pytest.mark.django_db


def test_the_login_page_offers_the_provider_and_a_first_sign_in_makes_the_account(
    client, sso, admin_user
):
    page = client.get(reverse("accounts:login"))
    assert "Sign in with Test SSO" in text(page)
    subject = sso.add_user("ada.lovelace", PASSWORD, "ada@example.com")
    authorize = start(client)
    assert authorize.startswith(f"{sso.issuer}/authorize/")
    for needed in ("state=", "nonce=", "code_challenge=", f"client_id={CLIENT_ID}"):
        assert needed in authorize
    answer = come_back(client, provider_answer(authorize, "ada.lovelace"))
    assert answer.status_code == 302
    assert answer["Location"] == reverse("chat:home")
    user = signed_in_as(client)
    assert user is not None
    assert (user.username, user.email, user.has_usable_password()) == (
        "ada.lovelace",
        "ada@example.com",
        False,
    )
    assert SsoIdentity.objects.get(user=user).subject == subject
    # Next time, the same account.
    client.logout()
    come_back(client, provider_answer(start(client), "ada.lovelace"))
    assert signed_in_as(client) == user
    assert User.objects.filter(username__startswith="ada").count() == 1


def test_an_email_never_joins_an_account(client, sso, admin_user):
    local = User.objects.create_user("grace", email="grace@example.com", password=PASSWORD)
    sso.add_user("grace.hopper", PASSWORD, "grace@example.com")
    come_back(client, provider_answer(start(client), "grace.hopper"))
    user = signed_in_as(client)
    assert user is not None
    assert user != local
    assert user.username == "grace.hopper"


def test_sso_sign_up_off_refuses_a_stranger_and_lets_a_known_person_in(
    client, sso, settings, admin_user
):
    sso.add_user("known", PASSWORD)
    come_back(client, provider_answer(start(client), "known"))
    known = signed_in_as(client)
    client.logout()
    settings.OIDC_SIGNUP = False
    sso.add_user("stranger", PASSWORD)
    answer = come_back(client, provider_answer(start(client), "stranger"))
    assert answer.status_code == 403
    assert "does not make one through Test SSO. Ask an administrator" in text(answer)
    assert signed_in_as(client) is None
    assert not User.objects.filter(username="stranger").exists()
    come_back(client, provider_answer(start(client), "known"))
    assert signed_in_as(client) == known


def test_with_accounts_pending_a_first_sign_in_waits(client, sso, settings, admin_user):
    settings.ACCOUNTS_PENDING = True
    sso.add_user("newcomer", PASSWORD)
    answer = come_back(client, provider_answer(start(client), "newcomer"))
    assert answer.status_code == 403
    assert "Your account is waiting for an administrator's approval." in text(answer)
    assert signed_in_as(client) is None
    assert User.objects.get(username="newcomer").approval == User.Approval.PENDING


def test_a_wrong_state_and_a_replayed_code_sign_no_one_in(client, sso, admin_user):
    sso.add_user("mallory", PASSWORD)
    callback = provider_answer(start(client), "mallory")
    forged = callback.replace("state=", "state=x")
    answer = come_back(client, forged)
    assert answer.status_code == 400
    assert "did not check out" in text(answer)
    assert signed_in_as(client) is None
    assert come_back(client, callback).status_code == 302  # the real one still works, once
    client.logout()
    replay = come_back(client, callback)
    assert replay.status_code == 400
    assert "did not check out" in text(replay)
    assert signed_in_as(client) is None
    # A callback from a sign-in another browser started (no state in this session at all).
    other = type(client)()
    assert "did not check out" in text(come_back(other, callback))


def test_the_provider_saying_no_is_shown_in_its_own_words(client, sso):
    start(client)
    answer = client.get(
        "/accounts/sso/callback/?error=access_denied&error_description=<b>Denied</b>&state=s"
    )
    assert answer.status_code == 403
    assert "Test SSO did not sign you in: <b>Denied</b>" in text(answer)
    assert "<b>Denied</b>" not in answer.content.decode()  # shown as text


def test_a_provider_that_is_down_is_said_plainly(client, sso, settings):
    settings.OIDC_ISSUER = "http://127.0.0.1:9/o"  # nothing listens there
    answer = client.get(reverse("accounts:sso_start"))
    assert answer.status_code == 503
    assert "Test SSO cannot be reached just now" in text(answer)
    assert signed_in_as(client) is None


def test_a_provider_claiming_another_issuer_is_not_trusted(client, sso, settings):
    """A document (served here) whose issuer is not OIDC_ISSUER: another provider's, say."""
    document = json.dumps({**sso.discovery(), "issuer": "http://evil.example/o"}).encode()

    class Answer(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(document)

        def log_message(self, *args) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        settings.OIDC_ISSUER = f"http://127.0.0.1:{server.server_port}/o"
        answer = client.get(reverse("accounts:sso_start"))
    finally:
        server.shutdown()
        server.server_close()
    assert answer.status_code == 503
    assert "describes itself as another issuer than this server expects" in text(answer)


def test_logging_out_says_how_to_end_the_providers_session(client, sso, admin_user):
    sso.add_user("leaving", PASSWORD)
    come_back(client, provider_answer(start(client), "leaving"))
    answer = client.post(reverse("accounts:logout"), follow=True)
    said = text(answer)
    assert "You are signed out of Rollback. You may still be signed in at Test SSO" in said
    assert f"{sso.issuer}/logout/" in said
    assert signed_in_as(client) is None


# --- The ID token's checks, with tokens signed by the provider's own key --------------------


def token(provider, **claims) -> str:
    kid = provider_kid(provider)
    now = int(time.time())
    body = {"iss": provider.issuer, "aud": CLIENT_ID, "sub": "42", "iat": now, "exp": now + 300}
    body.update(claims)
    body = {k: v for k, v in body.items() if v is not None}
    return jwt.encode(body, provider.key, algorithm="RS256", headers={"kid": kid})


def provider_kid(provider) -> str:
    import requests

    keys = requests.get(f"{provider.issuer}/.well-known/jwks.json", timeout=10).json()["keys"]
    return keys[0]["kid"]


def checked(provider, signed: str, nonce: str = "n-1") -> dict:
    backend = oidc.OidcBackend()
    super(oidc.OidcBackend, backend).__init__()  # the endpoints, as `authenticate` reads them
    return backend.verify_token(signed, nonce=nonce)


def test_only_a_token_that_holds_in_every_way_is_taken(sso):
    assert checked(sso, token(sso, nonce="n-1"))["sub"] == "42"
    bad = {
        "another audience": token(sso, nonce="n-1", aud="someone-else"),
        "another issuer": token(sso, nonce="n-1", iss="http://evil.example/o"),
        "expired": token(sso, nonce="n-1", exp=int(time.time()) - 3600, iat=0),
        "no expiry": token(sso, nonce="n-1", exp=None),
        "another nonce": token(sso, nonce="n-2"),
        "several audiences, another azp": token(
            sso, nonce="n-1", aud=[CLIENT_ID, "other"], azp="other"
        ),
    }
    for why, signed in bad.items():
        with pytest.raises(SuspiciousOperation):
            checked(sso, signed)
        assert why
    from cryptography.hazmat.primitives.asymmetric import rsa

    other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    now = int(time.time())
    forged = jwt.encode(
        {"iss": sso.issuer, "aud": CLIENT_ID, "sub": "42", "iat": now, "exp": now + 60,
         "nonce": "n-1"},
        other_key,
        algorithm="RS256",
        headers={"kid": provider_kid(sso)},
    )  # fmt: skip
    with pytest.raises(SuspiciousOperation):
        checked(sso, forged)
    unsigned = jwt.encode({"iss": sso.issuer, "aud": CLIENT_ID, "sub": "42"}, None, "none")
    with pytest.raises(SuspiciousOperation):
        checked(sso, unsigned)


def test_turning_sso_off_signs_its_people_out_saying_why(client, sso, settings, admin_user):
    sso.add_user("stays", PASSWORD)
    come_back(client, provider_answer(start(client), "stays"))
    assert client.get(reverse("chat:home")).status_code == 200
    settings.OIDC_ISSUER = ""
    settings.AUTHENTICATION_BACKENDS = ["accounts.backends.LimitedModelBackend"]
    answer = client.get(reverse("chat:home"), follow=True)
    assert answer.redirect_chain[-1][0].startswith(reverse("accounts:login"))
    assert "Single sign-on is turned off on this server, so you are signed out." in text(answer)
    assert "Sign in with" not in text(answer)
