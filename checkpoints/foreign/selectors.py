"""Reading import jobs: always from their owner."""

from __future__ import annotations

from typing import TYPE_CHECKING

from checkpoints.errors import ImportJobNotFound
from checkpoints.models import ImportJob
from sessions_app.models import Session

if TYPE_CHECKING:
    from sessions_app.models import AnyUser


def get_import_job_for_user(user: AnyUser, pk: int) -> ImportJob:
    """The user's import job; ImportJobNotFound for another user's, as for one that is not."""
    job = ImportJob.objects.for_user(user).defer("document").filter(pk=pk).first()
    if job is None:
        raise ImportJobNotFound()
    return job


def import_job_sessions(job: ImportJob) -> list[Session]:
    """The sessions the job made that its owner still has, in the export's order."""
    found = Session.objects.filter(owner=job.owner_id, pk__in=job.sessions).in_bulk()
    return [found[pk] for pk in job.sessions if pk in found]
