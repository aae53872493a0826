"""The REST API's shapes for sessions, branches, messages and turns (see the public contract)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.api import JSONObjectField, StrictBooleanField, StrictSerializer, TextField
from core.validation import JSONObject
from sessions_app.approvals import may_have_run_note
from sessions_app.feedback import NOTE_MAX_CHARS, RATINGS, Feedback, feedback_of
from sessions_app.labels import branch_label
from sessions_app.models import Branch, Effect, LedgerEntry, Session, Turn


class SessionOut(serializers.Serializer[Session]):
    id = serializers.IntegerField()
    name = serializers.CharField(source="session_name")
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    archived_at = serializers.DateTimeField(allow_null=True)
    pinned = serializers.SerializerMethodField(
        help_text='Pinned to the top of its owner\'s list (PATCH {"pinned": true}).'
    )
    metadata = serializers.JSONField()
    current_branch = serializers.IntegerField(source="current_branch_id", allow_null=True)
    branch_count = serializers.IntegerField()
    session_key = serializers.SerializerMethodField(
        help_text="The key an integration addresses this session by (POST /chat/), or null. "
        "Set when POST /chat/ makes the session; not changed by PATCH."
    )

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_session_key(self, session: Session) -> str | None:
        return session.session_key or None

    @extend_schema_field(serializers.BooleanField())
    def get_pinned(self, session: Session) -> bool:
        return session.pinned_at is not None


class SessionIn(StrictSerializer):
    name = TextField(required=False, allow_blank=True, trim_whitespace=False)
    metadata = JSONObjectField(required=False)
    archived = StrictBooleanField(required=False)
    pinned = StrictBooleanField(required=False)


class SessionCreateIn(StrictSerializer):
    name = TextField(required=True, allow_blank=False, trim_whitespace=False)
    metadata = JSONObjectField(required=False)


class BranchIn(StrictSerializer):
    name = TextField(required=True, allow_blank=True, trim_whitespace=False)


class BranchOut(serializers.Serializer[Branch]):
    """A branch. `name` is what the pages call it too: the name given to it, else its default
    label ("main", "edit of message 3", ...; see sessions_app.labels). Give the serializer the
    session's labels in its context (`labels`) to spare a query per branch."""

    id = serializers.IntegerField()
    session = serializers.IntegerField(source="session_id")
    name = serializers.SerializerMethodField()
    # DRF's metaclass takes declared fields out of the class, so this does not replace
    # Field.parent at run time; the stubs cannot know that.
    parent = serializers.IntegerField(  # type: ignore[assignment]
        source="parent_id", allow_null=True
    )
    forked_from = serializers.IntegerField(source="forked_from_id", allow_null=True)
    fork_position = serializers.IntegerField()
    is_current = serializers.BooleanField()
    message_count = serializers.IntegerField()
    checkpoint_count = serializers.IntegerField()
    created_at = serializers.DateTimeField()

    @extend_schema_field(OpenApiTypes.STR)
    def get_name(self, branch: Branch) -> str:
        labels = self.context.get("labels")
        if isinstance(labels, dict) and branch.pk in labels:
            return str(labels[branch.pk])
        return branch_label(branch)


class FeedbackOut(serializers.Serializer[Any]):
    rating = serializers.ChoiceField(choices=RATINGS)
    note = serializers.CharField(help_text='The note given with the rating ("" for none).')


class FeedbackIn(StrictSerializer):
    rating = serializers.ChoiceField(choices=RATINGS, help_text='"up" or "down".')
    note = TextField(
        required=False,
        allow_blank=True,
        allow_null=True,
        trim_whitespace=False,
        help_text=f"Optional, at most {NOTE_MAX_CHARS:,} characters; replaces any earlier note.",
    )


