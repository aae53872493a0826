"""Stored updates that no task handled (the broker was down when they came, their task was lost,
the process that claimed them died) are handled by the periodic sweep after a delay, exactly
once: every handler claims the update first, and a redelivery hands over only an update that
nobody handles. The deployed case, with the broker really stopped, is
tests/deploy/test_telegram_outage.py."""

from __future__ import annotations

import logging
import threading
from datetime import timedelta

import pytest
from django.db import close_old_connections, connection
from django.utils import timezone

from agents.services import recover_once
from integrations.models import TelegramUpdate
from integrations.telegram import inbox
from integrations.telegram.links import link_code_consume, link_code_create
from integrations.telegram.updates import HOW_TO_LINK, update_handle, updates_sweep
from sessions_app.models import Turn
from tests.fakes.chat_server import Reply
from tests.integrations.updates import CHAT, message, post, said

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _timings(settings):
    settings.TELEGRAM_UPDATE_RETRY_SECONDS = 30
    settings.TELEGRAM_UPDATE_CLAIM_SECONDS = 300
    settings.TELEGRAM_UPDATE_ATTEMPTS = 3


def stored(update: dict) -> TelegramUpdate:
    """The update as the webhook stored it when the task could not be sent (the broker down)."""
    row, created = inbox.update_store(update_id=update["update_id"], payload=update)
    assert created
    return row


def age(update_id: int, **since: float) -> None:
    """The update arrived (`received`) or was claimed (`claimed`) that many seconds ago."""
    now = timezone.now()
    fields = {f"{name}_at": now - timedelta(seconds=s) for name, s in since.items()}
    TelegramUpdate.objects.filter(pk=update_id).update(**fields)


def test_an_update_no_task_took_is_handled_by_the_sweep_once_the_delay_has_passed(
    client, telegram, inline_turns
):
    update = message("hello", update_id=301)
    stored(update)
    assert updates_sweep() == 0  # just stored: its task may still come
    age(301, received=29)
    assert updates_sweep() == 0
    assert said(telegram) == []

    age(301, received=31)
    assert updates_sweep() == 1
    assert said(telegram) == [HOW_TO_LINK]
    row = TelegramUpdate.objects.get(pk=301)
    assert row.handled_at is not None
    assert row.attempts == 1

    assert updates_sweep() == 0  # the next round
    update_handle(update_id=301)  # the task, late
    assert post(client, update).status_code == 200  # Telegram's redelivery
    assert said(telegram) == [HOW_TO_LINK]


def test_a_task_that_comes_after_the_sweep_does_nothing_and_the_sweep_after_a_task_neither(
    telegram, inline_turns
):
    stored(message("one", update_id=311))
    stored(message("two", update_id=312))
    age(311, received=60)
    age(312, received=60)
    update_handle(update_id=312)  # its task came first
    assert updates_sweep() == 1  # only 311
    update_handle(update_id=311)
    assert said(telegram) == [HOW_TO_LINK, HOW_TO_LINK]
    assert set(TelegramUpdate.objects.values_list("attempts", flat=True)) == {1}


def test_a_swept_message_of_a_linked_chat_starts_one_turn(
    client, telegram, fake_llm, inline_turns, alice
):
    link_code_consume(code=link_code_create(user=alice).code, chat_id=CHAT, title="a")
    fake_llm.queue(Reply("Swept and answered."))
    update = message("sent while the broker was down", update_id=321)
    stored(update)
    age(321, received=45)
    assert updates_sweep() == 1
    telegram.wait_for(lambda _: "Swept and answered." in telegram.texts(CHAT))
    assert post(client, update).status_code == 200  # Telegram's redelivery
    assert updates_sweep() == 0
    assert Turn.objects.count() == 1
    assert Turn.objects.get().status == Turn.Status.DONE


def test_a_redelivered_update_that_nobody_handles_is_handed_over_again(
    client, telegram, inline_turns
):
    update = message("hello", update_id=331)
    stored(update)  # its task was never sent
    assert post(client, update).status_code == 200
    assert said(telegram) == [HOW_TO_LINK]
    assert post(client, update).status_code == 200
    assert updates_sweep() == 0
    age(331, received=60)
    assert updates_sweep() == 0
    assert said(telegram) == [HOW_TO_LINK]


