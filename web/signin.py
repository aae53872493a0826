"""What the login page and the admin's login share: the limits' refusal shown on the form, and
answered with 429 Too Many Requests."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError
from django.http import HttpResponse

from accounts.errors import AccountNotApproved, LoginLocked, PasswordSignInOff


class LimitedAuthenticationForm(AuthenticationForm):
    """AuthenticationForm that shows a refusal of the sign-in limits (raised by the
    authentication backend before the password is checked) above the form."""

    lockout: LoginLocked | None = None
    # The right password of an account that waits for approval, or was refused.
    waiting: AccountNotApproved | None = None

    def clean(self) -> dict[str, Any]:
        try:
            return super().clean()
        except LoginLocked as exc:
            self.lockout = exc
            raise ValidationError(exc.message, code="locked") from None
        except AccountNotApproved as exc:
            self.waiting = exc
            raise ValidationError(exc.message, code="not_approved") from None
        except PasswordSignInOff as exc:
            raise ValidationError(exc.message, code="passwords_off") from None


def lockout_status(response: HttpResponse, form: object) -> HttpResponse:
    """429, with Retry-After, for a page whose sign-in the limits refused."""
    if isinstance(form, LimitedAuthenticationForm) and form.lockout is not None:
        response.status_code = 429
        response["Retry-After"] = str(form.lockout.retry_after)
    return response
