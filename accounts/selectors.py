"""Reads of accounts."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, load_backend
from django.db.models import F, QuerySet
from django.utils.crypto import constant_time_compare

from .models import ApiKey, User

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser


def api_keys_for_user(user: User | AnonymousUser) -> QuerySet[ApiKey]:
    """The user's API keys, newest first (revoked ones too)."""
    return ApiKey.objects.for_user(user).order_by("-created_at", "-id")


def api_keys_profile(user: User | AnonymousUser) -> QuerySet[ApiKey]:
    """The user's API keys as the profile lists them: those in use first, newest first."""
    return ApiKey.objects.for_user(user).order_by(
        F("revoked_at").desc(nulls_first=True), "-created_at", "-id"
    )


def api_key_for_user(user: User | AnonymousUser, pk: int) -> ApiKey | None:
    """The user's API key `pk`, or None (missing or another user's)."""
    return ApiKey.objects.for_user(user).filter(pk=pk).first()


def login_is_current(*, session_key: str, user_id: int) -> bool:
    """Whether that browser login (a Django session) still signs this user in: not logged out
    nor expired, the user still active, and made with their current password. The check
    Django makes of every request's login (`django.contrib.auth.get_user`), read only: it
    neither ends nor renews the login."""
    session = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    backend_path = session.get(BACKEND_SESSION_KEY)
    if str(session.get(SESSION_KEY)) != str(user_id):
        return False
    if backend_path not in settings.AUTHENTICATION_BACKENDS:
        return False
    user = load_backend(backend_path).get_user(user_id)
    session_hash = session.get(HASH_SESSION_KEY)
    if user is None or not session_hash:
        return False
    hashes = [user.get_session_auth_hash(), *user.get_session_auth_fallback_hash()]
    return any(constant_time_compare(session_hash, known) for known in hashes)


def is_first_administrator(user: User) -> bool:
    """Whether `user` is the site's first administrator: its oldest superuser (the first
    account signed up, or the first made by `createsuperuser`), who may still sign in with a
    password while LOCAL_LOGIN is off."""
    first = User.objects.filter(is_superuser=True).order_by("pk").values_list("pk", flat=True)
    return user.is_superuser and first.first() == user.pk
