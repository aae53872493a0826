"""Who may use the API at all: a signed-in user whose access includes it (access.selectors)."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request

from access.errors import api_denied
from access.selectors import allowance_for


class MayUseApi(IsAuthenticated):
    """Signed in (else 401), and given the API by their access (else 403, saying so)."""

    message = api_denied().message

    def has_permission(self, request: Request, view: Any) -> bool:
        if not super().has_permission(request, view):
            return False
        return allowance_for(request.user).may_use_api
