"""The authentication backend: Django's, behind the sign-in limits (accounts.limits).

Every sign-in with a password goes through `django.contrib.auth.authenticate`, whichever page
it came from (the login page, the admin's login), and so through this backend. It takes the
attempt's place in the limits before the password is checked, and raises LoginLocked (which
`authenticate` lets through, unlike PermissionDenied) for the form to show. The right password
of an account waiting for an administrator's approval (or refused) raises AccountNotApproved,
for the page to say so rather than "wrong password"; a wrong one says nothing of the account.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.backends import ModelBackend
from django.http import HttpRequest

from core.client_ip import client_ip

from .errors import AccountNotApproved, PasswordSignInOff
from .limits import login_attempt_start
from .models import User
from .selectors import is_first_administrator


def approval_refusal(user: User) -> AccountNotApproved | None:
    """Why `user` (whose credentials held) may not sign in yet: their account waits for an
    administrator's approval, or was refused; None for an approved one."""
    if user.approval == User.Approval.APPROVED:
        return None
    return AccountNotApproved(refused=user.approval == User.Approval.REFUSED)


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
        user = self._checked(username, password)
        if user is None:
            return None
        if not settings.LOCAL_LOGIN and not is_first_administrator(user):
            attempt.succeeded()  # the right password: no failure to count
            raise PasswordSignInOff()
        if self.user_can_authenticate(user):
            attempt.succeeded()
            return user
        refusal = approval_refusal(user)
        if refusal is not None:
            attempt.succeeded()  # the right password: no failure to count
            raise refusal
        return None  # turned off by an administrator: as a wrong password

    @staticmethod
    def _checked(username: str, password: str) -> User | None:
        """The account whose password `password` is (ModelBackend's check, one hash either way,
        so an unknown username takes as long as a known one)."""
        try:
            user = User._default_manager.get_by_natural_key(username)
        except User.DoesNotExist:
            User().set_password(password)
            return None
        return user if user.check_password(password) else None

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
