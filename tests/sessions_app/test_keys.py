"""Session keys (sessions_app.keys): the grammar, and finding or making a user's session by key,
also when several first uses race (on PostgreSQL)."""

from __future__ import annotations

import pytest

from agents.services import chat_submit
from sessions_app.errors import InvalidSessionKey, SessionLimitReached, TurnInProgress
from sessions_app.keys import SESSION_KEY_MAX_LENGTH, SessionKey, parse_session_key
from sessions_app.models import Branch, Session, Turn
from sessions_app.services import session_create, session_for_key
from tests.sessions_app.test_concurrency import _run_threads

KEY = "agent:shket:main:12345"


def test_a_key_splits_into_agent_scope_and_a_chat_id_that_may_hold_colons():
    assert parse_session_key(KEY) == SessionKey("shket", "main", "12345")
    assert parse_session_key("agent:bot.v2:per-channel-peer:telegram:-100123") == SessionKey(
        "bot.v2", "per-channel-peer", "telegram:-100123"
    )
    assert str(parse_session_key("agent:a:per-peer:x")) == "agent:a:per-peer:x"


def test_the_longest_key_is_216_characters():
    longest = "agent:" + "a" * 64 + ":per-channel-peer:" + "c" * 128
    assert len(longest) == SESSION_KEY_MAX_LENGTH == 216
    assert str(parse_session_key(longest)) == longest
    with pytest.raises(InvalidSessionKey, match="216"):
        parse_session_key(longest + "c")


@pytest.mark.parametrize(
    ("key", "says"),
    [
        (None, "must be text"),
        (b"agent:a:main:1", "must be text"),
        ("agent:a:main", "four parts"),
        ("agents:a:main:1", "start with 'agent:'"),
        ("agent:a/b:main:1", "agent id"),
        ("agent:a:everyone:1", "not main, per-peer or per-channel-peer"),
        ("agent:a:main:", "chat id is empty"),
        ("agent:a:main:" + "1" * 129, "longer than 128"),
        ("agent:a:main:a\tb", "U+0009"),
        ("agent:a:main:a\u00a0b", "U+00A0"),
        ("agent:a:main:\ue000", "U+E000"),
    ],
)
def test_a_malformed_key_is_refused_saying_why_and_the_form(key, says):
    with pytest.raises(InvalidSessionKey, match="Malformed session key") as caught:
        parse_session_key(key)
    assert says in caught.value.message
    assert "Expected agent:<agentId>:<scope>:<chatId>" in caught.value.message


def test_the_default_name_says_agent_scope_and_chat_and_fits_a_name():
    assert parse_session_key(KEY).default_name == "shket · main · 12345"
    long = parse_session_key("agent:" + "a" * 64 + ":per-channel-peer:" + "c" * 128)
    assert len(long.default_name) == 200
    assert long.default_name.endswith("…")


@pytest.mark.django_db
def test_session_for_key_makes_the_session_once_then_finds_it(alice):
    made = session_for_key(owner=alice, session_key=KEY)
    assert made.session_key == KEY
    assert made.session_name == "shket · main · 12345"
    assert Branch.objects.get(session=made).is_current
    assert session_for_key(owner=alice, session_key=KEY).pk == made.pk
    assert Session.objects.count() == 1


@pytest.mark.django_db
def test_scopes_and_owners_separate_sessions(alice, bob):
    main = session_for_key(owner=alice, session_key="agent:a:main:7")
    peer = session_for_key(owner=alice, session_key="agent:a:per-peer:7")
    channel = session_for_key(owner=alice, session_key="agent:a:per-channel-peer:7")
    bobs = session_for_key(owner=bob, session_key="agent:a:main:7")
    assert len({main.pk, peer.pk, channel.pk, bobs.pk}) == 4
    assert bobs.owner == bob
    assert main.owner == alice


@pytest.mark.django_db
def test_session_create_refuses_a_key_the_owner_already_uses(alice, bob):
    from django.db import IntegrityError

    session_create(owner=alice, name="one", session_key=KEY)
    session_create(owner=bob, name="bob's", session_key=KEY)
    with pytest.raises(IntegrityError):
        session_create(owner=alice, name="two", session_key=KEY)


@pytest.mark.django_db
def test_session_create_checks_the_key(alice):
    with pytest.raises(InvalidSessionKey):
        session_create(owner=alice, name="x", session_key="agent:a:main")
    assert not Session.objects.exists()


@pytest.mark.django_db
def test_a_new_key_over_the_sessions_limit_is_refused(alice, settings):
    settings.ROLLBACK_MAX_SESSIONS_PER_USER = 1
    session_for_key(owner=alice, session_key=KEY)
    with pytest.raises(SessionLimitReached):
        session_for_key(owner=alice, session_key=KEY + "0")
    assert session_for_key(owner=alice, session_key=KEY).session_key == KEY
    assert Session.objects.count() == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_simultaneous_first_uses_of_a_key_make_one_session(alice, bob):
    found: list[int] = []

    def work(i: int) -> None:
        owner = alice if i % 4 else bob
        found.append(session_for_key(owner=owner, session_key=KEY).pk)

    assert _run_threads(work, 8) == []
    assert Session.objects.filter(owner=alice).count() == 1
    assert Session.objects.filter(owner=bob).count() == 1
    alices = Session.objects.get(owner=alice).pk
    assert sorted(set(found)) == sorted({alices, Session.objects.get(owner=bob).pk})
    assert found.count(alices) == 6
    assert Branch.objects.filter(session_id=alices).count() == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_simultaneous_first_chats_make_one_session_and_one_turn(alice, settings):
    settings.ROLLBACK_RUN_TURNS_INLINE = False

    def work(i: int) -> None:
        chat_submit(owner=alice, session_key=KEY, message=f"hello {i}")

    errors = _run_threads(work, 6)
    assert all(isinstance(e, TurnInProgress) for e in errors), errors
    assert len(errors) == 5
    assert Session.objects.count() == 1
    assert Turn.objects.count() == 1
