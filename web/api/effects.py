"""REST API for the effects ledger (/api/v1/sessions/{id}/effects/): the external calls a
session's turns made, oldest first, whatever was rewound, restored or deleted since. Thin: look
the session up from the user, list, serialise."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api import paginate
from core.api_schema import paginated
from sessions_app.selectors import get_session_for_user, session_ledger
from web.api.serializers import LedgerEntryOut


class SessionEffects(APIView):
    @extend_schema(
        responses=paginated(LedgerEntryOut, "LedgerEntry"),
        summary="The session's ledger of external calls, oldest first (a rewind, restore, Stop "
        "or branch deletion never removes an entry)",
    )
    def get(self, request: Request, pk: int) -> Response:
        session = get_session_for_user(request.user, pk)
        return paginate(self, session_ledger(session), LedgerEntryOut)
