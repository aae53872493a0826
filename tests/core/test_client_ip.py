from __future__ import annotations

import pytest
from django.test import RequestFactory

from core.client_ip import client_ip


def request(remote: str = "192.0.2.10", forwarded: str | None = None):
    extra = {"REMOTE_ADDR": remote}
    if forwarded is not None:
        extra["HTTP_X_FORWARDED_FOR"] = forwarded
    return RequestFactory().get("/", **extra)


def test_without_trusted_proxies_forwarded_for_is_ignored():
    assert client_ip(request(forwarded="203.0.113.1")) == "192.0.2.10"


@pytest.mark.parametrize(
    ("proxies", "forwarded", "expected"),
    [
        (1, "203.0.113.1", "203.0.113.1"),
        # Entries left of the ones the proxies appended were written by the client.
        (1, "10.9.9.9, 203.0.113.1", "203.0.113.1"),
        (2, "10.9.9.9, 203.0.113.1, 198.51.100.2", "203.0.113.1"),
        (1, " 2001:db8::1 ", "2001:db8::1"),
    ],
)
def test_trusted_proxies_name_the_client_from_the_right(settings, proxies, forwarded, expected):
    settings.ROLLBACK_TRUSTED_PROXIES = proxies
    assert client_ip(request(forwarded=forwarded)) == expected


@pytest.mark.parametrize("forwarded", [None, "", "not-an-address", "203.0.113.1"])
def test_a_missing_or_malformed_forwarded_for_falls_back_to_the_connection(settings, forwarded):
    settings.ROLLBACK_TRUSTED_PROXIES = 2  # "203.0.113.1" alone went through fewer proxies
    assert client_ip(request(forwarded=forwarded)) == "192.0.2.10"


def test_a_request_without_an_address_has_none():
    assert client_ip(request(remote="")) is None
