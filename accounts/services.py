"""Writes of accounts: sign-up (with a password, through single sign-on, behind a proxy), the
groups single sign-on sets, preferences and API keys."""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Callable, Collection
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import password_validation
from django.contrib.auth.hashers import make_password
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from core import events
from core.errors import InvalidInput
from core.model_choice import clean_instructions

from .errors import (
    AccountGone,
    ApiKeyLimitReached,
    ApiKeyNotFound,
    InvalidApiKeyName,
    InvalidEmail,
    InvalidPreference,
    InvalidUsername,
    SignupClosed,
    UsernameTaken,
    WeakPassword,
)
from .key_cache import cache_key, cached_key, keys_changed
from .limits import signup_attempt_start
from .lookalikes import mixes_scripts, scripts_of, skeleton
from .models import THEMES, ApiKey, SiteSettings, SsoIdentity, User

API_KEY_PREFIX = "rbk_"
API_KEY_NAME_MAX_LENGTH = 100
API_KEYS_ACTIVE_MAX = 50
# `last_used_at` is written at most this often per key, not on every request.
API_KEY_LAST_USED_RESOLUTION = timedelta(minutes=1)
# "rbk_" + secrets.token_urlsafe(32): 43 characters of the URL-safe base64 alphabet.
_API_KEY_RE = re.compile(r"rbk_[A-Za-z0-9_-]{43}")


def lock_user(user_id: int, *fields: str) -> User:
    """Lock the user's row (with `fields` loaded; the id alone by default) until the transaction
    ends. A write that counts a user's rows before adding one (a session, a memory, an API key)
    takes it first, so two at once cannot both take the last place; the erasure of the user
    (ops.erasure) takes it before anything else, so such a write waits for the erasure and then
    finds the account gone (AccountGone, 404), never a half-erased one."""
    try:
        return User.objects.select_for_update().only(*(fields or ("pk",))).get(pk=user_id)
    except User.DoesNotExist:
        raise AccountGone() from None


# --- Sign-up ----------------------------------------------------------------------------------


PASSWORDS_OFF = "Signing up with a password is turned off on this server."


def signup_is_open() -> bool:
    """Whether the sign-up page takes new accounts: when the admin left it open (and LOCAL_LOGIN
    is on), and always while there is no user at all (so a fresh install gets its
    administrator)."""
    open_here = SiteSettings.load().signup_open and settings.LOCAL_LOGIN
    return open_here or not User.objects.exists()


def signup_closed() -> SignupClosed:
    """Why sign-up is closed."""
    return SignupClosed() if settings.LOCAL_LOGIN else SignupClosed(PASSWORDS_OFF)


def _clean_username(value: object) -> str:
    if not isinstance(value, str):
        raise InvalidUsername("The username must be text.")
    username = User.normalize_username(value.strip())
    if not username:
        raise InvalidUsername("The username cannot be empty.")
    try:
        User._meta.get_field("username").run_validators(username)
    except ValidationError as exc:
        raise InvalidUsername(" ".join(exc.messages)) from None
    if mixes_scripts(username):
        raise InvalidUsername(
            f"Use letters of one script in a username: this one mixes {scripts_of(username)}."
        )
    return username


def _looks_like_an_existing_username(username: str) -> bool:
    """Whether an account's username has the same look (TR39 skeleton) as `username`. Every
    username is compared, so accounts made in the admin or the shell count too."""
    wanted = skeleton(username)
    existing = User.objects.values_list("username", flat=True).iterator(chunk_size=2000)
    return any(skeleton(name) == wanted for name in existing)


def _clean_email(value: object) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidEmail("The email address must be text.")
    email = User.objects.normalize_email(value.strip())
    if not email:
        return ""
    try:
        validate_email(email)
    except ValidationError:
        raise InvalidEmail("Enter a valid email address.") from None
    return email


def _validate_password(password: object, *, user: User) -> None:
    if not isinstance(password, str):
        raise WeakPassword(["The password must be text."])
    try:
        password_validation.validate_password(password, user=user)
    except ValidationError as exc:
        raise WeakPassword(list(exc.messages)) from None


