"""An imported document (Rollback's own export, or another app's history) and what follows it,
whichever door took it (the sidebar's Import, `POST /api/v1/sessions/import/`): a job's task
queued once the transaction commits (the worker's pool, or Celery), or the new session's
summaries scheduled. It lives here, above `checkpoints`, because the queue is
`agents.dispatch`'s."""

from __future__ import annotations

from django.db import transaction

from accounts.models import User
from checkpoints.foreign.services import Imported, history_import
from checkpoints.models import ImportJob
from checkpoints.tasks import IMPORT_TASK

from .dispatch import enqueue
from .summaries import session_summaries_schedule


def history_import_started(
    *, owner: User, raw: bytes | str, filename: str = ""
) -> Imported | ImportJob:
    """`history_import`, then its job queued (several conversations) or its session's summaries
    scheduled (one). Raises what `history_import` raises, and nothing is written then."""
    imported = history_import(owner=owner, raw=raw, filename=filename)
    if isinstance(imported, ImportJob):
        job_id = imported.pk
        transaction.on_commit(lambda: enqueue(IMPORT_TASK, job_id))
    else:
        session_summaries_schedule(session=imported.session)
    return imported
