"""The chat page's session settings: the model picker (a POST of `model`) and the session's
instructions and test command (GET: the dialog; POST of `instructions` and `test_command`).
Both go through the service the API's PATCH uses (sessions_app.services.session_settings_update,
then session_update), so every open tab hears `session.changed` and shows the change."""

from __future__ import annotations

from typing import Literal

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.views.decorators.http import require_http_methods

from accounts.models import User
from core.errors import InvalidInput
from core.http import HtmxHttpRequest, domain_errors
from core.model_choice import INSTRUCTIONS_MAX_CHARS, TEST_COMMAND_MAX_CHARS
from sandbox.availability import availability
from sessions_app.models import Session
from sessions_app.selectors import get_session_for_user
from sessions_app.services import session_settings_update
from web.templatetags.session_settings import picker_context


def _dialog(
    request: HtmxHttpRequest,
    session: Session,
    *,
    instructions: str,
    test_command: str,
    checkpoint_each_message: str,
    error: str = "",
) -> HttpResponse:
    user = request.user
    preferred = isinstance(user, User) and user.preference("checkpoint_each_message") is True
    context = {
        "session": session,
        "checkpoint_each_message": checkpoint_each_message,
        "checkpoint_each_message_default": "on" if preferred else "off",
        "instructions": instructions,
        "test_command": test_command,
        "test_command_max": TEST_COMMAND_MAX_CHARS,
        "sandbox": availability().ok,
        "user_instructions": isinstance(user, User) and bool(user.preference("instructions")),
        "max_chars": INSTRUCTIONS_MAX_CHARS,
        "max_chars_label": f"{INSTRUCTIONS_MAX_CHARS:,}",
        "error": error,
    }
    # A refused text comes back in the open dialog with the reason (200: the page's dialogs
    # close on an error status, and would take what was typed with them).
    return render(request, "sessions_app/_session_settings.html", context)


def _stored(session: Session, key: str) -> str:
    value = session.settings.get(key)
    return value if isinstance(value, str) else ""


# The dialog's choice of a checkpoint before each message: the profile's default, on or off.
EACH_MESSAGE: dict[str, bool | Literal["default"]] = {"": "default", "on": True, "off": False}


def _each_message(session: Session) -> str:
    value = session.settings.get("checkpoint_each_message")
    return "" if not isinstance(value, bool) else "on" if value else "off"


@login_required
@require_http_methods(["GET", "POST"])
@domain_errors
def session_settings(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """GET: the instructions dialog. POST `model`: the picker again (with the reason, 400,
    when the model is refused). POST `instructions`: the dialog closes, the header's controls
    show them set (or the dialog again with the reason, nothing written)."""
    session = get_session_for_user(request.user, pk)
    if request.method == "GET":
        return _dialog(
            request,
            session,
            instructions=_stored(session, "instructions"),
            test_command=_stored(session, "test_command"),
            checkpoint_each_message=_each_message(session),
        )
    if "instructions" in request.POST:
        text = request.POST["instructions"]
        command = request.POST.get("test_command")
        each = request.POST.get("checkpoint_each_message")  # absent: an older page, unchanged
        try:
            if each is not None and each not in EACH_MESSAGE:
                raise InvalidInput("Choose your default, on or off for the checkpoints.")
            session_settings_update(
                session=session,
                instructions=text,
                test_command=command,
                checkpoint_each_message=EACH_MESSAGE[each] if each is not None else None,
            )
        except InvalidInput as exc:
            return _dialog(
                request,
                session,
                instructions=text,
                test_command=command if command is not None else "",
                checkpoint_each_message=each if each in EACH_MESSAGE else "",
                error=exc.people,
            )
        controls = render_to_string(
            "sessions_app/_session_controls.html",
            {**picker_context(session), "oob": True},
            request,
        )
        return HttpResponse(controls)  # the dialog (this form's target) is emptied: it closes
    try:
        session_settings_update(session=session, model=request.POST.get("model", ""))
    except InvalidInput as exc:
        context = picker_context(session, error=exc.people)
        return render(request, "sessions_app/_session_controls.html", context, status=400)
    return render(request, "sessions_app/_session_controls.html", picker_context(session))