def user_signup(
    *, username: str, password: str, email: str = "", client_ip: str | None = None
) -> User:
    """Create an account. Refused while sign-up is closed, unless there is no user yet; the first
    account becomes the administrator (staff and superuser). While ACCOUNTS_PENDING is on, every
    other account waits for an administrator's approval (`approval` "pending", not active).

    A username must use the letters of one script and must not look like an existing one (see
    accounts.lookalikes). A sign-up from `client_ip` counts against its network's hourly limit
    (SignupLimited) once its input is valid, before the password is hashed.

    Every sign-up locks the site settings row, then checks whether any user exists: two first
    sign-ups at once therefore make exactly one administrator, and the username checks cannot
    race another sign-up. The password is hashed before taking the lock.
    """
    # An early answer, before any work; checked again under the lock. It also creates the
    # settings row if missing: outside the lock, as the row must exist to be locked.
    if not signup_is_open():
        raise signup_closed()
    username = _clean_username(username)
    email = _clean_email(email)
    user = User(username=username, email=email)
    _validate_password(password, user=user)
    signup_attempt_start(client_ip=client_ip)
    user.password = make_password(password)
    try:
        with transaction.atomic():
            site = SiteSettings.objects.select_for_update().get(pk=1)
            first = not User.objects.exists()
            if not first and not (site.signup_open and settings.LOCAL_LOGIN):
                raise signup_closed()
            if User.objects.filter(username__iexact=username).exists():
                raise UsernameTaken()
            if _looks_like_an_existing_username(username):
                raise UsernameTaken("That username looks like an existing one; choose another.")
            user.is_staff = user.is_superuser = first
            if settings.ACCOUNTS_PENDING and not first:
                user.approval = User.Approval.PENDING
                user.is_active = False
            user.save(force_insert=True)
    except IntegrityError:  # an account made at the same time outside sign-up (admin, shell)
        raise UsernameTaken() from None
    return user


def user_sso_create(
    *,
    issuer: str,
    subject: str,
    username_hint: str,
    email: str = "",
    group_names: Collection[str] | None = None,
) -> User:
    """The account of a person who signed in through single sign-on for the first time, with
    their identity at the provider (`issuer`, `subject`) and no password. Its username is
    `username_hint` made valid (a number added while it is taken or looks like a taken one).
    The same rules as a sign-up's: the first account of the site is its administrator, and
    while ACCOUNTS_PENDING is on, the others wait for approval. Under the sign-ups' lock.
    With `group_names` (the provider's, OIDC_GROUPS_CLAIM), its groups are set from them in the
    same transaction (user_groups_sync)."""
    base = _sso_username_base(username_hint)
    email = _clean_sso_email(email)
    with transaction.atomic():
        user = _external_user_create(lambda: _free_username(base), email)
        SsoIdentity.objects.create(user=user, issuer=issuer, subject=subject)
        if group_names is not None:
            user_groups_sync(user=user, names=group_names)
    return user


def user_sso_signed_in(
    *, user: User, issuer: str, subject: str, group_names: Collection[str] | None = None
) -> None:
    """A returning single sign-on of `user` (found by `issuer` and `subject`): when it happened,
    and with `group_names`, their groups set from them, all or nothing."""
    with transaction.atomic():
        SsoIdentity.objects.filter(user=user, issuer=issuer, subject=subject).update(
            last_sign_in_at=timezone.now()
        )
        if group_names is not None:
            user_groups_sync(user=user, names=group_names)


# The longest group name (django.contrib.auth's Group.name); a longer one names no group.
GROUP_NAME_MAX_LENGTH = 150
# Names looked up per query (under every database's limit of parameters).
_GROUP_NAMES_PER_QUERY = 500


def user_groups_sync(*, user: User, names: Collection[str]) -> None:
    """Make `user`'s groups exactly the existing groups named in `names` (exact, case-sensitive
    match). A name of no group, or that no group can have (too long, a NUL), is ignored: groups
    are made by an administrator, never here. Staff and superuser flags are left as they are.
    The caller bounds `names` (the single sign-on's claim: at most accounts.oidc.GROUP_NAMES_MAX).
    Under the user's lock, so two sign-ins at once end with one of their lists, not a mix."""
    wanted = sorted(
        {name for name in names if len(name) <= GROUP_NAME_MAX_LENGTH and "\x00" not in name}
    )
    found: list[Group] = []
    for start in range(0, len(wanted), _GROUP_NAMES_PER_QUERY):
        chunk = wanted[start : start + _GROUP_NAMES_PER_QUERY]
        found += Group.objects.filter(name__in=chunk)
    exact = set(wanted)  # a database whose comparison ignores case finds more than asked
    with transaction.atomic():
        lock_user(user.pk)
        user.groups.set([group for group in found if group.name in exact])


def user_proxy_get_or_create(*, username: str) -> User:
    """The account an authenticating proxy names (AUTH_PROXY_HEADER): found by its username,
    or made without a password on the first request (the sign-ups' rules: the first account is
    the administrator; with ACCOUNTS_PENDING the others wait). InvalidUsername for a name that
    is not a valid username."""
    name = _clean_username(username)
    found = User.objects.filter(username__iexact=name).first()
    if found is not None:
        return found
    try:
        with transaction.atomic():
            return _external_user_create(lambda: name, "")
    except IntegrityError:  # made by a request at the same moment
        return User.objects.get(username__iexact=name)


