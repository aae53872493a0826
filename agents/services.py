"""Starting turns from the web, the API and scripts: store the user's message, then hand the run
to a worker (agents.dispatch) once the transaction has committed. Editing a past message and
regenerating a reply start a new branch from just before that message; the old branch is kept."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connection, transaction

from accounts.models import User
from core.errors import InvalidInput, NotFound
from core.model_choice import turn_model
from core.validation import JSONObject, storable_text
from sessions_app.errors import IdempotencyKeyReused, TurnInProgress
from sessions_app.keys import parse_session_key
from sessions_app.models import Message, Session, Turn
from sessions_app.selectors import branch_history, current_branch
from sessions_app.services import branch_fork, session_for_key
from sessions_app.turns import (
    Recovery,
    clean_user_message,
    turn_continue,
    turn_recover_stale,
    turn_retry,
    turn_start,
)

from .dispatch import embedded, enqueue_turn

log = logging.getLogger(__name__)
_recovery: threading.Thread | None = None
_recovery_lock = threading.Lock()


def _run_after_commit(turn_id: int) -> None:
    def run() -> None:
        start_in_process_recovery()
        enqueue_turn(turn_id)

    transaction.on_commit(run)


def turns_recover(*, session: Session | None = None) -> Recovery:
    """Hand turns whose worker died to a worker again, send queued turns no worker claimed
    (their task was lost) again, and fail those out of attempts or never picked up (the turn
    services announce both: `turn.failed`, and `turn.started` with the new attempt when a worker
    claims the turn)."""
    done = turn_recover_stale(session_id=session.pk if session is not None else None)
    for turn in done.requeued:
        log.warning(
            "turn %s: its worker stopped; queued again (attempt %s done)",
            turn.pk,
            turn.attempts,
            extra={"session_id": turn.session_id, "turn_id": turn.pk},
        )
        _run_after_commit(turn.pk)
    for turn in done.redispatched:
        log.warning(
            "turn %s: no worker claimed it since %s; sent again",
            turn.pk,
            turn.dispatched_at.isoformat(),
            extra={"session_id": turn.session_id, "turn_id": turn.pk},
        )
        _run_after_commit(turn.pk)
    for turn in done.failed:
        log.warning(
            "turn %s failed: %s",
            turn.pk,
            turn.error,
            extra={"session_id": turn.session_id, "turn_id": turn.pk},
        )
    return done


# Periodic jobs of the packages above this one, which beat runs where there is a broker
# (integrations' Telegram reply sweep): the embedded mode's recovery thread runs them too.
_in_process_jobs: list[Callable[[], object]] = []


def in_process_job(job: Callable[[], object]) -> None:
    """Run `job` with every round of the embedded mode's recovery (once, however often it is
    registered); an app's ready() registers it."""
    if job not in _in_process_jobs:
        _in_process_jobs.append(job)


def recover_once() -> None:
    """One round of the embedded mode's periodic work: the turn recovery, then the registered
    jobs. A job that fails is logged and tried again the next round."""
    for job in (turns_recover, *_in_process_jobs):
        try:
            job()
        except Exception:
            log.warning("the in-process job %s failed; trying again", job.__name__, exc_info=True)


def _recover_forever() -> None:
    while True:
        time.sleep(settings.TURN_RECOVERY_SECONDS)
        close_old_connections()
        try:
            recover_once()
        finally:
            connection.close()


def start_in_process_recovery() -> None:
    """The embedded mode has no broker, so no beat to run the recovery job (and the periodic
    jobs registered with in_process_job): the web process runs them on a daemon thread of its
    own (started with the server, rollback_site.serve, and by the dispatch of a turn), which
    also picks up turns a restarted process left running."""
    global _recovery
    if not embedded() or not getattr(settings, "ROLLBACK_IN_PROCESS_RECOVERY", True):
        return
    with _recovery_lock:
        if _recovery is None:
            _recovery = threading.Thread(
                target=_recover_forever, name="rollback-turn-recovery", daemon=True
            )
            _recovery.start()


def turn_submit(
    *,
    session: Session,
    message: Any,
    idempotency_key: str = "",
    request_fingerprint: str = "",
) -> Turn:
    """Start a turn. With an idempotency key already used in this session, the turn it started is
    returned instead and nothing new happens, when the request is the same one again (the same
    `request_fingerprint`: a digest of its body); a request with another body is refused
    (IdempotencyKeyReused), since its message would otherwise be dropped without a word.

    A turn of the session in progress refuses the new one (TurnInProgress), unless it only
    looks so: its worker died, no worker claimed it, its approval expired. The session's turns
    are recovered then (`turns_recover`), and the turn started if that cleared the way. (No
    turn in progress, nothing to recover: a submission costs no look for one.)"""
    if idempotency_key:
        earlier = (
            # Scoped to the owner: `session` may be a reference not yet proven theirs
            # (sessions_app.selectors.session_ref_for_user; turn_start's lock proves it).
            Turn.objects.filter(
                session=session, session__owner_id=session.owner_id, idempotency_key=idempotency_key
            )
            .select_related("user_message", "reply_message")
            .first()
        )
        if earlier is not None:
            return _same_request(earlier, message, request_fingerprint)

    def start() -> Turn:
        # turn_start commits on its own (no savepoint inside another transaction); the run is
        # handed over once that commit is done, or when the caller's own transaction commits.
        turn = turn_start(
            session=session,
            message=message,
            idempotency_key=idempotency_key,
            request_fingerprint=request_fingerprint,
        )
        _run_after_commit(turn.pk)
        return turn

    try:
        try:
            turn = start()
        except TurnInProgress:
            if not turns_recover(session=session).failed:
                raise  # still in progress (or queued again after its worker died)
            turn = start()
    except TurnInProgress:
        earlier = (
            Turn.objects.filter(session=session, idempotency_key=idempotency_key).first()
            if idempotency_key
            else None
        )
        if earlier is None:
            raise
        return _same_request(earlier, message, request_fingerprint)
    return turn


