from __future__ import annotations

from typing import Any

from ops.models import AuditRecord
from ops.retention import archive_idle_sessions

from ._audited import AuditedCommand, count, operator


class Command(AuditedCommand):
    help = (
        "Archive sessions untouched for RETENTION_ARCHIVE_DAYS (hidden from their owner's list, "
        "brought back from its Archived view; never deleted)."
    )

    def add_arguments(self, parser: Any) -> None:
        super().add_arguments(parser)
        parser.add_argument("--days", type=count, help="Instead of RETENTION_ARCHIVE_DAYS.")

    def run(self, **options: Any) -> AuditRecord:
        return archive_idle_sessions(
            who=operator(), dry_run=options["dry_run"], days=options["days"]
        )
