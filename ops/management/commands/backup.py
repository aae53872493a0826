"""`manage.py backup PATH [--force] [--pg-dump PROGRAM]`: a consistent backup of the database while
the app serves (ops.backup). Restoring is done by hand: docs/operations.md."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ops.backup import BackupError, backup_create


class Command(BaseCommand):
    help = (
        "Back the database up to PATH while the app serves: a SQLite file (SQLite's online "
        "backup, checked), or a pg_dump archive in the custom format (PostgreSQL). "
        "Restore as docs/operations.md says."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", help="the backup file to write (its directory must exist)")
        parser.add_argument("--force", action="store_true", help="replace PATH if it exists")
        parser.add_argument(
            "--pg-dump",
            default="",
            metavar="PROGRAM",
            help="PostgreSQL: the pg_dump to run (default: pg_dump on PATH); it must be of the "
            "server's major version or newer",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            backup = backup_create(
                path=options["path"], force=options["force"], pg_dump=options["pg_dump"]
            )
        except BackupError as exc:
            raise CommandError(exc.message) from None
        kind = "SQLite database" if backup.engine == "sqlite" else "PostgreSQL dump (custom format)"
        self.stdout.write(
            f"Backed up to {backup.path}: {kind}, {_size(backup.size)}, in {backup.seconds:.1f} s."
        )


def _size(size: int) -> str:
    if size < 1024:
        return f"{size} bytes"
    value, unit = size / 1024, "KiB"
    for bigger in ("MiB", "GiB", "TiB"):
        if value < 1024:
            break
        value, unit = value / 1024, bigger
    return f"{value:.1f} {unit}"
