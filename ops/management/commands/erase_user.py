from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError

from accounts.models import User
from ops.erasure import user_erase
from ops.models import AuditRecord

from ._audited import AuditedCommand, operator


class Command(AuditedCommand):
    help = (
        "Erase a user and everything of theirs (sessions, messages, checkpoints, turns, API keys, "
        "logins), leaving nothing in any table. It cannot be undone: try --dry-run first."
    )

    def add_arguments(self, parser: Any) -> None:
        super().add_arguments(parser)
        parser.add_argument("username")
        parser.add_argument(
            "--noinput",
            "--no-input",
            action="store_false",
            dest="interactive",
            help="Do not ask for confirmation.",
        )

    def run(self, **options: Any) -> AuditRecord:
        username = options["username"]
        user = User.objects.filter(username__iexact=username).first()
        if user is None:
            raise CommandError(f"There is no user {username!r}.")
        if not options["dry_run"] and options["interactive"]:
            answer = input(
                f"This erases {user.username!r} and everything of theirs for good. "
                "Type the username again to go on: "
            )
            if answer != user.username:
                raise CommandError("Not confirmed: nothing was erased.")
        return user_erase(user=user, who=operator(), dry_run=options["dry_run"])
