"""A worker's sign of life (`turn_heartbeat`) and the recovery from a dead one
(`turn_recover_stale`): its turn queued again, or failed once out of attempts; a queued turn no
worker picked up failed, or sent to the workers again."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from core import events

from ..approvals import turn_approval_expire
from ..models import Turn
from .attempts import HELD, end_dropping_writes, owned
from .paused import with_may_have_run, without_pause


def turn_heartbeat(*, turn: Turn) -> bool:
    """Say the worker of this attempt is alive. False when the turn is no longer its own (taken
    over, finished, failed or deleted): the worker should stop."""
    return owned(turn).update(heartbeat_at=timezone.now()) == 1


def turns_heartbeat(*, attempts: Iterable[tuple[int, int]]) -> set[int]:
    """`turn_heartbeat` for several turns of one worker at once, each given as (turn id, the
    attempt it claimed): the ids of those no longer its own. One statement when every turn is
    still its own; a second finds which are not."""
    attempts = list(attempts)
    held = Q()
    for pk, attempt in attempts:
        held |= Q(pk=pk, attempts=attempt)
    wanted = {pk for pk, _ in attempts}
    if not wanted:
        return set()
    rows = Turn.objects.filter(held, status__in=HELD)
    if rows.update(heartbeat_at=timezone.now()) == len(wanted):
        return set()
    return wanted - set(rows.values_list("pk", flat=True))


def turns_cancelled(*, ids: Iterable[int]) -> set[int]:
    """Which of these turns were cancelled (Stop), in one query."""
    return set(
        Turn.objects.filter(pk__in=list(ids), status=Turn.Status.CANCELLED)
        .order_by()
        .values_list("pk", flat=True)
    )


WORKER_DIED = (
    "The worker answering this turn stopped ({attempts}, each time no sign of life for "
    "{seconds} s). Your message is kept; send it again."
)
NOT_PICKED_UP = (
    "No worker picked this turn up within {seconds} s (is a Celery worker running?). "
    "Your message is kept; send it again."
)


@dataclass
class Recovery:
    """What `turn_recover_stale` did: turns queued again for another worker, turns failed, and
    queued turns to send to the workers again (their task is lost, or late)."""

    requeued: list[Turn] = field(default_factory=list)
    failed: list[Turn] = field(default_factory=list)
    redispatched: list[Turn] = field(default_factory=list)


def _silent_since(cutoff: datetime) -> Q:
    return Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, started_at__lt=cutoff)


def turn_recover_stale(*, session_id: int | None = None) -> Recovery:
    """Turns whose worker died go back to the queue, to be run again from their user message
    (a turn that used up AGENT_TURN_ATTEMPTS is failed instead); turns no worker picked up in
    TURN_QUEUE_TIMEOUT are failed; queued turns no worker claimed in TURN_REDISPATCH_SECONDS
    since they were last sent are to be sent again (`redispatched`: the caller sends them; their
    task may be lost, and if it was only late the claim lets one of the two run). The candidates
    are found by one query (nothing more when there are none, as on almost every call); each
    change is one conditional update, so a heartbeat or a claim that arrives meanwhile, or
    another recovery running at the same time, wins cleanly."""
    now = timezone.now()
    stale = settings.AGENT_TURN_STALE_SECONDS
    cutoff = now - timedelta(seconds=stale)
    qcut = now - timedelta(seconds=settings.TURN_QUEUE_TIMEOUT)
    rcut = now - timedelta(seconds=settings.TURN_REDISPATCH_SECONDS)
    turns = Turn.objects.all() if session_id is None else Turn.objects.filter(session_id=session_id)
    # A turn awaiting approval holds no worker (its state is saved on its row): never dead; it
    # expires after AGENT_APPROVAL_SECONDS instead, and its continuation is queued.
    dead = Q(_silent_since(cutoff), status=Turn.Status.RUNNING)
    acut = now - timedelta(seconds=settings.AGENT_APPROVAL_SECONDS)
    expired = Q(status=Turn.Status.AWAITING_APPROVAL, heartbeat_at__lt=acut)
    lost = Q(_unclaimed_since(qcut), status=Turn.Status.QUEUED)
    unsent = Q(status=Turn.Status.QUEUED, dispatched_at__lt=rcut)
    candidates = list(
        turns.filter(dead | lost | unsent | expired)
        .only(
            "id",
            "session_id",
            "status",
            "attempts",
            "metadata",
            "heartbeat_at",
            "started_at",
            "created_at",
            "dispatched_at",
        )
        .order_by("pk")
    )
    done = Recovery()
    for turn in candidates:
        if turn.status == Turn.Status.RUNNING:
            _recover_dead(turn, cutoff, now, done)
        elif turn.status == Turn.Status.AWAITING_APPROVAL and turn_approval_expire(turn=turn):
            done.requeued.append(turn)  # its continuation tells the model (reason "timed_out")
    for turn in candidates:
        if turn.status == Turn.Status.QUEUED and _is_unclaimed_since(turn, qcut):
            _fail_lost(turn, qcut, now, done)
    failed = {turn.pk for turn in done.failed}
    for turn in candidates:
        late = turn.status == Turn.Status.QUEUED and turn.dispatched_at < rcut
        if late and turn.pk not in failed:
            _redispatch(turn, now, done)
    return done


def _unclaimed_since(cutoff: datetime) -> Q:
    return Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, created_at__lt=cutoff)


def _is_unclaimed_since(turn: Turn, cutoff: datetime) -> bool:
    if turn.heartbeat_at is not None:
        return turn.heartbeat_at < cutoff
    return turn.created_at < cutoff


def _recover_dead(turn: Turn, cutoff: datetime, now: datetime, done: Recovery) -> None:
    """Queue again (or fail, out of attempts) a running turn whose worker fell silent, or a
    paused one (awaiting approval) whose worker did: the next worker runs it again from its user
    message and asks again for the calls that need approval (no answer of the dead attempt
    counts for the next; those it approved are recorded as calls that may have run)."""
    still_dead = Turn.objects.filter(
        _silent_since(cutoff), pk=turn.pk, status=Turn.Status.RUNNING, attempts=turn.attempts
    )
    # The calls the dead attempt had approved may have run before it died: on record for good,
    # and the next attempt's card for the same call says so (sessions_app.approvals).
    recorded = with_may_have_run(turn.metadata, turn.attempts)
    # The attempts that died, this one included: a continuation after an approval is an attempt
    # too, and spends none of the budget.
    died = int(turn.metadata.get("taken_over", 0)) + 1
    if died < settings.AGENT_TURN_ATTEMPTS:
        taken = {**recorded, "taken_over": died}
        if still_dead.update(
            status=Turn.Status.QUEUED,
            heartbeat_at=now,
            dispatched_at=now,
            metadata=taken,
            pending_approval=None,
        ):
            done.requeued.append(turn)
        return
    stale = settings.AGENT_TURN_STALE_SECONDS
    tries = f"{died} time{'s' if died != 1 else ''}"
    error = WORKER_DIED.format(attempts=tries, seconds=stale)
    failed = end_dropping_writes(
        turn.pk,
        turn.session_id,
        still_dead,
        status=Turn.Status.FAILED,
        error=error,
        finished_at=now,
        pending_approval=None,
        metadata=without_pause(recorded),
    )
    if failed:
        turn.error = error
        done.failed.append(turn)
        events.turn_failed(session=turn.session_id, turn=turn.pk, error=error)


def _fail_lost(turn: Turn, cutoff: datetime, now: datetime, done: Recovery) -> None:
    """Fail a queued turn no worker picked up within TURN_QUEUE_TIMEOUT."""
    error = NOT_PICKED_UP.format(seconds=settings.TURN_QUEUE_TIMEOUT)
    waiting = Turn.objects.filter(_unclaimed_since(cutoff), pk=turn.pk, status=Turn.Status.QUEUED)
    values = {"status": Turn.Status.FAILED, "error": error, "finished_at": now}
    if turn.attempts:  # run before, then queued again: its earlier attempts' writes go
        failed = end_dropping_writes(turn.pk, turn.session_id, waiting, **values)
    else:  # never run: nothing written, no lock needed
        failed = waiting.update(**values) == 1
    if failed:
        turn.error = error
        done.failed.append(turn)
        events.turn_failed(session=turn.session_id, turn=turn.pk, error=error)


def _redispatch(turn: Turn, now: datetime, done: Recovery) -> None:
    """Mark a queued turn no worker claimed in TURN_REDISPATCH_SECONDS as sent now, into
    `done.redispatched`. Conditional on the time it was last sent, so of two recoveries at
    once only one sends it."""
    sent = Turn.objects.filter(
        pk=turn.pk, status=Turn.Status.QUEUED, dispatched_at=turn.dispatched_at
    ).update(dispatched_at=now)
    if sent:
        done.redispatched.append(turn)
