"""`manage.py changepassword [USERNAME]`: Django's command, changing the password through
`accounts.services.user_password_set`, so the user's browser logins end with their sockets.
(`accounts` comes before `django.contrib.auth` in INSTALLED_APPS, so this command is the one
run.)"""

from __future__ import annotations

import getpass
from typing import Any

from django.contrib.auth.management.commands import changepassword
from django.core.management.base import CommandError

from accounts.errors import WeakPassword
from accounts.models import User
from accounts.services import user_password_set

TRIES = 3


class Command(changepassword.Command):
    def handle(self, *args: Any, **options: Any) -> str:
        username = options["username"] or getpass.getuser()
        try:
            user = User._default_manager.db_manager(options["database"]).get_by_natural_key(
                username
            )
        except User.DoesNotExist:
            raise CommandError(f"user '{username}' does not exist") from None
        self.stdout.write(f"Changing password for user '{user}'")
        for _ in range(TRIES):
            # Django's prompt (`_get_pass`, which django-stubs do not list).
            password = self._get_pass()  # type: ignore[attr-defined]
            if password != self._get_pass("Password (again): "):  # type: ignore[attr-defined]
                self.stdout.write("Passwords do not match. Please try again.")
                continue
            try:
                user_password_set(user=user, password=password)
            except WeakPassword as exc:
                self.stderr.write("\n".join(exc.messages))
                continue
            return f"Password changed successfully for user '{user}'"
        raise CommandError(f"Aborting password change for user '{user}' after {TRIES} attempts")
