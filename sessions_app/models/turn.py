"""A turn: one user message and everything the agent did to answer it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from django.db import models
from django.db.models import Q
from django.utils import timezone

from core.validation import time_in_range

from .branch import Branch
from .message import Message
from .session import Session

if TYPE_CHECKING:
    from .session import AnyUser


class TurnQuerySet(models.QuerySet["Turn"]):
    def for_user(self, user: AnyUser) -> TurnQuerySet:
        if not getattr(user, "is_authenticated", False):
            return self.none()
        return self.filter(session__owner=user.pk)

    def active(self) -> TurnQuerySet:
        return self.filter(status__in=Turn.ACTIVE)


def _message_reference() -> models.ForeignKey[Message | None, Message | None]:
    """A turn's reference to one of its messages: no constraint and no index (read from the
    turn only; a rewind that deletes the message leaves the id behind)."""
    return models.ForeignKey(
        Message,
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,
        related_name="+",
    )


class Turn(models.Model):
    """One user message and everything the agent did to answer it."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        AWAITING_APPROVAL = "awaiting_approval"
        DONE = "done"
        FAILED = "failed"
        CANCELLED = "cancelled"

    ACTIVE = (Status.QUEUED, Status.RUNNING, Status.AWAITING_APPROVAL)

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="turns")
    # The branch the turn answers on; null once a rewind has deleted that branch.
    branch = models.ForeignKey(
        Branch, null=True, blank=True, on_delete=models.SET_NULL, related_name="turns"
    )
    status = models.CharField(max_length=24, choices=Status.choices, default=Status.QUEUED)
    # While the turn waits at `awaiting_approval`: the tool call that waits for its owner's
    # answer, `{"tool_call_id", "tool_name", "args"}` (agents.approval_gate); null otherwise.
    pending_approval = models.JSONField(null=True, blank=True)
    # The turn's texts are not copied here: it refers to the user's message and to its reply
    # (the last assistant message it stored), and reads them through these (`message`,
    # `reply`). A rewind that deletes them leaves the ids behind (no constraint, nothing to
    # update on the turn rows when messages go): the texts then read as empty.
    user_message = _message_reference()
    # Where the user's message sits in the branch's history.
    user_message_position = models.PositiveIntegerField(null=True, blank=True)
    reply_message = _message_reference()
    tools_used = models.JSONField(default=list, blank=True)
    checkpoint = models.ForeignKey(
        "checkpoints.Checkpoint",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    rolled_back_to = models.ForeignKey(
        "checkpoints.Checkpoint",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    # Touched by the worker while it runs the turn (and set when a turn is queued again): a
    # running turn whose heartbeat stops is taken over by another worker, or failed once its
    # attempts are used up, so a session is never blocked for good.
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # When the turn was last handed to the workers' queue: when it was started, queued again, or
    # sent again by the recovery job because no worker claimed it in TURN_REDISPATCH_SECONDS (its
    # task was lost: a message the broker dropped, a worker that died before claiming it).
    dispatched_at = models.DateTimeField(default=timezone.now)
    # How many times a worker has claimed the turn. It is also the worker's fencing token: only
    # the worker holding the current attempt may store the answer or finish the turn.
    attempts = models.PositiveSmallIntegerField(default=0)
    finished_at = models.DateTimeField(null=True, blank=True)
    # model, usage, latency_ms, first_token_ms, finish_reason, demo, worker, request_id (of the
    # request that queued it)
    metadata = models.JSONField(default=dict, blank=True)
    # An API client's Idempotency-Key: a retried POST gets this turn back instead of a new one.
    idempotency_key = models.CharField(max_length=200, blank=True, default="")

    objects = TurnQuerySet.as_manager()

    class Meta:
        ordering: ClassVar[list[str]] = ["created_at", "id"]
        constraints: ClassVar[list[models.BaseConstraint]] = [
            # One turn at a time per session: a second one is refused by the database too.
            models.UniqueConstraint(
                fields=["session"],
                condition=Q(status__in=["queued", "running", "awaiting_approval"]),
                name="one_active_turn_per_session",
            ),
            models.UniqueConstraint(
                fields=["session", "idempotency_key"],
                condition=~Q(idempotency_key=""),
                name="turn_idempotency_key_unique",
            ),
            time_in_range("created_at", name="turn_created_at_in_range"),
            time_in_range("started_at", name="turn_started_at_in_range", null=True),
            time_in_range("heartbeat_at", name="turn_heartbeat_at_in_range", null=True),
            time_in_range("dispatched_at", name="turn_dispatched_at_in_range"),
            time_in_range("finished_at", name="turn_finished_at_in_range", null=True),
        ]
        indexes: ClassVar[list[models.Index]] = [
            models.Index(fields=["session", "created_at"], name="turn_session_created"),
            # The operator's dashboard lists the newest failures: a small index of failed turns
            # only, instead of a scan of every turn.
            models.Index(
                fields=["-finished_at", "-id"],
                condition=Q(status="failed"),
                name="turn_failed_newest",
            ),
        ]

    def __str__(self) -> str:
        return f"turn {self.pk} ({self.status})"

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE

    @property
    def message(self) -> str:
        """The user's message: the text of the message the turn refers to ("" once a rewind or
        a deleted branch took it away). Read with select_related("user_message") to spare a
        query."""
        return self._text("user_message", "message_text")

    @property
    def reply(self) -> str:
        """The reply: the text of the last assistant message the turn stored ("" when there is
        none: a turn that failed, was cancelled before a word, or was rewound away)."""
        return self._text("reply_message", "reply_text")

    def _text(self, relation: str, kept: str) -> str:
        """A text read through `relation`, unless the turn kept it in metadata[`kept`]: only
        when no stored message holds it (a turn stored before the references existed whose
        message could not be found; a reply that differs from its last message's text)."""
        meta = self.metadata if isinstance(self.metadata, dict) else {}
        text = meta.get(kept)
        if isinstance(text, str):
            return text
        try:
            message = getattr(self, relation)
        except Message.DoesNotExist:  # deleted by a rewind: the id stays behind
            return ""
        return str(message.content) if message is not None else ""

    def log_ids(self) -> dict[str, Any]:
        """The ids every log line about this turn carries (core.logs): the request that queued
        it, its user, its session, itself."""
        meta = self.metadata if isinstance(self.metadata, dict) else {}
        return {
            "request_id": meta.get("request_id"),
            "user_id": self.session.owner_id,
            "session_id": self.session_id,
            "turn_id": self.pk,
        }

    @property
    def finish_reason(self) -> str | None:
        """Why the reply ended, as the turn pipeline or the cancel recorded it: `stop` (the model
        finished), `length` (cut at a length limit), `interrupted` (the stream ended without a
        finish; the text so far is the reply), `tool_limit` (AGENT_MAX_TOOL_CALLS reached),
        `cancelled`. None while the turn runs and when it failed."""
        if self.status == self.Status.CANCELLED:
            return "cancelled"
        if self.status != self.Status.DONE:
            return None
        reason = self.metadata.get("finish_reason") if isinstance(self.metadata, dict) else None
        return reason if isinstance(reason, str) and reason else None
