"""Single sign-on's two pages (accounts.oidc): the start, which sends the browser to the provider
with a fresh state, nonce and PKCE challenge, and the callback, which takes its answer. Every way
it can fail ends on the login page saying why in plain words (the provider down, an answer that
does not check out, a sign-in started elsewhere, no account while SSO sign-up is off), or, for
an account that waits for approval, on the waiting page; never on an error page."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.contrib import auth, messages
from django.contrib.auth import BACKEND_SESSION_KEY
from django.contrib.auth import views as auth_views
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views import View
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from accounts.backends import approval_refusal
from accounts.errors import SsoSignInFailed
from accounts.oidc import OIDC_BACKEND, provider_setting, provider_sign_out_url, sso_enabled
from web.pages.accounts import login_context, waiting
from web.pages.forms import LoginForm

logger = logging.getLogger(__name__)

# A provider's own words about an error it answers with, as shown (bounded, as text).
PROVIDER_WORDS_MAX = 200


def sso_failed(request: HttpRequest, text: str, status: int = 400) -> HttpResponse:
    """The login page, saying why single sign-on did not sign the person in."""
    context = {"form": LoginForm(request), "sso_error": text, **login_context()}
    return render(request, "accounts/login.html", context, status=status)


class SsoStart(OIDCAuthenticationRequestView):  # type: ignore[misc]
    get_settings = staticmethod(provider_setting)

    def __init__(self, **kwargs: Any) -> None:
        View.__init__(self, **kwargs)  # the endpoints are read in `get`, where a failure shows

    def get(self, request: HttpRequest) -> HttpResponse:
        if not sso_enabled():
            raise Http404
        try:
            self.OIDC_OP_AUTH_ENDPOINT = provider_setting("OIDC_OP_AUTHORIZATION_ENDPOINT")
        except SsoSignInFailed as exc:
            return sso_failed(request, exc.people, status=503)
        self.OIDC_RP_CLIENT_ID = settings.OIDC_CLIENT_ID
        return super().get(request)  # type: ignore[no-any-return]


class SignOut(auth_views.LogoutView):
    """Django's logout; after a single sign-on, it also says the provider's session goes on, and
    where to end it."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        through_sso = request.session.get(BACKEND_SESSION_KEY) == OIDC_BACKEND
        response = super().post(request, *args, **kwargs)
        if through_sso:
            where = provider_sign_out_url()
            said = (
                f"You are signed out of Rollback. You may still be signed in at "
                f"{settings.OIDC_NAME}"
            )
            said += f": sign out there too ({where})." if where else ": sign out there too."
            messages.info(request, said)
        return response


class SsoCallback(OIDCAuthenticationCallbackView):  # type: ignore[misc]
    get_settings = staticmethod(provider_setting)

    def get(self, request: HttpRequest) -> HttpResponse:
        if not sso_enabled():
            raise Http404
        try:
            return super().get(request)  # type: ignore[no-any-return]
        except SuspiciousOperation as exc:
            logger.warning("single sign-on refused: %s", exc)
            return sso_failed(request, self._refused_text(request))
        except SsoSignInFailed as exc:
            return sso_failed(request, exc.people, status=403)

    @staticmethod
    def _refused_text(request: HttpRequest) -> str:
        return (
            f"The answer from {settings.OIDC_NAME} did not check out (a sign-in started in "
            "another browser or tab, one already used, or a token this server cannot trust), "
            "so you are not signed in. Start again with the button below."
        )

    def login_failure(self) -> HttpResponse:
        request = self.request
        user = getattr(self, "user", None)
        if user is not None and not user.is_active:
            refusal = approval_refusal(user)
            if refusal is not None:
                return waiting(request, refusal, user.get_username())
            return sso_failed(request, "This account is turned off.", status=403)
        error = request.GET.get("error")
        if error:
            words = str(request.GET.get("error_description") or error)[:PROVIDER_WORDS_MAX]
            return sso_failed(
                request, f"{settings.OIDC_NAME} did not sign you in: {words}", status=403
            )
        if request.user.is_authenticated:
            auth.logout(request)
        return sso_failed(request, self._refused_text(request))
