"""`manage.py createapikey USERNAME [--name NAME]`: prints a new API key alone on its last line."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.services import apikey_create
from core.errors import DomainError


class Command(BaseCommand):
    help = "Create an API key for a user and print it (it is shown only this once)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="command line", help="what the key is for")

    def handle(self, *args: Any, **options: Any) -> None:
        User = get_user_model()
        try:
            user = User.objects.get_by_natural_key(options["username"])
        except User.DoesNotExist:
            raise CommandError(f"No user named {options['username']!r}.") from None
        try:
            key, secret = apikey_create(user=user, name=options["name"])
        except DomainError as exc:
            raise CommandError(exc.message) from None
        self.stderr.write(
            f"API key {key.prefix}… '{key.name}' for {user.get_username()}; "
            "keep it: it is not shown again."
        )
        self.stdout.write(secret)
