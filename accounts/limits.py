"""Limits on signing in and signing up, counted in the cache.

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

import hashlib
import ipaddress
import math
import time
import unicodedata
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache

from .errors import LoginLocked, SignupLimited


@dataclass(frozen=True)
class _Counter:
    key: str
    limit: int  # 0: no limit
    seconds: int

    def take(self) -> bool:
        """Take a place; False, taking none, when every place is taken."""
        if self.limit <= 0:
            return True
        cache.add(f"{self.key}:since", time.time(), self.seconds)
        cache.add(self.key, 0, self.seconds)
        try:
            count = cache.incr(self.key)
        except ValueError:  # the window ended between add and incr: a new one starts
            cache.add(self.key, 0, self.seconds)
            count = cache.incr(self.key)
        if count == 1:
            # Redis' incr of a key that expired just after Django's existence check makes a key
            # that never expires; the first place taken sets the window's end again.
            cache.touch(self.key, self.seconds)
        if count > self.limit:
            self.give_back()
            return False
        return True

    def give_back(self) -> None:
        if self.limit <= 0:
            return
        try:
            if cache.decr(self.key) < 0:  # the window ended meanwhile
                cache.delete(self.key)
        except ValueError:  # the window ended: nothing to give back
            pass

    def clear(self) -> None:
        cache.delete_many([self.key, f"{self.key}:since"])

    def retry_after(self) -> int:
        """Seconds until the window ends."""
        since = cache.get(f"{self.key}:since")
        if not isinstance(since, float):
            return self.seconds
        return max(1, min(self.seconds, math.ceil(since + self.seconds - time.time())))


def _counter(kind: str, subject: str, *, limit: int, seconds: int) -> _Counter:
    digest = hashlib.sha256(subject.encode("utf-8", "surrogatepass")).hexdigest()[:40]
    return _Counter(key=f"limits:{kind}:{digest}", limit=limit, seconds=max(1, seconds))


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

    username: _Counter
    client: _Counter | None

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
    user_counter = _counter(
        "login-user",
        name,
        limit=int(settings.ROLLBACK_LOGIN_FAILURES_LIMIT),
        seconds=_login_seconds(),
    )
    if not user_counter.take():
        raise LoginLocked(retry_after=user_counter.retry_after())
    client_counter = None
    if client_ip is not None:
        client_counter = _counter(
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
    counter = _counter(
        "signup-ip",
        _network(client_ip),
        limit=int(settings.ROLLBACK_SIGNUPS_PER_HOUR_PER_IP),
        seconds=60 * 60,
    )
    if not counter.take():
        raise SignupLimited(retry_after=counter.retry_after())