def test_a_redelivered_update_being_handled_is_left_to_its_handler(client, telegram, inline_turns):
    update = message("hello", update_id=341)
    stored(update)
    claimed = inbox.update_claim(update_id=341)  # a worker handles it right now
    assert claimed is not None
    assert post(client, update).status_code == 200
    age(341, received=60)
    assert updates_sweep() == 0
    assert said(telegram) == []
    assert inbox.update_finish(claimed)
    assert TelegramUpdate.objects.get(pk=341).attempts == 1


def test_an_update_whose_handler_died_is_taken_over_once_its_claim_is_stale(
    client, telegram, inline_turns
):
    update = message("hello", update_id=351)
    stored(update)
    assert inbox.update_claim(update_id=351) is not None  # the worker died holding it
    age(351, received=400, claimed=299)
    assert updates_sweep() == 0
    update_handle(update_id=351)  # nor does a late task take a live claim
    assert said(telegram) == []

    age(351, claimed=301)
    assert updates_sweep() == 1
    assert said(telegram) == [HOW_TO_LINK]
    row = TelegramUpdate.objects.get(pk=351)
    assert (row.attempts, row.handled_at is not None) == (2, True)
    assert post(client, update).status_code == 200
    assert said(telegram) == [HOW_TO_LINK]


def test_an_update_out_of_claims_is_given_up_with_an_error_in_the_log(
    telegram, inline_turns, log_records
):
    stored(message("hello", update_id=361))
    TelegramUpdate.objects.filter(pk=361).update(attempts=3)
    age(361, received=1000, claimed=400)  # its third handler died too
    assert updates_sweep() == 0
    assert said(telegram) == []
    assert TelegramUpdate.objects.get(pk=361).handled_at is not None
    [error] = [r for r in log_records if r.levelno == logging.ERROR]
    assert "update 361" in error.getMessage()
    assert "given up" in error.getMessage()
    assert updates_sweep() == 0
    assert len([r for r in log_records if r.levelno == logging.ERROR]) == 1


def test_an_update_older_than_a_day_is_given_up_not_answered(telegram, inline_turns, log_records):
    stored(message("hello", update_id=371))
    age(371, received=25 * 60 * 60)
    assert updates_sweep() == 0
    assert said(telegram) == []
    assert TelegramUpdate.objects.get(pk=371).handled_at is not None
    assert any("update 371" in r.getMessage() for r in log_records if r.levelno == logging.ERROR)


def test_the_sweep_does_nothing_while_the_bridge_is_off(settings, inline_turns):
    stored(message("hello", update_id=381))
    age(381, received=60)
    settings.TELEGRAM_BOT_TOKEN = ""
    assert updates_sweep() == 0
    assert TelegramUpdate.objects.get(pk=381).attempts == 0


def test_without_a_broker_the_recovery_round_runs_the_update_sweep(telegram, inline_turns):
    """The embedded mode has no beat: its recovery thread's round runs the sweep, registered by
    the app."""
    stored(message("hello", update_id=391))
    age(391, received=60)
    recover_once()
    assert said(telegram) == [HOW_TO_LINK]


def test_beat_runs_the_update_sweep_through_a_registered_task(settings):
    from celery import current_app
    from django.conf import settings as django_settings

    entry = django_settings.CELERY_BEAT_SCHEDULE["telegram-updates"]
    assert entry["task"] in current_app.tasks
    assert entry["schedule"] == 30.0  # the default TELEGRAM_UPDATE_RETRY_SECONDS


@pytest.mark.postgres
def test_sweeps_and_tasks_racing_handle_each_update_once(telegram, inline_turns):
    """Four sweeps and a late task per update, all at once, on PostgreSQL: each update is
    claimed and answered once."""
    ids = list(range(401, 411))
    for update_id in ids:
        stored(message(f"hello {update_id}", update_id=update_id, chat_id=CHAT + update_id))
        age(update_id, received=60)
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def run(job) -> None:
        close_old_connections()
        try:
            barrier.wait()
            job()
        except BaseException as exc:  # reported by the test
            errors.append(exc)
        finally:
            connection.close()

    def late_tasks() -> None:
        for update_id in ids:
            update_handle(update_id=update_id)

    jobs = [updates_sweep] * 4 + [late_tasks] * 4
    threads = [threading.Thread(target=run, args=(job,)) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    for update_id in ids:
        assert said(telegram, CHAT + update_id) == [HOW_TO_LINK]
    assert set(TelegramUpdate.objects.values_list("attempts", flat=True)) == {1}
    assert not TelegramUpdate.objects.filter(handled_at__isnull=True).exists()
