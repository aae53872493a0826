"""Django's signals that concern accounts. Connected in `AccountsConfig.ready`."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.signals import user_logged_in, user_logged_out
from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver
from django.http import HttpRequest

from core import events

from .key_cache import keys_changed
from .models import APPROVAL_UNTOLD, ApiKey, User


@receiver(user_logged_in, dispatch_uid="accounts.tell_an_approval")
def tell_an_approval(
    sender: object, request: HttpRequest | None, user: User, **kwargs: Any
) -> None:
    """The first sign-in after an administrator approved the account says so, once (whichever
    page it came through)."""
    if not (isinstance(user.metadata, dict) and user.metadata.get(APPROVAL_UNTOLD)):
        return
    with transaction.atomic():  # the row locked: a preference saved meanwhile is kept
        row = User.objects.select_for_update().get(pk=user.pk)
        metadata = row.metadata if isinstance(row.metadata, dict) else {}
        if not metadata.pop(APPROVAL_UNTOLD, None):
            return
        User.objects.filter(pk=user.pk).update(metadata=metadata)
        user.metadata = metadata
    if request is not None:
        messages.success(request, "An administrator approved your account: welcome.")


@receiver(user_logged_out, dispatch_uid="accounts.close_the_sockets_of_the_login")
def close_the_sockets_of_the_login(
    sender: object, request: HttpRequest | None, **kwargs: Any
) -> None:
    """Every logout (the site's, the admin's) goes through `django.contrib.auth.logout`, which
    sends this signal while the login's session key is still known: the sockets that login
    opened close.

    Django flushes the login's stored session only after its signal, so it is deleted here
    first: a page whose socket closes reloads at once, and that reload must find the login
    already gone, or it is served the chat again and stays there (the later flush deletes
    nothing more)."""
    session = getattr(request, "session", None)
    session_key = session.session_key if session is not None else None
    if session is not None and session_key:
        session.delete()
        events.sockets_close_login(session_key=session_key)


@receiver(post_save, sender=ApiKey, dispatch_uid="accounts.key_saved")
@receiver(post_delete, sender=ApiKey, dispatch_uid="accounts.key_deleted")
@receiver(post_save, sender=User, dispatch_uid="accounts.user_saved")
@receiver(post_delete, sender=User, dispatch_uid="accounts.user_deleted")
def forget_the_cached_keys(sender: object, **kwargs: Any) -> None:
    """A key or a user saved or deleted (the admin, a service, an erasure): no request takes a
    key from the cache as it was (accounts.key_cache)."""
    keys_changed()