class MessageOut(serializers.Serializer[Any]):  # a Message, or its row's values
    id = serializers.IntegerField()
    position = serializers.IntegerField()
    role = serializers.CharField()
    content = serializers.CharField()
    tool_name = serializers.CharField()
    tool_args = serializers.JSONField(allow_null=True)
    tool_result = serializers.CharField()
    tool_call_id = serializers.CharField()
    tool_calls = serializers.JSONField(allow_null=True)
    effect = serializers.ChoiceField(
        choices=Effect.choices,
        allow_null=True,
        help_text="A tool message's effect: none (it only read), workspace (a restore undoes "
        "it), external (nothing here can undo it); null for the other roles.",
    )
    metadata = serializers.JSONField()
    created_at = serializers.DateTimeField()
    feedback = serializers.SerializerMethodField(
        help_text="An assistant message's rating by its owner (POST /messages/{id}/feedback/), "
        "or null."
    )

    def to_representation(self, instance: Any) -> dict[str, Any]:
        data: dict[str, Any] = super().to_representation(instance)
        data["effect"] = data.get("effect") or None  # a Message's "" (not a tool message)
        return data

    @extend_schema_field(FeedbackOut(allow_null=True))
    def get_feedback(self, instance: Any) -> Feedback | None:
        if isinstance(instance, Mapping):
            return feedback_of(instance.get("metadata"), str(instance.get("role")))
        return feedback_of(instance.metadata, instance.role)


class LedgerEntryOut(serializers.Serializer[LedgerEntry]):
    """An entry of the session's effects ledger: one external call a turn made. Its branch and
    turn are ids, kept after a rewind or a deleted branch took those away."""

    id = serializers.IntegerField()
    branch = serializers.IntegerField(
        source="branch_ref",
        allow_null=True,
        help_text="The branch's id; null for an imported entry whose branch was not exported.",
    )
    turn = serializers.IntegerField(source="turn_ref", allow_null=True)
    tool_name = serializers.CharField()
    tool_args = serializers.JSONField(allow_null=True)
    tool_result = serializers.CharField()
    status = serializers.ChoiceField(
        choices=LedgerEntry.Status.choices,
        help_text="ran (it answered without an error), failed (it did not run, or answered "
        "with an error), may_have_run (no answer came: a timeout, a lost connection).",
    )
    created_at = serializers.DateTimeField()


class UsageOut(serializers.Serializer[Mapping[str, object]]):
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()


class TurnContextOut(serializers.Serializer[Mapping[str, object]]):
    budget = serializers.IntegerField(help_text="The model's window in tokens.")
    reserve = serializers.IntegerField(help_text="Tokens kept for the reply (max_tokens).")
    tokens = serializers.IntegerField(help_text="The request, by Rollback's count.")
    view_start = serializers.IntegerField(
        help_text="Position of the first message sent whole; those before are summarised."
    )
    summary = serializers.IntegerField(allow_null=True)
    summaries_made = serializers.IntegerField()


class SummaryOut(serializers.Serializer[Any]):  # a Summary, or None
    id = serializers.IntegerField()
    end_position = serializers.IntegerField(help_text="It covers positions 0 .. end_position-1.")
    content = serializers.CharField()
    model = serializers.CharField()
    created_at = serializers.DateTimeField()


class BranchContextOut(serializers.Serializer[Mapping[str, object]]):
    branch = serializers.IntegerField()
    budget = serializers.IntegerField(help_text="The model's window in tokens.")
    reserve = serializers.IntegerField(help_text="Tokens kept for the reply (max_tokens).")
    used = serializers.IntegerField(help_text="The next request without the new message.")
    percent = serializers.IntegerField(help_text="`used` as a share of what a request may take.")
    message_count = serializers.IntegerField()
    view_start = serializers.IntegerField(
        help_text="Position of the first message the model sees whole; those before it are "
        "summarised in `summary`."
    )
    summary = SummaryOut(allow_null=True)
    summarizing = serializers.BooleanField(
        help_text="The branch's older messages are being summarised (in the background, or by "
        "a turn): until that ends, `used` counts them whole."
    )


class Usage(TypedDict):
    input_tokens: int
    output_tokens: int


class PendingApprovalOut(serializers.Serializer[Mapping[str, object]]):
    """The tool call a turn waits at `awaiting_approval` for its owner to approve or refuse."""

    tool_call_id = serializers.CharField()
    tool_name = serializers.CharField()
    args = serializers.JSONField()
    call = serializers.IntegerField(
        help_text="The call's place among the calls of this attempt that waited (1, 2, ...): "
        "tool-call ids may repeat, so send it back with the answer."
    )
    attempt = serializers.IntegerField(help_text="The turn's attempt that asks.")
    args_sha256 = serializers.CharField(
        help_text="The sha256 of the call's arguments as canonical JSON (sorted keys, no spaces)."
    )
    may_have_run = serializers.BooleanField(
        help_text="An earlier attempt of this turn approved this same call and its worker "
        "stopped: the call may already have run, and approving runs it again."
    )
    note = serializers.CharField(allow_null=True, help_text="Says so, when `may_have_run`.")


