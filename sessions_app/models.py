"""Sessions, branches, messages, checkpoints and turns: the rows of a conversation.

Every message is stored once, in the branch that produced it. A branch made by a restore points at
its parent and a fork position: its history is the parent's history below that position followed
by its own messages, whose positions continue from the fork position. So forking and checkpointing
never copy a message, and a branch's history is read by one recursive query (see `history`).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, ClassVar

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from core.validation import NAME_MAX_LENGTH, JSONObject, time_in_range

if TYPE_CHECKING:
    from typing import TypeAlias

    from django.contrib.auth.base_user import AbstractBaseUser
    from django.contrib.auth.models import AnonymousUser

    # Whoever a request is from: a signed-in user or the anonymous one.
    AnyUser: TypeAlias = AbstractBaseUser | AnonymousUser


class SessionQuerySet(models.QuerySet["Session"]):
    def for_user(self, user: AnyUser) -> SessionQuerySet:
        if not getattr(user, "is_authenticated", False):
            return self.none()
        return self.filter(owner=user.pk)

    def active(self) -> SessionQuerySet:
        return self.filter(archived_at__isnull=True)


class Session(models.Model):
    """A user's conversation or project: what the product calls a session."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="chat_sessions"
    )
    session_name = models.CharField(max_length=NAME_MAX_LENGTH)
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    updated_at = models.DateTimeField(default=timezone.now)
    archived_at = models.DateTimeField(null=True, blank=True)
    # An integration's own address for the conversation (sessions_app.keys); empty: none (the API
    # shows null). Empty rather than NULL, like Turn.idempotency_key: one "no value" for the
    # column, in Django's way for text. Unique per owner: two users with the same key each have
    # their own session.
    session_key = models.CharField(max_length=255, blank=True, default="")
    # When its owner pinned it to the top of their list; null: not pinned.
    pinned_at = models.DateTimeField(null=True, blank=True)

    objects = SessionQuerySet.as_manager()

    class Meta:
        verbose_name = "session"
        ordering: ClassVar[list[str]] = ["-created_at", "-id"]
        indexes: ClassVar[list[models.Index]] = [
            models.Index(fields=["owner", "-created_at"], name="session_owner_created"),
            # The sidebar: pinned first, then most recently active (sessions_app.selectors).
            models.Index(
                fields=["owner", "-pinned_at", "-updated_at"], name="session_owner_pinned"
            ),
        ]
        # Times a user can set (an import, the admin) stay where Python can read them back.
        constraints: ClassVar[list[models.BaseConstraint]] = [
            time_in_range("created_at", name="session_created_at_in_range"),
            time_in_range("updated_at", name="session_updated_at_in_range"),
            time_in_range("archived_at", name="session_archived_at_in_range", null=True),
            time_in_range("pinned_at", name="session_pinned_at_in_range", null=True),
            # Its index serves the lookup of a user's session by key (owner, session_key).
            models.UniqueConstraint(
                fields=["owner", "session_key"],
                condition=~Q(session_key=""),
                name="session_key_unique_per_owner",
                violation_error_message="This user already has a session with this key.",
            ),
        ]

    def __str__(self) -> str:
        return self.session_name

    @property
    def settings(self) -> JSONObject:
        value = self.metadata.get("settings") if isinstance(self.metadata, dict) else None
        return value if isinstance(value, dict) else {}


class BranchQuerySet(models.QuerySet["Branch"]):
    def for_user(self, user: AnyUser) -> BranchQuerySet:
        if not getattr(user, "is_authenticated", False):
            return self.none()
        return self.filter(session__owner=user.pk)


def new_agno_session_id() -> str:
    return str(uuid.uuid4())


