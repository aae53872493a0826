"""The authentication backend: Django's, behind the sign-in limits (accounts.limits).

Every sign-in with a password goes through `django.contrib.auth.authenticate`, whichever page
it came from (the login page, the admin's login), and so through this backend. It takes the
attempt's place in the limits before the password is checked, and raises LoginLocked (which
`authenticate` lets through, unlike PermissionDenied) for the form to show.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth.backends import ModelBackend
from django.http import HttpRequest

from core.client_ip import client_ip

from .limits import login_attempt_start
from .models import User


class LimitedModelBackend(ModelBackend):
    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> User | None:
        if username is None:
            username = kwargs.get(User.USERNAME_FIELD)
        if not isinstance(username, str) or password is None:
            return None
        attempt = login_attempt_start(
            username=username, client_ip=client_ip(request) if request is not None else None
        )
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is not None:
            attempt.succeeded()
        return user

    async def aauthenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> User | None:
        """ModelBackend checks passwords in async code on a path of its own: this one goes
        through the limits too."""
        return await sync_to_async(self.authenticate)(
            request, username=username, password=password, **kwargs
        )
