from __future__ import annotations

from typing import Any

from ops.models import AuditRecord
from ops.retention import prune_auto_checkpoints

from ._audited import AuditedCommand, count, operator


class Command(AuditedCommand):
    help = (
        "Delete automatic checkpoints older than RETENTION_AUTO_CHECKPOINT_DAYS, keeping the "
        "newest RETENTION_KEEP_LATEST_AUTO of each branch, every named checkpoint and every "
        "checkpoint a branch was forked from."
    )

    def add_arguments(self, parser: Any) -> None:
        super().add_arguments(parser)
        parser.add_argument("--days", type=count, help="Instead of RETENTION_AUTO_CHECKPOINT_DAYS.")
        parser.add_argument(
            "--keep-latest", type=count, help="Instead of RETENTION_KEEP_LATEST_AUTO."
        )

    def run(self, **options: Any) -> AuditRecord:
        return prune_auto_checkpoints(
            who=operator(),
            dry_run=options["dry_run"],
            days=options["days"],
            keep_latest=options["keep_latest"],
        )