class Branch(models.Model):
    """A branch: one line of conversation inside a session."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="branches")
    agno_session_id = models.CharField(max_length=64, unique=True, default=new_agno_session_id)
    # The name its owner gave it; empty: the page and the API call it by its default label
    # (sessions_app.labels).
    name = models.CharField(max_length=NAME_MAX_LENGTH, blank=True, default="")
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="children"
    )
    # How many of the parent's history messages this branch inherits.
    fork_position = models.PositiveIntegerField(default=0)
    forked_from = models.ForeignKey(
        "checkpoints.Checkpoint",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="forks",
    )
    # Length of this branch's whole history (inherited plus own): the next message's position.
    message_count = models.PositiveIntegerField(default=0)
    session_state = models.JSONField(default=dict, blank=True)
    is_current = models.BooleanField(default=False)
    checkpoint_count = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    metadata = models.JSONField(default=dict, blank=True)
    # How much of its ancestors' workspace this branch sees (workspace.selectors): the file
    # versions of its parent's lineage whose id is at most this mark, as they stood at the fork.
    # Null for a branch with no parent.
    fork_file_mark = models.PositiveBigIntegerField(null=True, blank=True)

    objects = BranchQuerySet.as_manager()

    class Meta:
        verbose_name = "branch"
        verbose_name_plural = "branches"
        ordering: ClassVar[list[str]] = ["created_at", "id"]
        constraints: ClassVar[list[models.BaseConstraint]] = [
            # At most one current branch per session, enforced by the database; the services
            # create a session together with its first (current) branch and only ever move the
            # flag inside one transaction, so there is always exactly one.
            models.UniqueConstraint(
                fields=["session"],
                condition=Q(is_current=True),
                name="one_current_branch_per_session",
            ),
            models.CheckConstraint(
                condition=Q(message_count__gte=models.F("fork_position")),
                name="branch_count_covers_fork",
            ),
            time_in_range("created_at", name="branch_created_at_in_range"),
        ]
        indexes: ClassVar[list[models.Index]] = [
            models.Index(fields=["session", "created_at"], name="branch_session_created")
        ]

    def __str__(self) -> str:
        return f"branch {self.pk} of session {self.session_id}"

    @property
    def own_message_count(self) -> int:
        return self.message_count - self.fork_position


class MessageQuerySet(models.QuerySet["Message"]):
    def for_user(self, user: AnyUser) -> MessageQuerySet:
        if not getattr(user, "is_authenticated", False):
            return self.none()
        return self.filter(branch__session__owner=user.pk)


class Effect(models.TextChoices):
    """What a tool call did beyond the conversation (api-contract.md, "Workspace and tools with
    effects")."""

    NONE = "none"
    WORKSPACE = "workspace"
    EXTERNAL = "external"


class Message(models.Model):
    """One entry of a branch's history. Written once, never updated, never copied."""

    class Role(models.TextChoices):
        USER = "user"
        ASSISTANT = "assistant"
        SYSTEM = "system"
        TOOL = "tool"

    branch = models.ForeignKey(Branch, on_delete=models.CASCADE, related_name="messages")
    position = models.PositiveIntegerField()
    role = models.CharField(max_length=16, choices=Role.choices)
    content = models.TextField(blank=True, default="")
    # A tool message: which tool ran, with what arguments, what it returned, and the id of the
    # call it answers. An assistant message: the tool calls it made, as the model protocol has them.
    tool_name = models.CharField(max_length=200, blank=True, default="")
    tool_args = models.JSONField(null=True, blank=True)
    tool_result = models.TextField(blank=True, default="")
    tool_call_id = models.CharField(max_length=200, blank=True, default="")
    tool_calls = models.JSONField(null=True, blank=True)
    # A tool message: what the call did beyond this conversation. `none`: it only read;
    # `workspace`: it changed the session's files (a restore undoes it); `external`: it acted on
    # the outside world (nothing here can undo it). Empty for the other roles.
    effect = models.CharField(max_length=16, choices=Effect.choices, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    metadata = models.JSONField(default=dict, blank=True)

    objects = MessageQuerySet.as_manager()

    class Meta:
        ordering: ClassVar[list[str]] = ["position"]
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.UniqueConstraint(fields=["branch", "position"], name="message_position_unique"),
            models.CheckConstraint(
                condition=Q(role__in=["user", "assistant", "system", "tool"]),
                name="message_role_valid",
            ),
            time_in_range("created_at", name="message_created_at_in_range"),
        ]

    def __str__(self) -> str:
        return f"{self.role} #{self.position}"


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


class Summary(models.Model):
    """A summary, written by the model, of a lineage prefix: the history up to and including
    `last_message`. Every branch whose history holds that message shares the prefix (histories
    form a tree), so one summary serves them all; nothing is copied per branch. A rewind that
    deletes `last_message` deletes the summary with it."""

    last_message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="summaries")
    # The summary covers the positions 0 .. end_position - 1 (last_message.position + 1).
    end_position = models.PositiveIntegerField()
    content = models.TextField()
    model = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    # tokens (estimated), pieces (summarising requests made), source_messages
    metadata = models.JSONField(default=dict, blank=True)

    class Meta:
        verbose_name_plural = "summaries"
        ordering: ClassVar[list[str]] = ["-end_position", "-id"]
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.UniqueConstraint(fields=["last_message"], name="one_summary_per_prefix"),
            time_in_range("created_at", name="summary_created_at_in_range"),
        ]

    def __str__(self) -> str:
        return f"summary of positions 0-{self.end_position - 1}"


class CheckpointQuerySet(models.QuerySet["Checkpoint"]):
    def for_user(self, user: AnyUser) -> CheckpointQuerySet:
        if not getattr(user, "is_authenticated", False):
            return self.none()
        return self.filter(branch__session__owner=user.pk)

    def auto(self) -> CheckpointQuerySet:
        return self.filter(is_auto=True)

    def manual(self) -> CheckpointQuerySet:
        return self.filter(is_auto=False)


