"""The sockets' security, through the real ASGI application and the in-memory channel layer: the
handshake's Origin (scheme, host and port), and sockets closing as soon as their access ends
(logout, a revoked key, a deactivated user, a session deleted or given away, an expired login),
in every case before the next event, with new connections refused."""

from __future__ import annotations

import asyncio
import importlib
import threading
from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth.management.commands import changepassword
from django.contrib.auth.signals import user_logged_out
from django.contrib.sessions.backends.db import SessionStore
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts.errors import ApiKeyNotFound
from accounts.models import ApiKey, User
from accounts.services import apikey_create, apikey_revoke, user_deactivate
from core import events
from rollback_site.asgi import application
from sessions_app.models import Session
from sessions_app.services import session_delete

pytestmark = pytest.mark.django_db(transaction=True)

PATHS = ["/ws/chat/{pk}/", "/ws/v1/sessions/{pk}/"]
SIGNED_OUT, NOT_FOUND, RECONNECT = 4401, 4404, 4012
NEW_PASSWORD = "a-new-password-9"  # noqa: S105 - a test user's password

Headers = list[tuple[bytes, bytes]]


def login(user: User) -> Client:
    """A browser signed in as `user`: a login (Django session) of its own."""
    client = Client()
    client.force_login(user)
    return client


def cookie(client: Client) -> tuple[bytes, bytes]:
    name = settings.SESSION_COOKIE_NAME
    return (b"cookie", f"{name}={client.cookies[name].value}".encode())


def browser(
    client: Client, origin: str | None = "http://localhost", host: str = "localhost"
) -> Headers:
    """The handshake of a page of this site in the browser of `client`."""
    headers = [cookie(client), (b"host", host.encode())]
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    return headers


def bearer(secret: str) -> Headers:
    """The handshake of a script with an API key (no Origin, no cookie)."""
    return [(b"authorization", f"Bearer {secret}".encode()), (b"host", b"localhost")]


async def connect(
    path: str, headers: Headers, scheme: str | None = None, app: Any = application
) -> tuple[WebsocketCommunicator, bool]:
    communicator = WebsocketCommunicator(app, path, headers=headers)
    if scheme is not None:
        communicator.scope["scheme"] = scheme  # read when the application starts, at connect
    connected, _ = await communicator.connect(timeout=5)
    return communicator, connected


async def accepted(
    path: str, headers: Headers, scheme: str | None = None, app: Any = application
) -> bool:
    """Whether the socket is let in to listen: its handshake accepted and not closed at once."""
    communicator, connected = await connect(path, headers, scheme, app)
    if connected:
        connected = await communicator.receive_nothing(timeout=0.2)
        await communicator.disconnect(timeout=10)
    return connected


async def refusal(path: str, headers: Headers) -> int | None:
    """How a socket without access is refused: the chat page's is accepted, then closed at once
    with the code the page acts on (a browser sees no code of a refused handshake, only 1006,
    after which htmx's ws extension opens it again, for ever); the API's handshake is refused
    (None). Fails when the socket is let in, or hears anything before its close."""
    communicator, connected = await connect(path, headers)
    if not connected:
        return None
    return await close_code(communicator)


def told(path: str, code: int) -> int | None:
    """What `refusal` gives on `path` for an access that ended with `code`."""
    return code if path.startswith("/ws/chat/") else None


async def close_code(communicator: WebsocketCommunicator) -> int:
    """The socket's next output must be its close (no event first): its code."""
    output = await communicator.receive_output(timeout=5)
    assert output["type"] == "websocket.close", output
    await communicator.disconnect(timeout=10)  # as the server does once the socket is closed
    return output["code"]


