"""Celery tasks of the integrations: thin adapters that take ids and call a service."""

from __future__ import annotations

from agents.tasks import task
from integrations.telegram.inbox import updates_prune
from integrations.telegram.relay import replies_sweep
from integrations.telegram.updates import UPDATE_TASK, update_handle, updates_sweep


@task(name=UPDATE_TASK, ignore_result=True)
def telegram_update_task(update_id: int) -> None:
    """Handle one stored Telegram update; a redelivered task finds it claimed and does nothing.
    Now and then (one update in 100) the old updates are deleted."""
    update_handle(update_id=update_id)
    if update_id % 100 == 0:
        updates_prune()


@task(name="integrations.deliver_replies", ignore_result=True)
def deliver_replies_task() -> int:
    """The periodic job (beat, every minute): replies of turns started from Telegram that ended
    with no relay to deliver them (their process died) are delivered by this worker's relay."""
    return replies_sweep()


@task(name="integrations.sweep_updates", ignore_result=True)
def sweep_updates_task() -> int:
    """The periodic job (beat, every TELEGRAM_UPDATE_RETRY_SECONDS): stored updates that no task
    handled (the broker was down when they came, or their task was lost) are handled here."""
    return updates_sweep()
