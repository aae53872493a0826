"""`manage.py telegram_webhook set URL` / `delete`: tell Telegram where to post the bot's
updates (with the secret it must send back), or stop it."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from integrations.telegram import client

WEBHOOK_PATH = "/integrations/telegram/webhook/"
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")


def _check_url(url: str) -> str:
    """The URL, when Telegram (or a local stand-in) can post to it; CommandError otherwise."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        raise CommandError(f"Not a URL: {url!r}.") from None
    if parts.scheme == "https" and host:
        return url
    if parts.scheme == "http" and host in LOCAL_HOSTS:
        return url
    raise CommandError(
        f"Telegram posts only to https:// addresses (http:// only for localhost): {url!r}."
    )


class Command(BaseCommand):
    help = "Set or delete the Telegram bot's webhook (TELEGRAM_BOT_TOKEN, TELEGRAM_WEBHOOK_SECRET)."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        set_parser = actions.add_parser("set", help="post the bot's updates to URL")
        set_parser.add_argument("url", help=f"this server's address, ending in {WEBHOOK_PATH}")
        actions.add_parser("delete", help="stop posting updates")

    def handle(self, *args: Any, **options: Any) -> None:
        if not client.enabled():
            raise CommandError("TELEGRAM_BOT_TOKEN is empty: the Telegram bridge is off.")
        try:
            if options["action"] == "set":
                self._set(options["url"])
            else:
                client.delete_webhook()
                self.stdout.write("Webhook deleted: Telegram no longer posts updates.")
        except client.TelegramError as exc:
            raise CommandError(f"Telegram refused: {exc}") from None

    def _set(self, url: str) -> None:
        secret: str = settings.TELEGRAM_WEBHOOK_SECRET
        if not secret:
            raise CommandError(
                "TELEGRAM_WEBHOOK_SECRET is empty: set it first (the webhook refuses every "
                "update without it)."
            )
        url = _check_url(url)
        if not urlsplit(url).path.endswith(WEBHOOK_PATH):
            self.stderr.write(
                f"Warning: {url} does not end in {WEBHOOK_PATH}, where this server takes updates."
            )
        client.set_webhook(url, secret=secret)
        self.stdout.write(f"Webhook set: Telegram posts updates to {url}.")