async def in_thread(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return await database_sync_to_async(function)(*args, **kwargs)


async def publish(session: Session, delta: str = "after") -> None:
    await in_thread(events.message_delta, session=session.pk, turn=1, delta=delta)


# --- the Origin of a browser's handshake --------------------------------------------------------


@pytest.fixture
def started_with(settings):
    """The ASGI application as a server process builds it when it starts, with the settings of
    the test (which a module-level `application` built at import would not see)."""
    import rollback_site.asgi

    def start(**overrides: Any) -> Any:
        for name, value in overrides.items():
            setattr(settings, name, value)
        return importlib.reload(rollback_site.asgi).application

    before = rollback_site.asgi.application
    yield start
    rollback_site.asgi.application = before


@pytest.mark.parametrize("allowed_hosts", [["localhost"], ["*"]])
@pytest.mark.parametrize("path", PATHS)
def test_a_socket_from_another_site_is_refused_even_when_every_host_is_allowed(
    started_with, alice, session, path, allowed_hosts
):
    app = started_with(ALLOWED_HOSTS=allowed_hosts)
    as_alice = login(alice)

    async def run():
        url = path.format(pk=session.pk)
        for origin in ("http://evil.example", "https://evil.example", "http://evil.example:80"):
            assert not await accepted(url, browser(as_alice, origin=origin), app=app), origin
        assert await accepted(url, browser(as_alice), app=app)

    async_to_sync(run)()


@pytest.mark.parametrize(
    ("origin", "host", "scheme"),
    [
        ("http://localhost:8001", "localhost:8000", None),  # another port
        ("http://localhost:8000", "localhost", None),
        ("http://localhost", "localhost:8000", None),
        ("https://localhost:8000", "localhost:8000", None),  # another scheme
        ("http://localhost", "localhost", "wss"),
        ("https://localhost", "localhost", "ws"),
        ("http://localhost:8000", "evil.example:8000", None),  # a host not allowed
        ("null", "localhost", None),  # not an origin
        ("http://localhost/chat", "localhost", None),
        ("http://alice@localhost", "localhost", None),
        ("ws://localhost", "localhost", None),
    ],
)
def test_an_origin_differing_in_scheme_port_or_host_is_refused(
    settings, alice, session, origin, host, scheme
):
    settings.ALLOWED_HOSTS = ["localhost"]
    headers = browser(login(alice), origin=origin, host=host)

    async def run():
        return await accepted(f"/ws/chat/{session.pk}/", headers, scheme)

    assert not async_to_sync(run)()


@pytest.mark.parametrize(
    ("origin", "host", "scheme"),
    [
        ("http://localhost:8000", "localhost:8000", None),
        ("http://localhost", "localhost", "ws"),
        ("http://localhost:80", "localhost", None),  # the default port, written or not
        ("https://localhost", "localhost:443", "wss"),
        ("http://127.0.0.1:8000", "127.0.0.1:8000", None),
        ("http://[::1]:8000", "[::1]:8000", None),
        ("http://LocalHost:8000", "localhost:8000", None),
    ],
)
def test_the_origin_of_the_request_itself_is_accepted(
    settings, alice, session, origin, host, scheme
):
    settings.ALLOWED_HOSTS = ["localhost", "127.0.0.1", "[::1]"]
    headers = browser(login(alice), origin=origin, host=host)

    async def run():
        return await accepted(f"/ws/chat/{session.pk}/", headers, scheme)

    assert async_to_sync(run)()


def test_behind_a_tls_proxy_the_forwarded_scheme_is_the_requests(settings, alice, session):
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    as_alice = login(alice)
    url = f"/ws/chat/{session.pk}/"

    def through_proxy(origin: str, proto: str) -> Headers:
        return [*browser(as_alice, origin=origin), (b"x-forwarded-proto", proto.encode())]

    async def run():
        assert await accepted(url, through_proxy("https://localhost", "https"))
        assert not await accepted(url, through_proxy("http://localhost", "https"))
        assert not await accepted(url, through_proxy("https://localhost", "http"))

    async_to_sync(run)()


def test_an_origin_listed_in_csrf_trusted_origins_is_accepted(settings, alice, session):
    settings.CSRF_TRUSTED_ORIGINS = ["https://chat.example.com", "https://*.example.org"]
    as_alice = login(alice)
    url = f"/ws/v1/sessions/{session.pk}/"

    async def run():
        for origin in ("https://chat.example.com", "https://a.example.org", "https://example.org"):
            assert await accepted(url, browser(as_alice, origin=origin)), origin
        for origin in ("http://chat.example.com", "https://chat.example.com:8443"):
            assert not await accepted(url, browser(as_alice, origin=origin)), origin
        assert not await accepted(url, browser(as_alice, origin="http://a.example.org"))

    async_to_sync(run)()


def test_a_cookie_without_origin_signs_nobody_in_but_a_key_without_origin_does(alice, session):
    as_alice = login(alice)
    _, secret = apikey_create(user=alice, name="script")
    url = f"/ws/v1/sessions/{session.pk}/"

    async def run():
        assert not await accepted(url, browser(as_alice, origin=None))
        assert await accepted(url, [*bearer(secret), cookie(as_alice)])

    async_to_sync(run)()


# --- sockets close when their access ends -------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
def test_revoking_a_key_closes_its_sockets_before_the_next_event(alice, session, path):
    key, secret = apikey_create(user=alice, name="revoked")
    _, other = apikey_create(user=alice, name="kept")
    url = path.format(pk=session.pk)

    async def run():
        revoked, ok = await connect(url, bearer(secret))
        assert ok
        kept, ok = await connect(url, bearer(other))
        assert ok
        await in_thread(apikey_revoke, user=alice, key_id=key.pk)
        await publish(session)
        assert await close_code(revoked) == SIGNED_OUT
        assert await kept.receive_from(timeout=5)  # another key's socket still hears
        await kept.disconnect(timeout=10)
        assert not await accepted(url, bearer(secret))

    async_to_sync(run)()


def test_revoking_another_users_key_id_closes_nothing(alice, bob, session):
    alices_key, secret = apikey_create(user=alice, name="mine")

    async def run():
        socket, ok = await connect(f"/ws/v1/sessions/{session.pk}/", bearer(secret))
        assert ok
        with pytest.raises(ApiKeyNotFound):
            await in_thread(apikey_revoke, user=bob, key_id=alices_key.pk)
        await publish(session, "still here")
        assert "still here" in await socket.receive_from(timeout=5)
        await socket.disconnect(timeout=10)

    async_to_sync(run)()


@pytest.mark.parametrize("path", PATHS)
def test_logging_out_closes_the_sockets_of_that_login_only(alice, session, path):
    leaving, staying = login(alice), login(alice)  # two browsers, two logins
    url = path.format(pk=session.pk)
    old_cookie = browser(leaving)

    async def run():
        closed, ok = await connect(url, browser(leaving))
        assert ok
        open_, ok = await connect(url, browser(staying))
        assert ok
        response = await in_thread(leaving.post, reverse("accounts:logout"))
        assert response.status_code == 302
        await publish(session)
        assert await close_code(closed) == SIGNED_OUT
        assert await open_.receive_from(timeout=5)
        await open_.disconnect(timeout=10)
        assert await refusal(url, old_cookie) == told(path, SIGNED_OUT)

    async_to_sync(run)()


def test_a_login_is_gone_when_its_sockets_are_told_to_close(alice, session):
    """A page whose socket closes with "signed out" reloads at once, and that reload must be
    refused: the login's stored session is deleted before its sockets hear of the logout, not
    after (Django's logout sends its signal first and flushes the session after it). The logout
    is held, once its sockets were told, until the test has looked at the stored session."""
    leaving = login(alice)
    key = leaving.cookies[settings.SESSION_COOKIE_NAME].value
    looked = threading.Event()

    def hold(sender: object, **kwargs: Any) -> None:  # runs after the app's own receiver
        looked.wait(timeout=10)

    async def run():
        socket, ok = await connect(f"/ws/chat/{session.pk}/", browser(leaving))
        assert ok
        user_logged_out.connect(hold, dispatch_uid="test.hold_the_logout")
        try:
            logout = asyncio.ensure_future(
                sync_to_async(leaving.post, thread_sensitive=False)(reverse("accounts:logout"))
            )
            assert await close_code(socket) == SIGNED_OUT
            stored = await sync_to_async(SessionStore().exists, thread_sensitive=False)(key)
            looked.set()
            assert (await logout).status_code == 302
        finally:
            looked.set()
            user_logged_out.disconnect(dispatch_uid="test.hold_the_logout")
        assert not stored

    async_to_sync(run)()


def test_logging_out_of_the_admin_closes_the_sockets_of_that_login(admin_user, session):
    Session.objects.filter(pk=session.pk).update(owner=admin_user)
    as_admin = login(admin_user)

    async def run():
        socket, ok = await connect(f"/ws/v1/sessions/{session.pk}/", browser(as_admin))
        assert ok
        response = await in_thread(as_admin.post, reverse("admin:logout"))
        assert response.status_code == 302
        assert await close_code(socket) == SIGNED_OUT

    async_to_sync(run)()


def test_deactivating_a_user_closes_every_socket_of_theirs(alice, bob, session):
    _, secret = apikey_create(user=alice, name="script")
    as_alice = login(alice)
    bobs = Session.objects.create(owner=bob, session_name="bob's")
    as_bob = login(bob)

    async def run():
        by_cookie, ok = await connect(f"/ws/chat/{session.pk}/", browser(as_alice))
        assert ok
        by_key, ok = await connect(f"/ws/v1/sessions/{session.pk}/", bearer(secret))
        assert ok
        bob_socket, ok = await connect(f"/ws/v1/sessions/{bobs.pk}/", browser(as_bob))
        assert ok
        await in_thread(user_deactivate, user=alice)
        await publish(session)
        await publish(bobs, "bob's")
        assert await close_code(by_cookie) == SIGNED_OUT
        assert await close_code(by_key) == SIGNED_OUT
        assert "bob's" in await bob_socket.receive_from(timeout=5)
        await bob_socket.disconnect(timeout=10)
        for path, headers in (
            ("/ws/chat/{}/", browser(as_alice)),
            ("/ws/v1/sessions/{}/", bearer(secret)),
        ):
            assert await refusal(path.format(session.pk), headers) == told(path, SIGNED_OUT)

    async_to_sync(run)()


def _user_change_form(user: User) -> dict[str, Any]:
    """The admin's change form of `user` as it stands, with "active" unticked."""
    return {
        "username": user.username,
        "first_name": user.first_name,
        "last_name": user.last_name,
        "email": user.email,
        "date_joined_0": user.date_joined.strftime("%Y-%m-%d"),
        "date_joined_1": user.date_joined.strftime("%H:%M:%S"),
        "last_login_0": "",
        "last_login_1": "",
        "metadata": "{}",
        "_save": "Save",
    }


@pytest.mark.parametrize("how", ["change form", "action"])
def test_deactivating_a_user_in_the_admin_closes_their_sockets(admin_user, alice, session, how):
    as_alice, as_admin = login(alice), login(admin_user)
    _, secret = apikey_create(user=alice, name="script")

    def deactivate():
        if how == "change form":
            url = reverse("admin:accounts_user_change", args=[alice.pk])
            return as_admin.post(url, _user_change_form(alice))
        url = reverse("admin:accounts_user_changelist")
        return as_admin.post(url, {"action": "deactivate", "_selected_action": [alice.pk]})

    async def run():
        by_cookie, ok = await connect(f"/ws/chat/{session.pk}/", browser(as_alice))
        assert ok
        by_key, ok = await connect(f"/ws/v1/sessions/{session.pk}/", bearer(secret))
        assert ok
        response = await in_thread(deactivate)
        assert response.status_code == 302
        await publish(session)
        assert await close_code(by_cookie) == SIGNED_OUT
        assert await close_code(by_key) == SIGNED_OUT
        assert await refusal(f"/ws/chat/{session.pk}/", browser(as_alice)) == SIGNED_OUT

    async_to_sync(run)()
    assert not User.objects.get(pk=alice.pk).is_active


@pytest.mark.parametrize("path", PATHS)
def test_changing_the_password_closes_the_sockets_of_the_other_logins_at_once(alice, session, path):
    """Changed on the profile page in one browser: the other browser's sockets close at once,
    with no event and long before the periodic check; this browser's own sockets are asked to
    reconnect (its login goes on under a new key); sockets of API keys stay open."""
    changing, other = login(alice), login(alice)
    _, secret = apikey_create(user=alice, name="script")
    url = path.format(pk=session.pk)
    form = {
        "old_password": "alice-password-1",
        "new_password1": NEW_PASSWORD,
        "new_password2": NEW_PASSWORD,
    }

    async def run():
        own, ok = await connect(url, browser(changing))
        assert ok
        others, ok = await connect(url, browser(other))
        assert ok
        by_key, ok = await connect(url, bearer(secret))
        assert ok
        response = await in_thread(changing.post, reverse("accounts:password_change"), form)
        assert response.status_code == 302, response.content
        assert await close_code(others) == SIGNED_OUT
        assert await close_code(own) == RECONNECT
        await publish(session, "still here")
        assert "still here" in await by_key.receive_from(timeout=5)
        await by_key.disconnect(timeout=10)
        assert await accepted(url, browser(changing))  # with the login's new cookie
        assert await refusal(url, browser(other)) == told(path, SIGNED_OUT)

    async_to_sync(run)()
    assert User.objects.get(pk=alice.pk).check_password(NEW_PASSWORD)


def _in_the_admin(admin_user: User, alice: User) -> None:
    url = reverse("admin:auth_user_password_change", args=[alice.pk])
    form = {"password1": NEW_PASSWORD, "password2": NEW_PASSWORD, "usable_password": "true"}
    response = login(admin_user).post(url, form)
    assert response.status_code == 302, response.content


def _by_the_command(admin_user: User, alice: User) -> None:
    call_command("changepassword", "alice")


@pytest.mark.parametrize("change", [_in_the_admin, _by_the_command])
def test_a_password_changed_in_the_admin_or_by_the_command_closes_the_users_browser_sockets(
    monkeypatch, admin_user, alice, session, change
):
    monkeypatch.setattr(changepassword.Command, "_get_pass", lambda self, prompt="": NEW_PASSWORD)
    as_alice = login(alice)
    _, secret = apikey_create(user=alice, name="script")

    async def run():
        by_cookie, ok = await connect(f"/ws/chat/{session.pk}/", browser(as_alice))
        assert ok
        by_key, ok = await connect(f"/ws/v1/sessions/{session.pk}/", bearer(secret))
        assert ok
        await in_thread(change, admin_user, alice)
        assert await close_code(by_cookie) == SIGNED_OUT
        await publish(session, "still here")
        assert "still here" in await by_key.receive_from(timeout=5)
        await by_key.disconnect(timeout=10)

    async_to_sync(run)()
    assert User.objects.get(pk=alice.pk).check_password(NEW_PASSWORD)


@pytest.mark.parametrize("path", PATHS)
def test_deleting_the_session_closes_its_sockets(alice, session, path):
    as_alice = login(alice)
    url = path.format(pk=session.pk)

    async def run():
        socket, ok = await connect(url, browser(as_alice))
        assert ok
        await in_thread(session_delete, session=session)
        assert await close_code(socket) == NOT_FOUND
        assert await refusal(url, browser(as_alice)) == told(path, NOT_FOUND)

    async_to_sync(run)()


def _give_to_bob(session: Session, alice: User, bob: User) -> None:
    Session.objects.filter(pk=session.pk).update(owner=bob)


def _deactivate_in_the_database(session: Session, alice: User, bob: User) -> None:
    User.objects.filter(pk=alice.pk).update(is_active=False)


def _revoke_in_the_database(session: Session, alice: User, bob: User) -> None:
    ApiKey.objects.filter(user=alice).update(revoked_at=timezone.now())


@pytest.mark.parametrize(
    ("change", "code"),
    [
        (_give_to_bob, NOT_FOUND),
        (_deactivate_in_the_database, SIGNED_OUT),
        (_revoke_in_the_database, SIGNED_OUT),
    ],
)
@pytest.mark.parametrize("path", PATHS)
def test_each_event_checks_the_access_again_and_a_lost_one_closes_the_socket(
    settings, alice, bob, session, path, change, code
):
    """A change made without the services (no message closes the socket): the next event
    finds it."""
    settings.ROLLBACK_WS_ACCESS_CACHE_SECONDS = 0
    _, secret = apikey_create(user=alice, name="script")

    async def run():
        socket, ok = await connect(path.format(pk=session.pk), bearer(secret))
        assert ok
        await publish(session, "before")
        assert "before" in await socket.receive_from(timeout=5)
        await in_thread(change, session, alice, bob)
        await publish(session, "after")
        assert await close_code(socket) == code

    async_to_sync(run)()


def _expire_the_login(client: Client, alice: User) -> None:
    client.session.delete()


def _change_the_password(client: Client, alice: User) -> None:
    alice.set_password("another-password-2")
    alice.save()


@pytest.mark.parametrize("change", [_expire_the_login, _change_the_password])
def test_an_idle_browser_socket_closes_once_its_login_no_longer_holds(
    settings, alice, session, change
):
    settings.ROLLBACK_WS_RECHECK_SECONDS = 0.05
    as_alice = login(alice)

    async def run():
        socket, ok = await connect(f"/ws/chat/{session.pk}/", browser(as_alice))
        assert ok
        await in_thread(change, as_alice, alice)
        assert await close_code(socket) == SIGNED_OUT  # with no event at all

    async_to_sync(run)()


def test_an_idle_socket_stays_open_while_its_access_holds(settings, alice, session):
    settings.ROLLBACK_WS_RECHECK_SECONDS = 0.05
    _, secret = apikey_create(user=alice, name="script")
    as_alice = login(alice)

    async def run():
        url = f"/ws/v1/sessions/{session.pk}/"
        by_cookie, ok = await connect(url, browser(as_alice))
        assert ok
        by_key, ok = await connect(url, bearer(secret))
        assert ok
        assert await by_cookie.receive_nothing(timeout=0.5)  # some ten checks, all passed
        assert await by_key.receive_nothing(timeout=0.01)
        await publish(session, "still here")
        assert "still here" in await by_cookie.receive_from(timeout=5)
        assert "still here" in await by_key.receive_from(timeout=5)
        await by_cookie.disconnect(timeout=10)
        await by_key.disconnect(timeout=10)

    async_to_sync(run)()


def test_checking_a_login_neither_ends_nor_renews_it_after_a_secret_key_rotation(
    settings, alice, session
):
    """A login made under the previous SECRET_KEY (now in SECRET_KEY_FALLBACKS) still holds;
    checking it from a socket must not give it a new session key that the browser never
    learns."""
    settings.ROLLBACK_WS_RECHECK_SECONDS = 0.05
    as_alice = login(alice)

    async def run():
        socket, ok = await connect(f"/ws/chat/{session.pk}/", browser(as_alice))
        assert ok
        settings.SECRET_KEY_FALLBACKS = [settings.SECRET_KEY]
        settings.SECRET_KEY = "a-new-secret-key-" + "x" * 40
        assert await socket.receive_nothing(timeout=0.5)  # some ten checks, all passed
        await socket.disconnect(timeout=10)

    async_to_sync(run)()
    assert as_alice.get(reverse("accounts:profile")).status_code == 200  # still signed in