def _external_user_create(username: Callable[[], str], email: str) -> User:
    """An account without a password, made under the sign-ups' lock (call inside a
    transaction); `username` is asked for under the lock."""
    SiteSettings.load()
    SiteSettings.objects.select_for_update().get(pk=1)
    first = not User.objects.exists()
    user = User(username=username(), email=email)
    user.set_unusable_password()
    user.is_staff = user.is_superuser = first
    if settings.ACCOUNTS_PENDING and not first:
        user.approval = User.Approval.PENDING
        user.is_active = False
    user.save(force_insert=True)
    return user


def _sso_username_base(hint: str) -> str:
    """What the provider calls the person, cut to the characters and length a username takes
    ("user" when nothing is left)."""
    cleaned = re.sub(r"[^\w.@+-]", "", hint.split("@")[0] if "@" in hint else hint)[:140]
    try:
        return _clean_username(cleaned)
    except InvalidInput:
        return "user"


def _free_username(base: str) -> str:
    """`base`, or `base2`, `base3`...: the first that is neither taken nor looks like a taken
    one."""
    for n in range(1, 1000):
        candidate = base if n == 1 else f"{base}{n}"
        taken = User.objects.filter(username__iexact=candidate).exists()
        if not taken and not _looks_like_an_existing_username(candidate):
            return candidate
    return f"{base[:100]}{secrets.token_hex(6)}"


def _clean_sso_email(value: str) -> str:
    try:
        return _clean_email(value)
    except InvalidInput:
        return ""


# --- Password and deactivation ---------------------------------------------------------------


@transaction.atomic
def user_password_set(*, user: User, password: str | None, keep_login: str | None = None) -> User:
    """Give the user a new password (None: an unusable one, no signing in with a password). It
    ends every browser login of theirs (Django checks each login against the password), so the
    sockets of those logins close at once, in every web process, when the change commits.
    `keep_login` is the session key of the login that made the change, when it stays signed in
    (`update_session_auth_hash`, under a new key): its sockets are asked to reconnect instead.
    Sockets opened with an API key stay open, like the key: it is a credential of its own."""
    if password is None:
        user.set_unusable_password()
    else:
        _validate_password(password, user=user)
        user.set_password(password)
    user.save(update_fields=["password"])
    events.sockets_close_logins(user=user.pk, keep_session_key=keep_login)
    return user


def user_deactivate(*, user: User) -> User:
    """Turn the account off: it can no longer sign in or use its API keys, and its open
    sockets close at once, in every web process, when the change commits. Nothing is deleted
    (an administrator can turn it on again)."""
    User.objects.filter(pk=user.pk).update(is_active=False)
    user.is_active = False
    keys_changed()
    events.sockets_close_user(user=user.pk)
    return user


# --- Preferences ------------------------------------------------------------------------------


@transaction.atomic
def preferences_update(
    *,
    user: User,
    auto_checkpoint: bool,
    theme: str,
    instructions: str | None = None,
    checkpoint_each_message: bool | None = None,
) -> User:
    """Store the user's preferences in `metadata["preferences"]`, keeping any other keys there
    and elsewhere in `metadata`. `instructions` (None: left as they are; "": none) are the
    user's custom instructions for all their sessions (core.model_choice.clean_instructions);
    none are kept as no key at all. `checkpoint_each_message` (None: left as it is): a checkpoint
    before each message they send, in the sessions that do not say otherwise."""
    if not isinstance(auto_checkpoint, bool):
        raise InvalidPreference("Automatic checkpoints must be on or off.", field="auto_checkpoint")
    if theme not in THEMES:
        raise InvalidPreference(
            f"Unknown theme {theme!r}; choose one of {', '.join(THEMES)}.", field="theme"
        )
    changes: dict[str, object] = {"auto_checkpoint": auto_checkpoint, "theme": theme}
    if checkpoint_each_message is not None:
        if not isinstance(checkpoint_each_message, bool):
            raise InvalidPreference(
                "A checkpoint before each message must be on or off.",
                field="checkpoint_each_message",
            )
        changes["checkpoint_each_message"] = checkpoint_each_message
    if instructions is not None:
        try:
            changes["instructions"] = clean_instructions(instructions, what="instructions")
        except InvalidInput as exc:
            raise InvalidPreference(exc.message, field="instructions") from None
    locked = lock_user(user.pk, "metadata")
    metadata = locked.metadata if isinstance(locked.metadata, dict) else {}
    preferences = metadata.get("preferences")
    preferences = dict(preferences) if isinstance(preferences, dict) else {}
    preferences.update(changes)
    if preferences.get("instructions") == "":
        del preferences["instructions"]
    metadata = {**metadata, "preferences": preferences}
    User.objects.filter(pk=user.pk).update(metadata=metadata)
    user.metadata = metadata
    keys_changed()  # a request with a key reads its user with these preferences
    return user


