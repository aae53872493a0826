"""The address a request came from, for limits counted per client.

The connection's address (REMOTE_ADDR) is the client's, unless the site runs behind reverse
proxies: then ROLLBACK_TRUSTED_PROXIES says how many of them there are, and the client is the
address the outermost one appended to X-Forwarded-For, that many entries from the right. Entries
further left were written by the client and are never believed.
"""

from __future__ import annotations

import ipaddress

from django.conf import settings
from django.http import HttpRequest


def _address(value: str) -> str | None:
    try:
        return str(ipaddress.ip_address(value.strip()))
    except ValueError:
        return None


def client_ip(request: HttpRequest) -> str | None:
    """The client's IP address, or None when the request carries none that parses."""
    remote = _address(str(request.META.get("REMOTE_ADDR") or ""))
    proxies = int(getattr(settings, "ROLLBACK_TRUSTED_PROXIES", 0))
    if proxies <= 0:
        return remote
    forwarded = str(request.META.get("HTTP_X_FORWARDED_FOR", "")).split(",")
    if len(forwarded) < proxies:  # not through as many proxies as configured: a direct request
        return remote
    return _address(forwarded[-proxies]) or remote
