"""A tool call waiting for its owner's approval, answered from Telegram: the chat is shown the
call and its arguments, `/approve` runs it and `/refuse` keeps it from running (the same service
as the web app's buttons), through the webhook, the turn running on the embedded mode's pool."""

from __future__ import annotations

import pytest

from agents.dispatch import drain
from integrations.telegram import relay
from integrations.telegram.commands import NOTHING_AWAITS
from integrations.telegram.links import link_code_consume, link_code_create
from sessions_app.models import Message, Turn
from tests.fakes.chat_server import Reply, ToolCall, ToolCalls
from tests.integrations.updates import CHAT, message, post, said

pytestmark = pytest.mark.django_db(transaction=True)

BOBS_CHAT = CHAT + 1
EMAIL = {"to": "bob@example.com", "subject": "hi"}
ASKS = "Send /approve or /refuse."


@pytest.fixture
def email_tool(settings, telegram, fake_llm, celery_eager, alice, bob):
    """alice's and bob's chats linked, a tool that waits for approval, turns on the pool."""
    from tests.agents import approval_tools

    settings.AGENT_TOOLS = ["tests.agents.approval_tools.send_email"]
    settings.AGENT_APPROVAL_SECONDS = 60  # a failing test waits this long at most
    link_code_consume(code=link_code_create(user=alice).code, chat_id=CHAT, title="alice")
    link_code_consume(code=link_code_create(user=bob).code, chat_id=BOBS_CHAT, title="bob")
    approval_tools.SENT.clear()
    yield approval_tools.SENT
    approval_tools.SENT.clear()


def paused(client, telegram, fake_llm) -> Turn:
    """alice asks for a mail from her chat; the turn waits for her approval, and says so."""
    fake_llm.queue(ToolCalls([ToolCall("send_email", EMAIL, id="c1")]), Reply("Mailed **Bob**."))
    assert post(client, message("mail bob")).status_code == 200
    telegram.wait_for(lambda _: any(ASKS in text for text in telegram.texts(CHAT)))
    turn = Turn.objects.get()
    assert turn.status == Turn.Status.AWAITING_APPROVAL
    return turn


def ended(turn: Turn) -> Turn:
    drain()
    assert relay.idle(15)
    turn.refresh_from_db()
    return turn


def test_the_chat_sees_the_call_and_approve_runs_it(client, telegram, fake_llm, email_tool):
    turn = paused(client, telegram, fake_llm)
    [note] = [text for text in telegram.texts(CHAT) if ASKS in text]
    assert 'send_email {"subject": "hi", "to": "bob@example.com"}' in note
    assert email_tool == []

    assert post(client, message("/approve")).status_code == 200
    assert "Approved: send_email runs now." in said(telegram)
    turn = ended(turn)
    assert turn.status == Turn.Status.DONE
    assert email_tool == [("bob@example.com", "hi")]
    # The reply's message (which asked for the approval) now shows the reply; the answer below.
    assert telegram.texts(CHAT) == ["Mailed Bob.", "Approved: send_email runs now."]


def test_refuse_keeps_the_tool_from_running(client, telegram, fake_llm, email_tool):
    turn = paused(client, telegram, fake_llm)
    assert post(client, message("/refuse")).status_code == 200
    assert "Refused: send_email does not run." in said(telegram)
    turn = ended(turn)
    assert turn.status == Turn.Status.DONE
    assert email_tool == []
    tool = Message.objects.get(role="tool")
    assert "refused" in tool.content.lower()
    # Answered already: a second answer finds nothing waiting.
    assert post(client, message("/approve")).status_code == 200
    assert said(telegram)[-1] == NOTHING_AWAITS
    assert email_tool == []


def test_nothing_waiting_and_another_users_chat_answer_nothing(
    client, telegram, fake_llm, email_tool
):
    assert post(client, message("/approve")).status_code == 200
    assert said(telegram) == [NOTHING_AWAITS]

    turn = paused(client, telegram, fake_llm)
    # bob's chat answers for bob's conversation only: alice's call still waits.
    assert post(client, message("/approve", chat_id=BOBS_CHAT)).status_code == 200
    assert said(telegram, BOBS_CHAT) == [NOTHING_AWAITS]
    turn.refresh_from_db()
    assert turn.status == Turn.Status.AWAITING_APPROVAL
    assert email_tool == []

    assert post(client, message("/refuse")).status_code == 200
    assert ended(turn).status == Turn.Status.DONE
    assert email_tool == []


def test_the_note_of_a_call_that_may_have_run_says_so_before_how_to_answer():
    from sessions_app.approvals import MAY_HAVE_RUN_NOTE

    warning = MAY_HAVE_RUN_NOTE.format(attempt=1)
    note = relay.approval_note("send_email", EMAIL, warning)
    assert note.index("⚠️ This call may already have run") < note.index(ASKS)
    assert "⚠️" not in relay.approval_note("send_email", EMAIL)
