"""Account pages: sign-up, log in and out, password change, and the profile (preferences and API
keys). Each view parses the form, calls a service and renders or redirects."""

from __future__ import annotations

import secrets
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import BACKEND_SESSION_KEY, update_session_auth_hash
from django.contrib.auth import login as auth_login
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import AuthenticationForm, PasswordChangeForm
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.urls import reverse, reverse_lazy
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from accounts.errors import AccountNotApproved, SignupClosed, TooManyAttempts
from accounts.models import ApiKey, User
from accounts.oidc import OIDC_BACKEND
from accounts.selectors import api_key_for_user, api_keys_profile
from accounts.services import (
    apikey_create,
    apikey_revoke,
    preferences_update,
    signup_closed,
    signup_is_open,
    user_password_set,
    user_signup,
)
from core.client_ip import client_ip
from core.errors import InvalidInput
from core.http import domain_errors
from integrations.telegram.links import LinkCode, link_code_create
from web.pages.forms import (
    ApiKeyCreateForm,
    LoginForm,
    PreferencesForm,
    SignupForm,
    add_domain_error,
)
from web.pages.shares import profile_shares
from web.pages.telegram import profile_telegram
from web.signin import LimitedAuthenticationForm, lockout_status

# Keys listed on the profile: every active one (at most 50) and the latest revoked ones.
PROFILE_KEYS_SHOWN = 100

# A new key's secret travels from the POST that made it to the one GET that shows it split in
# two: a random pad in the session and the secret masked with it in a short-lived cookie. Neither
# alone reveals it (so the session table never holds a secret), and the GET drops both.
NEW_KEY_SESSION = "new_api_key"
NEW_KEY_COOKIE = "new_api_key"
NEW_KEY_MAX_AGE = 300


def _xor(data: bytes, pad: bytes) -> bytes:
    return bytes(a ^ b for a, b in zip(data, pad, strict=True))


def _stash_new_key(request: HttpRequest, response: HttpResponse, key: ApiKey, secret: str) -> None:
    data = secret.encode()
    pad = secrets.token_bytes(len(data))
    request.session[NEW_KEY_SESSION] = {"id": key.pk, "pad": pad.hex()}
    response.set_cookie(
        NEW_KEY_COOKIE,
        _xor(data, pad).hex(),
        max_age=NEW_KEY_MAX_AGE,
        path=reverse("accounts:profile"),
        secure=request.is_secure(),
        httponly=True,
        samesite="Strict",
    )


def _take_new_key(request: HttpRequest) -> tuple[ApiKey, str] | None:
    """The key made by this browser's last POST and its secret, once; None after that."""
    stash = request.session.pop(NEW_KEY_SESSION, None)
    masked = request.COOKIES.get(NEW_KEY_COOKIE, "")
    if not isinstance(stash, dict) or not masked:
        return None
    try:
        secret = _xor(bytes.fromhex(masked), bytes.fromhex(str(stash.get("pad")))).decode()
    except (ValueError, UnicodeDecodeError):
        return None
    key_id = stash.get("id")
    if not isinstance(key_id, int):
        return None
    key = api_key_for_user(_user(request), key_id)
    return (key, secret) if key is not None else None


def _user(request: HttpRequest) -> User:
    """The user of a request to a @login_required view."""
    user = request.user
    if not isinstance(user, User):  # login_required lets only users in
        raise PermissionDenied
    return user


def _closed(request: HttpRequest, exc: SignupClosed | None = None) -> HttpResponse:
    """The sign-up page without its form; a refused POST answers 403."""
    text = (exc or signup_closed()).message
    status = 403 if request.method == "POST" else 200
    context = {"signup_open": False, "closed_text": text}
    return render(request, "accounts/signup.html", context, status=status)


@never_cache
def signup(request: HttpRequest) -> HttpResponse:
    if request.user.is_authenticated:
        return redirect(settings.LOGIN_REDIRECT_URL)
    if not signup_is_open():
        return _closed(request)
    form = SignupForm(request.POST if request.method == "POST" else None)
    status = 400 if form.is_bound else 200
    limited: TooManyAttempts | None = None
    if form.is_valid():
        data = form.cleaned_data
        try:
            user = user_signup(
                username=data["username"],
                password=data["password"],
                email=data["email"],
                client_ip=client_ip(request),
            )
        except SignupClosed as exc:
            return _closed(request, exc)
        except TooManyAttempts as exc:
            add_domain_error(form, exc)
            status, limited = 429, exc
        except InvalidInput as exc:
            add_domain_error(form, exc)
        else:
            if user.approval != User.Approval.APPROVED:  # ACCOUNTS_PENDING: not signed in
                return waiting(request, AccountNotApproved(refused=False), user.get_username())
            auth_login(request, user)
            messages.success(request, f"Welcome, {user.get_username()}: your account is ready.")
            return redirect(settings.LOGIN_REDIRECT_URL)
    response = render(
        request, "accounts/signup.html", {"form": form, "signup_open": True}, status=status
    )
    if limited is not None:
        response["Retry-After"] = str(limited.retry_after)
    return response


def login_context() -> dict[str, Any]:
    """What the login page shows beside its form: sign-up, password sign-in, single sign-on."""
    return {
        "signup_open": signup_is_open(),
        "local_login": settings.LOCAL_LOGIN,
        "sso_name": settings.OIDC_NAME if settings.OIDC_ISSUER else "",
    }


