"""Limits on signing in and signing up, counted in the cache (core.limits).

Each limit is a counter per subject (a username, a client's network) that starts with the first
attempt and lives for the limit's window. An attempt takes a place in the counter *before* any
work, with one atomic `incr`, and is refused when no place is left: so fifty attempts arriving
at once cannot all pass a check made before any of them was counted. The limit lifts when the
window ends.

Sign-in counts failures only: a sign-in that succeeds gives its place back and clears its
username's count. A username is counted whether or not such a user exists.

The counters need a cache whose `incr` is atomic: locmem (counts per process) or Redis (shared by
every process; set REDIS_URL when several processes serve the site).
"""

from __future__ import annotations

import ipaddress
import unicodedata
from dataclasses import dataclass

from django.conf import settings

from core.limits import Counter, counter

from .errors import LoginLocked, SignupLimited


def _network(ip: str) -> str:
    """An IPv6 client is counted by its /64, which a single subscriber usually has whole."""
    address = ipaddress.ip_address(ip)
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network(f"{address}/64", strict=False))
    return str(address)


# --- Sign-in ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class LoginAttempt:
    """The places one sign-in attempt holds, until it is known to have succeeded."""

    username: Counter
    client: Counter | None

    def succeeded(self) -> None:
        """Only failures count: clear the username's count and give the client's place back."""
        self.username.clear()
        if self.client is not None:
            self.client.give_back()


def _login_seconds() -> int:
    return int(settings.ROLLBACK_LOGIN_LOCKOUT_SECONDS)


def login_attempt_start(*, username: str, client_ip: str | None) -> LoginAttempt:
    """Take a place for one sign-in attempt, before its password is checked. Raises LoginLocked
    when the username, or the client's network, has no failure left in its window."""
    name = unicodedata.normalize("NFKC", username).casefold()
    user_counter = counter(
        "login-user",
        name,
        limit=int(settings.ROLLBACK_LOGIN_FAILURES_LIMIT),
        seconds=_login_seconds(),
    )
    if not user_counter.take():
        raise LoginLocked(retry_after=user_counter.retry_after())
    client_counter = None
    if client_ip is not None:
        client_counter = counter(
            "login-ip",
            _network(client_ip),
            limit=int(settings.ROLLBACK_LOGIN_FAILURES_PER_IP),
            seconds=_login_seconds(),
        )
        if not client_counter.take():
            user_counter.give_back()
            raise LoginLocked(retry_after=client_counter.retry_after())
    return LoginAttempt(username=user_counter, client=client_counter)


# --- Sign-up ----------------------------------------------------------------------------------


def signup_attempt_start(*, client_ip: str | None) -> None:
    """Count one sign-up attempt of a client's network; SignupLimited when its hour is used up.
    Without an address (a sign-up made by code, not by a request) nothing is counted."""
    if client_ip is None:
        return
    signups = counter(
        "signup-ip",
        _network(client_ip),
        limit=int(settings.ROLLBACK_SIGNUPS_PER_HOUR_PER_IP),
        seconds=60 * 60,
    )
    if not signups.take():
        raise SignupLimited(retry_after=signups.retry_after())
