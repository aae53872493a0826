"""Single sign-on with an OpenID Connect provider (OIDC_ISSUER), through mozilla-django-oidc.

The provider's endpoints come from its discovery document (`<issuer>/.well-known/openid-
configuration`), read when a sign-in needs them and kept for DISCOVERY_SECONDS; a document whose
issuer is not OIDC_ISSUER is refused. The library runs the code flow (state, nonce and PKCE kept
in the browser's session, each state spent once) and checks the ID token's signature against the
provider's keys; `OidcBackend` adds what it leaves out: the issuer, the audience (and `azp` when
there are several), the expiry and the times it must carry. A person is found by the provider's
subject alone (accounts.models.SsoIdentity), never by an e-mail address; a first sign-in makes
their account (accounts.services.user_sso_create) unless OIDC_SIGNUP is off. With
OIDC_GROUPS_CLAIM set, every sign-in sets their groups from that claim (`claimed_group_names`,
read before anything is written; the groups set with the sign-in's own writes). The backend is
installed only when OIDC_ISSUER is set, and a password sign-in never reaches the provider.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import jwt
import requests
from django.conf import settings
from django.core.exceptions import SuspiciousOperation
from django.http import HttpRequest
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.utils import import_from_settings

from .errors import SsoSignInFailed
from .models import User
from .services import user_sso_create, user_sso_signed_in

# The backend's dotted path, as AUTHENTICATION_BACKENDS and a login's session name it.
OIDC_BACKEND = "accounts.oidc.OidcBackend"
DISCOVERY_SECONDS = 3600.0
# The most of the discovery document read (a provider that answers without end is cut off).
DISCOVERY_MAX_BYTES = 256 * 1024
# Clock skew allowed between this server and the provider when checking a token's times.
LEEWAY_SECONDS = 60
# The most group names a sign-in's claim may hold (OIDC_GROUPS_CLAIM); more refuses the sign-in.
GROUP_NAMES_MAX = 1000

_lock = threading.Lock()
_discovered: tuple[float, str, dict[str, Any]] | None = None


def sso_enabled() -> bool:
    return bool(settings.OIDC_ISSUER)


def unreachable() -> SsoSignInFailed:
    return SsoSignInFailed(
        f"{settings.OIDC_NAME} cannot be reached just now, so signing in with it failed. Try "
        "again in a moment."
    )


def discovery() -> dict[str, Any]:
    """The provider's discovery document (cached). SsoSignInFailed when it cannot be read or is
    not the configured issuer's."""
    global _discovered
    issuer = settings.OIDC_ISSUER
    with _lock:
        if _discovered and _discovered[1] == issuer and time.monotonic() < _discovered[0]:
            return _discovered[2]
    document = _read_discovery(issuer)
    with _lock:
        _discovered = (time.monotonic() + DISCOVERY_SECONDS, issuer, document)
    return document


def _read_discovery(issuer: str) -> dict[str, Any]:
    url = f"{issuer}/.well-known/openid-configuration"
    try:
        with requests.get(url, timeout=settings.OIDC_TIMEOUT, stream=True) as response:
            response.raise_for_status()
            body = response.raw.read(DISCOVERY_MAX_BYTES + 1, decode_content=True)
    except requests.RequestException:
        raise unreachable() from None
    try:
        if len(body) > DISCOVERY_MAX_BYTES:
            raise ValueError("too long")
        document = json.loads(body)
    except ValueError:
        raise unreachable() from None
    needed = ("authorization_endpoint", "token_endpoint", "jwks_uri")
    if not isinstance(document, dict) or not all(
        isinstance(document.get(key), str) and document[key].startswith(("https://", "http://"))
        for key in needed
    ):
        raise unreachable()
    if document.get("issuer") != issuer:
        raise SsoSignInFailed(
            f"{settings.OIDC_NAME} describes itself as another issuer than this server expects "
            "(OIDC_ISSUER), so no sign-in through it is trusted. Tell the administrator."
        )
    return document


# The library's settings that come from the provider's document or from ours.
_FROM_DISCOVERY = {
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
    "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
    "OIDC_OP_JWKS_ENDPOINT": "jwks_uri",
}
_FROM_SETTINGS = {
    "OIDC_RP_CLIENT_ID": "OIDC_CLIENT_ID",
    "OIDC_RP_CLIENT_SECRET": "OIDC_CLIENT_SECRET",
}


def provider_setting(attr: str, *default: Any) -> Any:
    """mozilla-django-oidc's `get_settings`, reading the endpoints from the discovery document."""
    if attr in _FROM_DISCOVERY:
        return discovery().get(_FROM_DISCOVERY[attr], *default or (None,))
    if attr in _FROM_SETTINGS:
        return getattr(settings, _FROM_SETTINGS[attr])
    return import_from_settings(attr, *default)