def waiting(request: HttpRequest, exc: AccountNotApproved, username: str = "") -> HttpResponse:
    """The page of an account that waits for approval (200, after its sign-up) or was refused,
    or whose sign-in it refused (403)."""
    context = {"text": exc.message, "refused": exc.refused, "username": username}
    status = 200 if request.resolver_match and request.resolver_match.url_name == "signup" else 403
    return render(request, "accounts/waiting.html", context, status=status)


class LoginView(auth_views.LoginView):
    template_name = "accounts/login.html"
    authentication_form = LoginForm
    redirect_authenticated_user = True

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        # Signed in through single sign-on, which is now turned off: say why they are out.
        sso_gone = self.request.session.get(BACKEND_SESSION_KEY) == OIDC_BACKEND
        sso_gone = sso_gone and not settings.OIDC_ISSUER
        return super().get_context_data(**login_context(), sso_gone=sso_gone, **kwargs)

    def form_invalid(self, form: AuthenticationForm) -> HttpResponse:
        if isinstance(form, LimitedAuthenticationForm) and form.waiting is not None:
            return waiting(self.request, form.waiting, form.cleaned_data.get("username", ""))
        return lockout_status(super().form_invalid(form), form)


class PasswordChangeView(auth_views.PasswordChangeView):
    template_name = "accounts/password_change.html"
    success_url = reverse_lazy("accounts:profile")

    def form_valid(self, form: PasswordChangeForm) -> HttpResponse:
        """Django's form checked the passwords; the service changes it, which closes the sockets
        of the user's other logins. This login stays signed in (under a new key)."""
        user_password_set(
            user=form.user,
            password=form.cleaned_data["new_password1"],
            keep_login=self.request.session.session_key,
        )
        update_session_auth_hash(self.request, form.user)
        messages.success(self.request, "Your password is changed.")
        return HttpResponseRedirect(self.get_success_url())


def _profile_page(
    request: HttpRequest,
    *,
    preferences_form: PreferencesForm | None = None,
    key_form: ApiKeyCreateForm | None = None,
    new_key: tuple[ApiKey, str] | None = None,
    link_code: LinkCode | None = None,
    status: int = 200,
) -> HttpResponse:
    user = _user(request)
    if preferences_form is None:
        auto_checkpoint = user.preference("auto_checkpoint", True)
        preferences_form = PreferencesForm(
            initial={
                "auto_checkpoint": auto_checkpoint is not False,
                "checkpoint_each_message": user.preference("checkpoint_each_message") is True,
                "theme": user.preference("theme", "system"),
                "instructions": user.preference("instructions", ""),
            }
        )
    keys = api_keys_profile(user)[:PROFILE_KEYS_SHOWN]
    context = {
        "preferences_form": preferences_form,
        "key_form": key_form or ApiKeyCreateForm(),
        "api_keys": keys,
        "new_key": new_key[0] if new_key else None,
        "new_secret": new_key[1] if new_key else None,
        **profile_shares(request, user),
        **profile_telegram(user, link_code=link_code),
    }
    return render(request, "accounts/profile.html", context, status=status)


@login_required
@never_cache
def profile(request: HttpRequest) -> HttpResponse:
    """The profile; a POST saves the preferences. Right after a key is made, the page shows its
    secret, once."""
    if request.method != "POST":
        new_key = _take_new_key(request)
        response = _profile_page(request, new_key=new_key)
        if NEW_KEY_COOKIE in request.COOKIES:
            response.delete_cookie(NEW_KEY_COOKIE, path=reverse("accounts:profile"))
        return response
    form = PreferencesForm(request.POST)
    if form.is_valid():
        try:
            preferences_update(
                user=_user(request),
                auto_checkpoint=form.cleaned_data["auto_checkpoint"],
                checkpoint_each_message=form.cleaned_data["checkpoint_each_message"],
                theme=form.cleaned_data["theme"],
                # A form without the field (an older page) leaves them as they are.
                instructions=(
                    form.cleaned_data["instructions"] if "instructions" in request.POST else None
                ),
            )
        except InvalidInput as exc:
            add_domain_error(form, exc)
        else:
            messages.success(request, "Preferences saved.")
            return redirect("accounts:profile")
    return _profile_page(request, preferences_form=form, status=400)


@login_required
@require_POST
@never_cache
def apikey_create_view(request: HttpRequest) -> HttpResponse:
    """Create a key and send the browser (303) to the profile, which shows its secret once: a
    refresh there shows it no more and makes no other key. The secret is never stored whole,
    not even in the session, nor cached."""
    form = ApiKeyCreateForm(request.POST)
    if form.is_valid():
        try:
            new_key = apikey_create(user=_user(request), name=form.cleaned_data["name"])
        except InvalidInput as exc:
            add_domain_error(form, exc)
        else:
            response = HttpResponseRedirect(reverse("accounts:profile") + "#api-keys")
            response.status_code = 303
            _stash_new_key(request, response, *new_key)
            return response
    return _profile_page(request, key_form=form, status=400)


@login_required
@require_POST
@domain_errors
def apikey_revoke_view(request: HttpRequest, key_id: int) -> HttpResponse:
    key = apikey_revoke(user=_user(request), key_id=key_id)
    messages.success(request, f"API key “{key.name}” is revoked; programs using it are refused.")
    return redirect("accounts:profile")


@login_required
@require_POST
@never_cache
@domain_errors
def telegram_link_view(request: HttpRequest) -> HttpResponse:
    """A new one-time code to link a Telegram chat, shown on the profile with the message to
    send the bot (`/start CODE`). Answered here, not redirected: the code lives ten minutes
    and is made again by a new press (which retires this one)."""
    made = link_code_create(user=_user(request))
    return _profile_page(request, link_code=made)
