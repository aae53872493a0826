from __future__ import annotations

import threading

import pytest

from accounts.errors import LoginLocked, SignupLimited, TooManyAttempts
from accounts.limits import login_attempt_start, signup_attempt_start
from core.errors import HTTP_STATUS


@pytest.fixture(autouse=True)
def _limits(settings):
    settings.ROLLBACK_LOGIN_FAILURES_LIMIT = 5
    settings.ROLLBACK_LOGIN_FAILURES_PER_IP = 50
    settings.ROLLBACK_LOGIN_LOCKOUT_SECONDS = 15 * 60
    settings.ROLLBACK_SIGNUPS_PER_HOUR_PER_IP = 10


def fail(username: str, client_ip: str | None = "192.0.2.1", times: int = 1) -> None:
    """Attempts that take their places and never succeed."""
    for _ in range(times):
        login_attempt_start(username=username, client_ip=client_ip)


def test_fifty_attempts_at_once_get_no_more_places_than_the_limit():
    barrier = threading.Barrier(50)
    passed: list[int] = []
    refused: list[LoginLocked] = []

    def attempt(n: int) -> None:
        barrier.wait()
        try:
            login_attempt_start(username="alice", client_ip=f"192.0.2.{n}")
        except LoginLocked as exc:
            refused.append(exc)
        else:
            passed.append(n)

    threads = [threading.Thread(target=attempt, args=(n,)) for n in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert len(passed) == 5
    assert len(refused) == 45


def test_the_sixth_failure_in_the_window_is_refused_with_the_time_to_wait():
    fail("alice", times=5)
    with pytest.raises(LoginLocked) as caught:
        fail("alice")
    assert caught.value.message == "Too many failed sign-in attempts; try again in 15 minutes."
    assert 14 * 60 < caught.value.retry_after <= 15 * 60
    assert isinstance(caught.value, TooManyAttempts)
    assert HTTP_STATUS[caught.value.code] == 429


def test_usernames_are_counted_whatever_their_case_or_width():
    fail("alice", times=2)
    fail("ALICE", times=2)
    fail("ａｌｉｃｅ")  # noqa: RUF001 - fullwidth letters on purpose, NFKC "alice"
    with pytest.raises(LoginLocked):
        fail("Alice")


def test_other_usernames_are_not_locked_by_one_users_failures():
    fail("alice", times=5)
    fail("bob", times=5)


def test_a_success_clears_its_usernames_failures():
    fail("alice", times=4)
    login_attempt_start(username="alice", client_ip="192.0.2.1").succeeded()
    fail("alice", times=5)
    with pytest.raises(LoginLocked):
        fail("alice")


def test_a_client_is_limited_across_usernames(settings):
    settings.ROLLBACK_LOGIN_FAILURES_PER_IP = 3
    for name in ("ann", "ben", "cat"):
        fail(name, client_ip="198.51.100.7")
    with pytest.raises(LoginLocked):
        fail("dan", client_ip="198.51.100.7")
    fail("dan", client_ip="198.51.100.8")  # another client
    fail("dan", client_ip=None)  # no address: the username's limit only


def test_only_failures_count_against_a_client(settings):
    settings.ROLLBACK_LOGIN_FAILURES_PER_IP = 3
    fail("ann", client_ip="198.51.100.7", times=2)
    for _ in range(10):
        login_attempt_start(username="alice", client_ip="198.51.100.7").succeeded()
    fail("ben", client_ip="198.51.100.7")
    with pytest.raises(LoginLocked):
        fail("cat", client_ip="198.51.100.7")


def test_a_client_refused_leaves_the_usernames_count_untouched(settings):
    settings.ROLLBACK_LOGIN_FAILURES_PER_IP = 1
    fail("ann", client_ip="198.51.100.7")
    for _ in range(10):
        with pytest.raises(LoginLocked):
            fail("alice", client_ip="198.51.100.7")
    fail("alice", client_ip=None, times=5)  # alice's five failures are all left


def test_an_ipv6_client_is_counted_by_its_64(settings):
    settings.ROLLBACK_LOGIN_FAILURES_PER_IP = 2
    fail("ann", client_ip="2001:db8:1:2::1")
    fail("ben", client_ip="2001:db8:1:2:ffff::9")
    with pytest.raises(LoginLocked):
        fail("cat", client_ip="2001:db8:1:2::abcd")
    fail("cat", client_ip="2001:db8:1:3::1")  # another /64


def test_a_limit_of_zero_is_no_limit(settings):
    settings.ROLLBACK_LOGIN_FAILURES_LIMIT = 0
    settings.ROLLBACK_LOGIN_FAILURES_PER_IP = 0
    fail("alice", times=100)


def test_signups_are_limited_per_client_per_hour():
    for _ in range(10):
        signup_attempt_start(client_ip="203.0.113.5")
    with pytest.raises(SignupLimited) as caught:
        signup_attempt_start(client_ip="203.0.113.5")
    assert caught.value.message == "Too many sign-ups from your network; try again in 60 minutes."
    signup_attempt_start(client_ip="203.0.113.6")
    signup_attempt_start(client_ip=None)  # made by code, not by a request: not counted


def test_fifty_signups_at_once_get_no_more_places_than_the_limit():
    barrier = threading.Barrier(50)
    passed: list[int] = []

    def attempt(n: int) -> None:
        barrier.wait()
        try:
            signup_attempt_start(client_ip="203.0.113.5")
        except SignupLimited:
            return
        passed.append(n)

    threads = [threading.Thread(target=attempt, args=(n,)) for n in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert len(passed) == 10
