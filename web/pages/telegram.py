"""The profile's Telegram section: make a one-time link code (shown with the exact message to
send the bot), and the user's linked chats with Unlink. Thin: each view calls a service."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from accounts.models import User
from core.http import domain_errors
from integrations.selectors import telegram_chats_for_user
from integrations.telegram import client
from integrations.telegram.links import LinkCode, chat_unlink

# Linked chats listed on the profile (a user rarely has more than a few).
PROFILE_CHATS_SHOWN = 50


def profile_telegram(user: User, *, link_code: LinkCode | None = None) -> dict[str, Any]:
    """The profile's context for its Telegram section."""
    on = client.enabled()
    chats = telegram_chats_for_user(user)
    bot = settings.TELEGRAM_BOT_USERNAME
    return {
        "telegram_on": on,
        "telegram_chats": list(chats[:PROFILE_CHATS_SHOWN]) if on else [],
        "telegram_code": link_code,
        "telegram_bot": bot,
        # Telegram's deep link: the bot's chat opens and Start sends `/start CODE`.
        "telegram_open": (
            f"https://t.me/{bot}?{urlencode({'start': link_code.code})}"
            if bot and link_code is not None
            else ""
        ),
    }


def _user(request: HttpRequest) -> User:
    user = request.user
    assert isinstance(user, User)  # noqa: S101 - login_required let only users in
    return user


@login_required
@require_POST
@never_cache
@domain_errors
def telegram_unlink_view(request: HttpRequest, chat_pk: int) -> HttpResponse:
    chat_unlink(user=_user(request), chat_pk=chat_pk)
    messages.success(request, "The Telegram chat is unlinked; its conversation stays here.")
    response = HttpResponseRedirect(reverse("accounts:profile") + "#telegram")
    response.status_code = 303
    return response
