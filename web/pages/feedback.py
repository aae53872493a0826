"""A reply's thumbs up or down, and its note (sessions_app/_feedback.html). Thin: look the
message up for its owner, call the service, answer with the feedback control alone (never the
message, whose text its reader may be in the middle of)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_POST

from core.http import HtmxHttpRequest, domain_errors
from sessions_app.selectors import get_message_for_user, get_session_for_user
from sessions_app.services import message_feedback_clear, message_feedback_set
from web.chat_state import state_stamp

CLEAR = "clear"  # the pressed button's value: clicking a rating again takes it back


@login_required
@require_POST
@domain_errors
def feedback(request: HtmxHttpRequest, pk: int, message_id: int) -> HttpResponse:
    session = get_session_for_user(request.user, pk)
    message = get_message_for_user(request.user, message_id, session=session)
    rating = request.POST.get("rating", "")
    if rating == CLEAR:
        message = message_feedback_clear(message=message)
    else:
        message = message_feedback_set(
            message=message, rating=rating, note=request.POST.get("note")
        )
    context = {
        "session": session,
        "m": message,
        # When this answer's state was read (after the write): a page refresh read earlier, and
        # arriving later, leaves this control as it is (static/rollback/live.js).
        "feedback_at": state_stamp(),
        # A thumbs down opens the note's field, asking why (unless a note is already there).
        "note_open": rating == "down",
    }
    return render(request, "sessions_app/_feedback.html", context)
