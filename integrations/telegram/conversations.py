"""A linked chat's conversation: the user's session of key `agent:telegram:per-peer:<chat_id>`
(made on first use, a session like any other in the web app), and `/new`, which moves the key to
a new session and leaves the old one as it is."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from accounts.models import User
from sessions_app.keys import parse_session_key
from sessions_app.models import Session, Turn
from sessions_app.services import session_create, session_for_key, session_quota_check

KEY_PREFIX = "agent:telegram:per-peer:"


def session_key(chat_id: int) -> str:
    return f"{KEY_PREFIX}{chat_id}"


def chat_of_key(key: str) -> int | None:
    """The chat whose conversation a session key names, or None for any other key."""
    if not key.startswith(KEY_PREFIX):
        return None
    try:
        return int(key[len(KEY_PREFIX) :])
    except ValueError:
        return None


def chat_session(*, user: User, chat_id: int) -> Session:
    """The chat's current conversation, made on first use."""
    return session_for_key(owner=user, session_key=session_key(chat_id))


def awaiting_turn(*, user: User, chat_id: int) -> Turn | None:
    """The turn of the chat's conversation that waits for its owner's approval, if any (made
    on no use: a chat without a conversation has none)."""
    return (
        Turn.objects.filter(
            session__owner=user,
            session__session_key=session_key(chat_id),
            status=Turn.Status.AWAITING_APPROVAL,
        )
        .order_by("-pk")
        .first()
    )


def chat_session_new(*, user: User, chat_id: int) -> Session:
    """Start a new conversation for the chat: the key leaves the session that holds it (which
    stays, with its branches and checkpoints, in the web app) for a new, empty session. Under
    the lock on the owner's row that every session creation takes (`session_quota_check`), so
    the move and `session_for_key`'s first use cannot make two sessions of the key; the
    unique (owner, session_key) constraint backs it up. A full quota refuses it
    (SessionLimitReached) and leaves the old session keyed."""
    key = session_key(chat_id)
    name = f"{parse_session_key(key).default_name} · {timezone.localtime():%Y-%m-%d %H:%M}"
    with transaction.atomic():
        session_quota_check(owner=user)
        Session.objects.filter(owner=user, session_key=key).update(session_key="")
        return session_create(owner=user, name=name, session_key=key)