class TurnOut(serializers.Serializer[Turn]):
    id = serializers.IntegerField()
    session = serializers.IntegerField(source="session_id")
    branch = serializers.IntegerField(source="branch_id", allow_null=True)
    status = serializers.CharField()
    pending_approval = serializers.SerializerMethodField()
    message = serializers.CharField()
    reply = serializers.CharField()
    finish_reason = serializers.CharField(allow_null=True)
    tools_used = serializers.ListField(child=serializers.CharField())
    checkpoint = serializers.IntegerField(source="checkpoint_id", allow_null=True)
    rolled_back_to = serializers.IntegerField(source="rolled_back_to_id", allow_null=True)
    error = serializers.CharField()
    usage = serializers.SerializerMethodField()
    # As `parent` above: the declared field, not Field.context, at run time.
    context = serializers.SerializerMethodField()  # type: ignore[assignment]
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)

    @extend_schema_field(PendingApprovalOut(allow_null=True))
    def get_pending_approval(self, turn: Turn) -> dict[str, object] | None:
        pending = turn.pending_approval
        if turn.status != Turn.Status.AWAITING_APPROVAL or not isinstance(pending, dict):
            return None
        shown = {key: pending.get(key) for key in ("tool_call_id", "tool_name", "args")}
        return {
            **shown,
            "call": pending.get("call"),
            "attempt": pending.get("attempt"),
            "args_sha256": pending.get("args_sha256"),
            "may_have_run": bool(pending.get("may_have_run")),
            "note": may_have_run_note(pending),
        }

    @extend_schema_field(UsageOut(allow_null=True))
    def get_usage(self, turn: Turn) -> Usage | None:
        usage = turn.metadata.get("usage") if isinstance(turn.metadata, dict) else None
        if not isinstance(usage, dict) or not usage:
            return None
        return {
            "input_tokens": usage.get("input_tokens") or 0,
            "output_tokens": usage.get("output_tokens") or 0,
        }

    @extend_schema_field(TurnContextOut(allow_null=True))
    def get_context(self, turn: Turn) -> JSONObject | None:
        """How the turn's request fitted the model's window (null before it was sent)."""
        context = turn.metadata.get("context") if isinstance(turn.metadata, dict) else None
        return context if isinstance(context, dict) else None


class TurnIn(StrictSerializer):
    # Empty and oversized messages are refused by the turn service (400 and 413).
    message = TextField(allow_blank=True, trim_whitespace=False)
    wait = StrictBooleanField(required=False, default=False)


@extend_schema_field(OpenApiTypes.STR)
class SessionKeyField(serializers.Field[object, object, object, Any]):
    """Taken as sent: the service checks it (sessions_app.keys) and its refusal says what form a
    key has, whatever was wrong (not text, a NUL, a missing part)."""

    def to_internal_value(self, data: object) -> object:
        return data

    def to_representation(self, value: object) -> object:
        return value


class ChatIn(TurnIn):
    session_key = SessionKeyField(
        help_text="agent:<agentId>:<scope>:<chatId>; scope is main, per-peer or "
        "per-channel-peer. Your session of this key is made on first use.",
    )


@extend_schema_field(OpenApiTypes.INT)
class CallNumberField(serializers.Field[object, object, object, Any]):
    """Taken as sent: the service checks it is a whole number of 1 or more (and says so)."""

    def to_internal_value(self, data: object) -> object:
        return data

    def to_representation(self, value: object) -> object:
        return value


class ApproveIn(StrictSerializer):
    # The service checks the answer against the call that waits (409 when it is not that one).
    tool_call_id = TextField(max_length=200, trim_whitespace=False)
    approved = StrictBooleanField()
    call = CallNumberField(
        required=False,
        help_text="`pending_approval.call`: names the call when its id repeats (optional).",
    )
    attempt = CallNumberField(
        required=False,
        help_text="`pending_approval.attempt`: an answer to an earlier attempt is a 409 "
        "(optional).",
    )
