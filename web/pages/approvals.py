"""The approval card's buttons: the owner approves or refuses the tool call a turn waits for."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.views.decorators.http import require_POST

from core.errors import InvalidInput
from core.http import HtmxHttpRequest, domain_errors
from sessions_app.approvals import turn_approve
from sessions_app.selectors import get_session_for_user, get_turn_for_user

ANSWERS = {"true": True, "false": False}


@login_required
@require_POST
@domain_errors
def approve(request: HtmxHttpRequest, pk: int, turn_id: int) -> HttpResponse:
    """Approve or Refuse: the card goes from this tab at once (the answer's event takes it from
    the others); the turn goes on. An answer that finds its call no longer waiting (answered
    elsewhere, the turn ended or was taken over) is a 409 whose notice says why."""
    session = get_session_for_user(request.user, pk)
    turn = get_turn_for_user(request.user, turn_id, session=session)
    approved = ANSWERS.get(request.POST.get("approved", ""))
    if approved is None:
        raise InvalidInput("Answer with Approve or Refuse.")
    turn_approve(
        turn=turn,
        tool_call_id=request.POST.get("tool_call_id", ""),
        approved=approved,
        call=_number(request.POST.get("call"), "call"),
        attempt=_number(request.POST.get("attempt"), "attempt"),
    )
    return HttpResponse("")


def _number(raw: str | None, name: str) -> int | None:
    """The card's `call` or `attempt` (absent from a card rendered before they existed)."""
    if raw is None or raw == "":
        return None
    if not raw.isdigit():
        raise InvalidInput(f"{name} must be a whole number.")
    return int(raw)
