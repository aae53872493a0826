"""REST API for branches (/api/v1/): a session's branches, one branch (renamed), made current,
its context. Thin: validate, call a service, serialise."""

from __future__ import annotations

from typing import TYPE_CHECKING

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.context import context_usage
from core.api import paginate
from core.api_schema import paginated
from sessions_app.errors import BranchNotFound
from sessions_app.labels import session_branch_labels
from sessions_app.models import Branch
from sessions_app.selectors import (
    get_branch_for_user,
    get_session_for_user,
    session_branches,
)
from sessions_app.services import (
    branch_activate,
    branch_rename,
)
from web.api.serializers import (
    BranchContextOut,
    BranchIn,
    BranchOut,
)

if TYPE_CHECKING:
    pass


class SessionBranches(APIView):
    @extend_schema(
        responses=paginated(BranchOut, "Branch"), summary="The session's branches, oldest first"
    )
    def get(self, request: Request, pk: int) -> Response:
        session = get_session_for_user(request.user, pk)
        labels = session_branch_labels(session)
        return paginate(self, session_branches(session), BranchOut, {"labels": labels})


class BranchDetail(APIView):
    @extend_schema(
        request=BranchIn,
        responses=BranchOut,
        summary="Name a branch (1 to 200 characters; the pages show the name too)",
    )
    def patch(self, request: Request, pk: int) -> Response:
        branch = get_branch_for_user(request.user, pk)
        data = BranchIn.validated(request.data)
        branch = branch_rename(branch=branch, name=data["name"])
        branch.refresh_from_db()
        return Response(BranchOut(branch).data)


class BranchActivate(APIView):
    @extend_schema(request=None, responses=BranchOut, summary="Make a branch current")
    def post(self, request: Request, pk: int) -> Response:
        branch = get_branch_for_user(request.user, pk)
        branch_activate(branch=branch)
        try:  # read again for its counts; deleted since (a racing delete): 404, never a 500
            branch.refresh_from_db()
        except Branch.DoesNotExist:
            raise BranchNotFound() from None
        return Response(BranchOut(branch).data)


class BranchContext(APIView):
    @extend_schema(
        responses=BranchContextOut,
        summary="How much of the model's window the branch uses, and the summary of what "
        "the model no longer sees whole",
    )
    def get(self, request: Request, pk: int) -> Response:
        branch = get_branch_for_user(request.user, pk)
        usage = context_usage(branch)
        summary = usage.summary
        return Response(
            BranchContextOut(
                {
                    "branch": branch.pk,
                    "budget": usage.limits.context,
                    "reserve": usage.limits.reserve,
                    "used": usage.tokens,
                    "percent": usage.percent,
                    "message_count": usage.message_count,
                    "view_start": usage.view_start,
                    "summary": summary,
                    "summarizing": usage.summarizing,
                }
            ).data
        )
