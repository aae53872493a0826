"""Starting turns from the web, the API and scripts: store the user's message, then hand the
run to a Celery worker once the transaction has committed."""

from __future__ import annotations

from django.db import transaction

from sessions_app.models import ExternalSession, Turn
from sessions_app.turns import turn_start


def turn_submit(*, session: ExternalSession, message) -> Turn:
    from .tasks import run_turn_task

    with transaction.atomic():
        turn = turn_start(session=session, message=message)
        transaction.on_commit(lambda: run_turn_task.delay(turn.pk))
    return turn
