"""REST API for import jobs (/api/v1/imports/{id}/): the progress of an import of several
conversations (checkpoints.foreign), the sessions it made and what it left out. Another user's
job is a 404, as a missing one."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from checkpoints.foreign.formats import skipped_lines
from checkpoints.foreign.selectors import get_import_job_for_user, import_job_sessions
from checkpoints.models import ImportJob


class ImportedSessionOut(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    name = serializers.CharField()


class ImportFailureOut(serializers.Serializer[Any]):
    index = serializers.IntegerField(help_text="The conversation's place in the file, from 0")
    title = serializers.CharField()
    error = serializers.CharField()


# The job as the API shows it (its `source` is no serializer attribute: a field may not be
# named so on a Serializer class).
ImportJobOut = inline_serializer(
    "ImportJob",
    {
        "id": serializers.IntegerField(),
        "status": serializers.ChoiceField(choices=ImportJob.Status.choices),
        "source": serializers.CharField(help_text="chatgpt, openwebui or librechat"),
        "total": serializers.IntegerField(help_text="Conversations in the file"),
        "done": serializers.IntegerField(help_text="Conversations read so far (imported or not)"),
        "sessions": ImportedSessionOut(many=True, help_text="The sessions made so far"),
        "skipped": serializers.DictField(
            child=serializers.IntegerField(), help_text="What was left out, counted by kind"
        ),
        "skipped_summary": serializers.ListField(child=serializers.CharField()),
        "failures": ImportFailureOut(
            many=True, help_text="Conversations that could not be imported"
        ),
        "error": serializers.CharField(),
        "created_at": serializers.DateTimeField(),
        "finished_at": serializers.DateTimeField(allow_null=True),
    },
)
_TIME = serializers.DateTimeField()


def import_job_out(job: ImportJob) -> dict[str, Any]:
    sessions = [{"id": s.pk, "name": s.session_name} for s in import_job_sessions(job)]
    return {
        "id": job.pk,
        "status": job.status,
        "source": job.source,
        "total": job.total,
        "done": job.done,
        "sessions": sessions,
        "skipped": job.skipped,
        "skipped_summary": skipped_lines(job.skipped),
        "failures": job.failures,
        "error": job.error,
        "created_at": _TIME.to_representation(job.created_at),
        "finished_at": _TIME.to_representation(job.finished_at) if job.finished_at else None,
    }


class ImportJobDetail(APIView):
    @extend_schema(
        responses={200: ImportJobOut},
        summary="The progress of an import of several conversations, and the sessions it made",
    )
    def get(self, request: Request, pk: int) -> Response:
        return Response(import_job_out(get_import_job_for_user(request.user, pk)))
