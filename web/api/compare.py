"""REST API: compare two points of a session (/api/v1/sessions/{id}/diff/?from=&to=).

Thin: checkpoints.compare parses the refs, reads the lineage and builds the differences; this
module only shapes them as the contract says (`common`, `from`, `to`, `state`, `files`), with
`from_count` and `to_count` beside the lists, which hold at most DIFF_MESSAGES_MAX messages.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from checkpoints.compare import FileDiff, SessionDiff, session_diff
from sessions_app.selectors import get_session_for_user
from web.api.serializers import MessageOut

DIFF_MESSAGES_MAX = 1_000  # messages of each side in one answer


def _file(f: FileDiff) -> dict[str, Any]:
    return {"path": f.path, "diff": f.diff, "note": f.note or None}


def diff_data(diff: SessionDiff) -> dict[str, Any]:
    """The contract's shape of a comparison."""
    return {
        "common": diff.common,
        "from": MessageOut(diff.from_messages, many=True).data,
        "to": MessageOut(diff.to_messages, many=True).data,
        "from_count": diff.from_count,
        "to_count": diff.to_count,
        "state": {
            "added": diff.state.added,
            "removed": diff.state.removed,
            "changed": diff.state.changed,
        },
        "files": {
            "added": [_file(f) for f in diff.files.added],
            "removed": [_file(f) for f in diff.files.removed],
            "changed": [_file(f) for f in diff.files.changed],
        },
    }


class FileDiffOut(serializers.Serializer[Any]):
    path = serializers.CharField()
    diff = serializers.CharField(
        help_text="Unified diff (diff -u) of the file's text from `from` to `to`; an added "
        "file is compared with nothing before, a removed one with nothing after."
    )
    note = serializers.CharField(
        allow_null=True,
        help_text="Why the diff is cut or empty (a very long file, or past the bytes a "
        "comparison reads), else null.",
    )


class StateDiffOut(serializers.Serializer[Any]):
    added = serializers.DictField(
        child=serializers.JSONField(), help_text="Top-level keys only `to` has, with values."
    )
    removed = serializers.DictField(
        child=serializers.JSONField(), help_text="Top-level keys only `from` has, with values."
    )
    changed = serializers.DictField(
        child=serializers.JSONField(),
        help_text='Top-level keys both have, with different values: {"from": ..., "to": ...} '
        "(the values whole; nested values are not compared further).",
    )


class FilesDiffOut(serializers.Serializer[Any]):
    added = FileDiffOut(many=True, help_text="Files only `to` has.")
    removed = FileDiffOut(many=True, help_text="Files only `from` has.")
    changed = FileDiffOut(many=True, help_text="Files both have, with different contents.")


DiffOut = inline_serializer(
    "FileDiff",
    {
        "path": serializers.CharField(),
        "diff": serializers.CharField(
            help_text="Unified diff (diff -u) of the file's text from `from` to `to`; an added "
            "file is compared with nothing, a removed one with nothing after."
        ),
        "note": serializers.CharField(
            allow_null=True,
            help_text="Why the diff is cut or empty (a very long file, or past the bytes a "
            "comparison reads), else null.",
        ),
    },
)

DiffOut = inline_serializer(
    "SessionDiff",
    {
        "common": serializers.IntegerField(
            help_text="How many messages the two points share from the start."
        ),
        "from": MessageOut(
            many=True,
            help_text=f"The messages `from` has after the shared ones, oldest first (at most "
            f"{DIFF_MESSAGES_MAX:,}).",
        ),
        "to": MessageOut(
            many=True,
            help_text=f"The messages `to` has after the shared ones, oldest first (at most "
            f"{DIFF_MESSAGES_MAX:,}).",
        ),
        "from_count": serializers.IntegerField(
            help_text="How many messages `from` has after the shared ones."
        ),
        "to_count": serializers.IntegerField(
            help_text="How many messages `to` has after the shared ones."
        ),
        "state": StateDiffOut(),
        "files": FilesDiffOut(),
    },
)

REF_HELP = "branch:<id> (the branch's whole history) or checkpoint:<id>, of this session"


class SessionDiffView(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("from", OpenApiTypes.STR, required=True, description=REF_HELP),
            OpenApiParameter("to", OpenApiTypes.STR, required=True, description=REF_HELP),
        ],
        responses=DiffOut,
        summary="Compare two points of a session: the shared history, what each has after it, "
        "their session states and files",
    )
    def get(self, request: Request, pk: int) -> Response:
        session = get_session_for_user(request.user, pk)
        diff = session_diff(
            session,
            request.query_params.get("from"),
            request.query_params.get("to"),
            limit=DIFF_MESSAGES_MAX,
        )
        return Response(diff_data(diff))
