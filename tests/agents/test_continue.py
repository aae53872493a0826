"""Continue extends a cut-off reply in place (agents.services.reply_continue): no user message is
stored; the model gets the history ending with its cut-off reply and a request to go on; what it
says is stored as an assistant message joined to that reply, for the page and for the model's
later requests. With the fake Chat Completions server and with the offline demo model."""

from __future__ import annotations

import pytest

from agents.demo_model import DEMO_CONTINUATION
from agents.history import CONTINUE_INSTRUCTION
from agents.services import reply_continue, turn_resubmit
from agents.worker import run_turn
from checkpoints.services import checkpoint_create, checkpoint_restore
from core.errors import InvalidInput, NotFound
from sessions_app.models import Turn
from sessions_app.selectors import branch_history, current_branch
from sessions_app.services import message_append, session_create
from sessions_app.turns import CUT_NOTE
from tests.conftest import ask, say
from tests.fakes.chat_server import Error, Reply
from tests.web.api.conftest import bearer_client
from web.chat_state import conversation

pytestmark = pytest.mark.django_db


def cut_reply(branch, text: str = "The list: one, two", reason: str = "length"):
    return message_append(
        branch=branch,
        role="assistant",
        content=text + (CUT_NOTE if reason == "length" else ""),
        metadata={"finish_reason": reason, "model": "fake-model"},
    )


def history(session) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in branch_history(current_branch(session))]


def run_continue(session, reply) -> Turn:
    turn = reply_continue(session=session, message_id=reply.pk)
    run_turn(turn.pk)
    turn.refresh_from_db()
    return turn


def test_continue_appends_to_the_reply_and_sends_no_user_message(session, branch, fake_llm):
    say(branch, "list the numbers")
    reply = cut_reply(branch)
    fake_llm.queue(Reply(", three, four."))
    turn = run_continue(session, reply)
    assert turn.status == "done"
    assert turn.finish_reason == "stop"
    assert turn.message == ""  # no user message of its own
    assert history(session) == [
        ("user", "list the numbers"),
        ("assistant", "The list: one, two" + CUT_NOTE),
        ("assistant", ", three, four."),
    ]
    continuation = branch_history(current_branch(session))[-1]
    assert continuation.metadata["continues"] == reply.pk
    # The model got the history ending with its cut-off reply (without the note), then the
    # request to go on; that request is not stored.
    sent = [(m["role"], m["content"]) for m in fake_llm.messages(-1) if m["role"] != "system"]
    assert sent[-3:] == [
        ("user", "list the numbers"),
        ("assistant", "The list: one, two"),
        ("user", CONTINUE_INSTRUCTION),
    ]
    # The page shows one reply, its texts joined, no longer cut off.
    shown = conversation(session)
    assistants = [m for m in shown["history"] if m.role == "assistant"]
    assert [m.content for m in assistants] == ["The list: one, two, three, four."]
    assert assistants[0].pk == reply.pk
    assert shown["continuable"] is None


def test_the_next_turn_sends_the_continued_reply_as_one(session, branch, fake_llm):
    say(branch, "list")
    reply = cut_reply(branch, "one, two")
    fake_llm.queue(Reply(", three."), Reply("Done."))
    run_continue(session, reply)
    ask(session, "thanks")
    sent = [(m["role"], m["content"]) for m in fake_llm.messages(-1) if m["role"] != "system"]
    assert sent[-3:] == [("user", "list"), ("assistant", "one, two, three."), ("user", "thanks")]


def test_a_continuation_cut_off_again_can_be_continued_again(session, branch, fake_llm):
    say(branch, "count")
    reply = cut_reply(branch, "1 2", reason="interrupted")
    fake_llm.queue(Reply(" 3 4", finish_reason="length"), Reply(" 5."))
    assert run_continue(session, reply).finish_reason == "length"
    shown = conversation(session)
    last = branch_history(current_branch(session))[-1]
    assert shown["continuable"] == last.pk
    assert shown["continuable_shown"] == reply.pk  # the button sits on the one joined reply
    assert shown["history"][-1].content == "1 2 3 4" + CUT_NOTE
    run_continue(session, last)
    assert conversation(session)["history"][-1].content == "1 2 3 4 5."


def test_the_demo_model_continues_offline(session, branch, settings):
    settings.OPENAI_API_KEY = settings.OPENAI_BASE_URL = ""
    say(branch, "tell me")
    reply = cut_reply(branch, "Once upon a time")
    turn = run_continue(session, reply)
    assert turn.status == "done"
    assert history(session)[-1] == ("assistant", DEMO_CONTINUATION)
    assert conversation(session)["history"][-1].content == "Once upon a time" + DEMO_CONTINUATION


def test_checkpoints_count_the_continuation_and_a_restore_brings_back_the_cut_off_reply(
    session, branch, fake_llm
):
    say(branch, "list")
    reply = cut_reply(branch, "one")
    before = checkpoint_create(branch=current_branch(session), name="cut")
    fake_llm.queue(Reply(", two."))
    run_continue(session, reply)
    after = checkpoint_create(branch=current_branch(session), name="continued")
    assert (before.message_count, after.message_count) == (2, 3)
    checkpoint_restore(checkpoint=before, mode="branch")
    shown = conversation(session)
    assert shown["history"][-1].content == "one" + CUT_NOTE
    assert shown["continuable"] == reply.pk


def test_a_failed_continuation_is_retried_as_a_continuation(session, branch, fake_llm, settings):
    settings.AGENT_MAX_RETRIES = 0
    say(branch, "list")
    reply = cut_reply(branch, "one")
    fake_llm.queue(Error(500, "down"))
    failed = run_continue(session, reply)
    assert failed.status == "failed"
    assert len(history(session)) == 2  # nothing stored
    fake_llm.queue(Reply(", two."))
    again = turn_resubmit(turn=failed)
    run_turn(again.pk)
    assert history(session)[-1] == ("assistant", ", two.")
    assert branch_history(current_branch(session))[-1].metadata["continues"] == reply.pk


def test_only_the_last_cut_off_reply_can_be_continued_and_nothing_is_written(
    session, branch, alice
):
    say(branch, "question")
    whole = message_append(
        branch=branch, role="assistant", content="whole", metadata={"finish_reason": "stop"}
    )
    with pytest.raises(InvalidInput, match="cut off"):
        reply_continue(session=session, message_id=whole.pk)
    old = cut_reply(branch, "cut")
    say(branch, "more")
    with pytest.raises(InvalidInput, match="last reply"):
        reply_continue(session=session, message_id=old.pk)
    other = session_create(owner=alice, name="other")
    with pytest.raises(NotFound):
        reply_continue(session=other, message_id=old.pk)
    with pytest.raises(NotFound):
        reply_continue(session=session, message_id="x")
    assert not Turn.objects.filter(session=session).exists()
    assert len(history(session)) == 4


def test_the_api_lists_the_continuation_truthfully(session, branch, fake_llm, alice):
    say(branch, "list")
    reply = cut_reply(branch, "one")
    fake_llm.queue(Reply(", two."))
    turn = run_continue(session, reply)
    api = bearer_client(alice)
    listed = api.get(f"/api/v1/sessions/{session.pk}/messages/").json()["results"]
    assert [(m["role"], m["content"]) for m in listed] == [
        ("user", "list"),
        ("assistant", "one" + CUT_NOTE),
        ("assistant", ", two."),
    ]
    answered = api.get(f"/api/v1/turns/{turn.pk}/").json()
    assert answered["status"] == "done"
    assert answered["message"] == ""
    assert answered["reply"] == ", two."
