"""Django's signals that concern accounts. Connected in `AccountsConfig.ready`."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.signals import user_logged_out
from django.dispatch import receiver
from django.http import HttpRequest

from core import events


@receiver(user_logged_out, dispatch_uid="accounts.close_the_sockets_of_the_login")
def close_the_sockets_of_the_login(
    sender: object, request: HttpRequest | None, **kwargs: Any
) -> None:
    """Every logout (the site's, the admin's) goes through `django.contrib.auth.logout`, which
    sends this signal while the login's session key is still known: the sockets that login
    opened close."""
    session = getattr(request, "session", None)
    session_key = session.session_key if session is not None else None
    if session_key:
        events.sockets_close_login(session_key=session_key)