class Checkpoint(models.Model):
    """A named position in a branch, with a snapshot of the (small) session state.

    It copies no message: `message_count` is the length of the branch's history when it was
    taken, and the history itself is read from the branch. Its operations (create, restore,
    rewind, import, export, retention) are the `checkpoints` package's, one layer up; the row is
    defined here, next to the branches that refer to it (`forked_from`, `Turn.checkpoint`), so the
    models do not depend on each other across packages. Its app label stays `checkpoints`: the
    table, the migrations, the admin's URLs and the permissions are where they always were.
    """

    branch = models.ForeignKey(Branch, on_delete=models.CASCADE, related_name="checkpoints")
    checkpoint_name = models.CharField(max_length=NAME_MAX_LENGTH)
    description = models.TextField(blank=True, default="")
    is_auto = models.BooleanField(default=False)
    message_count = models.PositiveIntegerField()
    session_state = models.JSONField(default=dict, blank=True)
    # The workspace as it stood: the file versions of the branch's lineage whose id is at most
    # this mark (workspace.selectors). One number: a checkpoint copies no file.
    files_mark = models.PositiveBigIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    # trigger, tool_name, importance, ...
    metadata = models.JSONField(default=dict, blank=True)

    objects = CheckpointQuerySet.as_manager()

    class Meta:
        app_label = "checkpoints"
        ordering: ClassVar[list[str]] = ["-created_at", "-id"]
        indexes: ClassVar[list[models.Index]] = [
            models.Index(fields=["branch", "-created_at"], name="checkpoint_branch_created"),
            models.Index(
                fields=["branch", "is_auto", "-created_at"], name="checkpoint_branch_auto"
            ),
            models.Index(fields=["branch", "message_count"], name="checkpoint_branch_position"),
            # Which checkpoints hold a version (files_mark >= its id): a rewind's cut, coalescing.
            models.Index(fields=["branch", "files_mark"], name="checkpoint_branch_files_mark"),
            models.Index(fields=["created_at"], name="checkpoint_created"),
        ]
        # An imported checkpoint's time stays where Python can read it back.
        constraints: ClassVar[list[models.BaseConstraint]] = [
            time_in_range("created_at", name="checkpoint_created_at_in_range")
        ]

    def __str__(self) -> str:
        return self.checkpoint_name

    @property
    def kind(self) -> str:
        return "auto" if self.is_auto else "manual"


# --- the workspace's rows (operations: the `workspace` package, one layer up) --------------------
# Defined here for the reason the checkpoint is: branches, checkpoints and turns refer to them
# (a fork's mark, a rewind's deletion, a failed turn's writes) without a dependency across
# packages. Their app label is `workspace`.

WORKSPACE_PATH_MAX = 255


class WorkspaceBlob(models.Model):
    """The content of a file, stored once per session however many versions, branches and
    checkpoints show it: addressed by its SHA-256."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="+")
    sha256 = models.CharField(max_length=64)
    size = models.PositiveIntegerField()  # bytes, UTF-8
    content = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        app_label = "workspace"
        verbose_name = "file content"
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.UniqueConstraint(fields=["session", "sha256"], name="blob_unique_per_session"),
            time_in_range("created_at", name="blob_created_at_in_range"),
        ]

    def __str__(self) -> str:
        return f"{self.sha256[:12]} ({self.size} bytes)"


class FileVersion(models.Model):
    """One write (or deletion, `blob` null) of one path, at a position of a branch. Written once,
    never updated, never copied: a branch's workspace as of a mark is the newest version of each
    path along its lineage (workspace.selectors)."""

    branch = models.ForeignKey(Branch, on_delete=models.CASCADE, related_name="file_versions")
    # The branch's message count when it was written.
    position = models.PositiveIntegerField()
    path = models.CharField(max_length=WORKSPACE_PATH_MAX)
    blob = models.ForeignKey(
        WorkspaceBlob, null=True, blank=True, on_delete=models.RESTRICT, related_name="versions"
    )
    # The turn whose agent wrote it (null: a person, an import): a turn that fails or is
    # stopped loses its writes with its messages.
    turn = models.ForeignKey(
        Turn, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    # by ("agent", "user", "api", "import"), tool_call_id, ...
    metadata = models.JSONField(default=dict, blank=True)

    class Meta:
        app_label = "workspace"
        verbose_name = "file version"
        ordering: ClassVar[list[str]] = ["id"]
        indexes: ClassVar[list[models.Index]] = [
            models.Index(fields=["branch", "id"], name="fileversion_branch_id"),
            models.Index(fields=["branch", "path", "id"], name="fileversion_branch_path"),
            # The first version written after a message (a fork's or a rewind's cut).
            models.Index(fields=["branch", "position", "id"], name="fileversion_branch_position"),
        ]
        constraints: ClassVar[list[models.BaseConstraint]] = [
            time_in_range("created_at", name="fileversion_created_at_in_range"),
        ]

    def __str__(self) -> str:
        return f"{self.path} @ {self.position}"