class OidcBackend(OIDCAuthenticationBackend):  # type: ignore[misc]
    get_settings = staticmethod(provider_setting)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Django makes a backend for every sign-in, passwords' too: the provider's endpoints
        # are read only when a code comes back from it (`authenticate`).
        self.UserModel = User

    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> User | None:
        if request is None or "nonce" not in kwargs or "code" not in request.GET:
            return None
        super().__init__()  # the endpoints, client and algorithm (the discovery document)
        try:
            return super().authenticate(request, **kwargs)  # type: ignore[no-any-return]
        except requests.RequestException:
            raise SsoSignInFailed(
                f"{settings.OIDC_NAME} did not complete the sign-in (it refused the code, or "
                "could not be reached). Try signing in again."
            ) from None

    def retrieve_matching_jwk(self, token: str) -> Any:
        """The provider's key that signed `token` (its JWKS, by the token's `kid`);
        SuspiciousOperation for a token that names none, or none of the provider's keys."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError:
            raise SuspiciousOperation("The ID token is not a JWT.") from None
        if header.get("alg") != self.OIDC_RP_SIGN_ALGO or not isinstance(header.get("kid"), str):
            raise SuspiciousOperation("The ID token is not signed with one of the provider's keys.")
        try:
            return super().retrieve_matching_jwk(token)
        except (KeyError, TypeError, ValueError, jwt.PyJWTError):
            raise SuspiciousOperation("The provider's keys could not be read.") from None

    def _verify_jws(self, payload: str, key: Any) -> dict[str, Any]:
        """The ID token's claims, once its signature (RS256, the provider's key), issuer,
        audience, expiry and issue time all hold; SuspiciousOperation otherwise."""
        try:
            header = jwt.get_unverified_header(payload)
        except jwt.InvalidTokenError:
            raise SuspiciousOperation("The ID token is not a JWT.") from None
        if header.get("alg") != self.OIDC_RP_SIGN_ALGO:
            raise SuspiciousOperation("The ID token is not signed with RS256.")
        try:
            claims: dict[str, Any] = jwt.decode(
                payload,
                key,
                algorithms=[self.OIDC_RP_SIGN_ALGO],
                audience=settings.OIDC_CLIENT_ID,
                issuer=settings.OIDC_ISSUER,
                leeway=LEEWAY_SECONDS,
                options={"require": ["exp", "iat", "iss", "aud", "sub"]},
            )
        except jwt.InvalidTokenError as exc:
            raise SuspiciousOperation(f"The ID token was refused: {exc}.") from None
        audience = claims["aud"]
        several = isinstance(audience, list) and len(audience) > 1
        if several and claims.get("azp") != settings.OIDC_CLIENT_ID:
            raise SuspiciousOperation("The ID token was issued to another client (azp).")
        return claims

    def get_userinfo(
        self, access_token: str, id_token: str, payload: dict[str, Any]
    ) -> dict[str, Any]:
        """The person's claims: the checked ID token's, with the userinfo endpoint's added when
        it names the same subject (the token's win)."""
        claims = dict(payload)
        if self.OIDC_OP_USER_ENDPOINT and access_token:
            try:
                extra = super().get_userinfo(access_token, id_token, payload)
            except (requests.RequestException, ValueError, SuspiciousOperation):
                extra = None
            if isinstance(extra, dict) and extra.get("sub") == payload.get("sub"):
                claims = {**extra, **payload}
        return claims

    def verify_claims(self, claims: dict[str, Any]) -> bool:
        subject = claims.get("sub")
        return isinstance(subject, str) and 0 < len(subject) <= 255

    def filter_users_by_claims(self, claims: dict[str, Any]) -> Any:
        return User.objects.filter(
            sso_identities__issuer=settings.OIDC_ISSUER, sso_identities__subject=claims["sub"]
        )

    def create_user(self, claims: dict[str, Any]) -> User:
        if not settings.OIDC_SIGNUP:
            raise SsoSignInFailed(
                f"You have no account on this server yet, and it does not make one through "
                f"{settings.OIDC_NAME}. Ask an administrator for an account."
            )
        group_names = claimed_group_names(claims)
        email = claims.get("email") if claims.get("email_verified") is True else ""
        hint = claims.get("preferred_username") or email or claims.get("name") or "user"
        return user_sso_create(
            issuer=settings.OIDC_ISSUER,
            subject=claims["sub"],
            username_hint=hint if isinstance(hint, str) else "user",
            email=email if isinstance(email, str) else "",
            group_names=group_names,
        )

    def update_user(self, user: User, claims: dict[str, Any]) -> User:
        user_sso_signed_in(
            user=user,
            issuer=settings.OIDC_ISSUER,
            subject=claims["sub"],
            group_names=claimed_group_names(claims),
        )
        return user


def claimed_group_names(claims: dict[str, Any]) -> list[str] | None:
    """The group names of the person's claims (OIDC_GROUPS_CLAIM's claim): a list of names, or
    one name alone; an absent (or null) claim names none. None while the setting is unset (the
    groups are the admin's to set). SsoSignInFailed for a claim that is not names, or of more
    than GROUP_NAMES_MAX."""
    claim = settings.OIDC_GROUPS_CLAIM
    if not claim:
        return None
    value = claims.get(claim)
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        raise SsoSignInFailed(
            f"{settings.OIDC_NAME} sent your groups (its claim {claim!r}) as something other "
            "than a list of names, so you are not signed in and nothing was changed. Tell the "
            "administrator."
        )
    if len(value) > GROUP_NAMES_MAX:
        raise SsoSignInFailed(
            f"{settings.OIDC_NAME} sent {len(value):,} groups for you (its claim {claim!r}), and "
            f"this server takes at most {GROUP_NAMES_MAX:,}, so you are not signed in and "
            "nothing was changed. Tell the administrator."
        )
    return value


def provider_sign_out_url() -> str:
    """Where a person ends their session at the provider (its `end_session_endpoint`), if it
    says; "" when it does not or cannot be reached."""
    try:
        url = discovery().get("end_session_endpoint")
    except SsoSignInFailed:
        return ""
    return url if isinstance(url, str) and url.startswith(("https://", "http://")) else ""