def _same_request(earlier: Turn, message: Any, request_fingerprint: str) -> Turn:
    """The turn an idempotency key started, when this request is the one that started it: the
    same body (by fingerprint), or, for a turn stored without one, the same message."""
    stored = (
        earlier.metadata.get("request_fingerprint") if isinstance(earlier.metadata, dict) else None
    )
    if stored:
        same = stored == request_fingerprint
    else:
        same = isinstance(message, str) and earlier.message == storable_text(message)
    if not same:
        raise IdempotencyKeyReused(earlier.pk)
    return earlier


def chat_submit(
    *,
    owner: User,
    session_key: Any,
    message: Any,
    idempotency_key: str = "",
    request_fingerprint: str = "",
) -> Turn:
    """Start a turn on the owner's session of `session_key` (sessions_app.keys), made on first
    use; otherwise exactly `turn_submit` (the Idempotency-Key, TurnInProgress). The key and the
    message are checked before anything is written, so bad input leaves no session behind."""
    parse_session_key(session_key)
    clean_user_message(message)
    session = session_for_key(owner=owner, session_key=session_key)
    return turn_submit(
        session=session,
        message=message,
        idempotency_key=idempotency_key,
        request_fingerprint=request_fingerprint,
    )


def turn_resubmit(*, turn: Turn) -> Turn:
    """Retry a failed turn."""
    turns_recover(session=turn.session)
    with transaction.atomic():
        again = turn_retry(turn=turn)
        _run_after_commit(again.pk)
    return again


def _history_message(session: Session, message_id: int | str, role: str) -> Message:
    """A message of the session's current history (the current branch or its ancestors)."""
    try:
        message = Message.objects.select_related("branch").get(
            pk=int(message_id), branch__session=session, role=role
        )
    except (Message.DoesNotExist, ValueError, TypeError):
        raise NotFound("Message not found.") from None
    branch = current_branch(session)
    shown = branch_history(branch, start=message.position, end=message.position + 1)
    if not shown or shown[0].pk != message.pk:
        raise NotFound("That message is not part of the current branch.")
    return message


def _fork_and_ask(
    session: Session, position: int, text: str, why: JSONObject, *, model: str | None = None
) -> Turn:
    turns_recover(session=session)
    with transaction.atomic():
        if Turn.objects.filter(session=session).active().exists():
            raise TurnInProgress()
        fork = branch_fork(branch=current_branch(session), position=position, metadata=why)
        turn = turn_start(session=session, message=text, branch=fork, model=model)
        _run_after_commit(turn.pk)
    return turn


def turn_edit(*, session: Session, message_id: int | str, text: Any) -> Turn:
    """Send an edited version of a past user message: a new branch from just before it."""
    clean = clean_user_message(text)
    message = _history_message(session, message_id, Message.Role.USER)
    return _fork_and_ask(session, message.position, clean, {"edited_message": message.pk})


def turn_regenerate(*, session: Session, message_id: int | str, model: object = None) -> Turn:
    """Answer again the user message before an assistant reply: a new branch from just before
    that user message, asked the same text. With `model` (one of the allowed models:
    core.model_choice.turn_model, else InvalidInput and nothing happens), that model answers
    this turn only; the session's own choice is unchanged, and the new reply names its model."""
    chosen = turn_model(model)
    reply = _history_message(session, message_id, Message.Role.ASSISTANT)
    branch = current_branch(session)
    earlier = branch_history(branch, start=max(0, reply.position - 50), end=reply.position)
    asked = next((m for m in reversed(earlier) if m.role == Message.Role.USER), None)
    if asked is None:
        raise InvalidInput("There is no user message before this reply to answer again.")
    why: JSONObject = {"regenerated": reply.pk, **({"model": chosen} if chosen else {})}
    return _fork_and_ask(session, asked.position, asked.content, why, model=chosen)


def reply_continue(*, session: Session, message_id: int | str) -> Turn:
    """Extend the cut-off reply `message_id` (the current branch's last message) in place: a
    turn that asks the model to go on where it stopped, and appends what it says to that reply
    (sessions_app.turns.turn_continue). No user message is stored."""
    reply = _history_message(session, message_id, Message.Role.ASSISTANT)  # else NotFound
    turns_recover(session=session)
    with transaction.atomic():
        turn = turn_continue(session=session, reply_id=reply.pk)
        _run_after_commit(turn.pk)
    return turn
