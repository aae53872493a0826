"""What the operator's commands share: who runs them, and how a run's record is printed."""

from __future__ import annotations

import argparse
import getpass
import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from core.errors import DomainError
from ops.audit import Who
from ops.models import AuditRecord

# The most items a dry run prints (the audit record keeps more, and counts them all).
SHOWN = 50


def count(value: str) -> int:
    """An option that takes a whole number of 0 or more (refused by the parser otherwise, before
    anything runs or is recorded)."""
    try:
        number = int(value)
    except ValueError:
        number = -1
    if number < 0:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number of 0 or more")
    return number


def operator() -> Who:
    try:
        name = getpass.getuser()
    except (KeyError, OSError):
        name = ""
    return Who.command(name)


class AuditedCommand(BaseCommand):
    """A command that runs one rule under an audit record, dry with --dry-run."""

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="Change nothing: print what would be done (and record the dry run).",
        )

    def run(self, **options: Any) -> AuditRecord:
        raise NotImplementedError

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            record = self.run(**options)
        except DomainError as exc:
            raise CommandError(exc.message) from None
        self.report(record)

    def report(self, record: AuditRecord) -> None:
        if record.status == AuditRecord.Status.SKIPPED:
            raise CommandError(record.error)
        verb = "Would change" if record.dry_run else "Changed"
        self.stdout.write(
            f"{record.get_rule_display()}{' (dry run)' if record.dry_run else ''}: "
            f"{verb.lower()} {record.affected} — audit record {record.pk}, "
            f"parameters {json.dumps(record.parameters)}"
        )
        for kind, value in record.details.items():
            if isinstance(value, dict) and "items" in value:
                self.stdout.write(f"  {kind}: {value['count']}")
                for item in value["items"][:SHOWN]:
                    self.stdout.write(f"    {json.dumps(item, ensure_ascii=False)}")
                if value["count"] > SHOWN:
                    self.stdout.write(f"    … and {value['count'] - SHOWN} more")
            else:
                self.stdout.write(f"  {kind}: {json.dumps(value, ensure_ascii=False)}")