# --- API keys ---------------------------------------------------------------------------------


def _hash_key(raw: str) -> str:
    return hashlib.sha256(raw.encode("ascii")).hexdigest()


def _clean_key_name(value: object) -> str:
    if not isinstance(value, str):
        raise InvalidApiKeyName("The key name must be text.")
    name = value.strip()
    if not name:
        raise InvalidApiKeyName("Give the key a name, such as the program that will use it.")
    if len(name) > API_KEY_NAME_MAX_LENGTH:
        raise InvalidApiKeyName(
            f"The key name is {len(name)} characters long; the limit is {API_KEY_NAME_MAX_LENGTH}."
        )
    if "\x00" in name:
        raise InvalidApiKeyName("The key name cannot contain NUL characters.")
    return name


@transaction.atomic
def apikey_create(*, user: User, name: str) -> tuple[ApiKey, str]:
    """A new key for the user. Returns the row and the secret, which is not stored (only its
    hash is): show it to the user now, it cannot be shown again."""
    name = _clean_key_name(name)
    lock_user(user.pk)  # one count-then-create at once
    if ApiKey.objects.for_user(user).active().count() >= API_KEYS_ACTIVE_MAX:
        raise ApiKeyLimitReached(API_KEYS_ACTIVE_MAX)
    raw = API_KEY_PREFIX + secrets.token_urlsafe(32)
    key = ApiKey.objects.create(user=user, name=name, prefix=raw[:12], key_hash=_hash_key(raw))
    return key, raw


def apikey_revoke(*, user: User, key_id: int) -> ApiKey:
    """Revoke one of the user's keys (revoking a revoked key changes nothing). Another user's
    key is reported exactly like a missing one."""
    try:
        pk = int(key_id)
    except (TypeError, ValueError):
        raise ApiKeyNotFound() from None
    if not 0 < pk < 2**63:
        raise ApiKeyNotFound()
    keys = ApiKey.objects.for_user(user).filter(pk=pk)
    keys.active().update(revoked_at=timezone.now())
    keys_changed()  # no process takes it from its cache any more
    try:
        key = keys.get()
    except ApiKey.DoesNotExist:
        raise ApiKeyNotFound() from None
    events.sockets_close_apikey(key=key.pk)
    return key


def bearer_key(header: bytes) -> str | None:
    """The key of a `Bearer <key>` header; None when the header is another scheme or absent.
    Raises ValueError for a Bearer header that is malformed."""
    parts = header.split()
    if not parts or parts[0].lower() != b"bearer":
        return None
    if len(parts) != 2:
        raise ValueError("Give the API key as 'Authorization: Bearer <key>'.")
    try:
        return parts[1].decode("ascii")
    except UnicodeDecodeError:
        raise ValueError("That is not an API key.") from None


def apikey_authenticate(raw: str | None) -> User | None:
    """The active user an active key belongs to, or None for anything else (including
    malformed input)."""
    key = apikey_verify(raw)
    return key.user if key is not None else None


def apikey_verify(raw: str | None) -> ApiKey | None:
    """The active key of an active user (with its `user`) that `raw` is, or None for anything
    else (including malformed input). The lookup is by the key's hash, so its time does not
    depend on how much of a guess matches a real key."""
    if not isinstance(raw, str) or len(raw) > 64 or not _API_KEY_RE.fullmatch(raw):
        return None
    digest = _hash_key(raw)
    key, version = cached_key(digest)  # accounts.key_cache: no query for a key seen just now
    if key is None:
        key = (
            ApiKey.objects.active()
            .filter(key_hash=digest, user__is_active=True)
            .select_related("user")
            .first()
        )
        if key is None:
            return None
        cache_key(digest, key, version)
    now = timezone.now()
    if key.last_used_at is None or key.last_used_at <= now - API_KEY_LAST_USED_RESOLUTION:
        ApiKey.objects.filter(pk=key.pk).filter(
            Q(last_used_at__isnull=True) | Q(last_used_at__lte=now - API_KEY_LAST_USED_RESOLUTION)
        ).update(last_used_at=now)
        key.last_used_at = now
        cache_key(digest, key, version)
    return key
