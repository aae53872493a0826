"""The model's history of a stopped turn (agents.history.to_agno): every call has a result (one
that never answered is told as not run, or as may have run), a note follows the stopped reply,
and the stopped user message is never joined to the next one. Built, never stored."""

from __future__ import annotations

import pytest

from agents.history import MAY_HAVE_RUN, NOT_RUN, to_agno
from sessions_app.models import Turn
from sessions_app.selectors import branch_history, current_branch
from sessions_app.turns import NewMessage, turn_cancel, turn_claim, turn_keep_stopped, turn_start

pytestmark = pytest.mark.django_db


def call(call_id: str, name: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


def stopped(session, text: str, reply: str, messages, may_have_run=()) -> Turn:
    turn = turn_claim(turn_id=turn_start(session=session, message=text).pk)
    assert turn is not None
    turn_cancel(turn=Turn.objects.get(pk=turn.pk))
    assert turn_keep_stopped(turn=turn, reply=reply, messages=messages, may_have_run=may_have_run)
    return turn


def test_a_call_that_may_have_run_and_one_that_did_not_each_get_a_result(session):
    asked = NewMessage(
        role="assistant", tool_calls=[call("a", "mkdir"), call("b", "rmdir"), call("c", "ls")]
    )
    ran = NewMessage(role="tool", content="made", tool_name="mkdir", tool_call_id="a")
    stopped(session, "make it", "", [asked, ran], may_have_run={"b"})
    stored = branch_history(current_branch(session))
    assert stored[1].metadata["may_have_run"] == ["b"]
    assert stored[1].metadata["stopped_turn"] is True

    sent = to_agno(stored)
    assert [m.role for m in sent] == ["user", "assistant", "tool", "tool", "tool", "assistant"]
    assert [m.tool_call_id for m in sent[2:5]] == ["a", "b", "c"]
    assert sent[3].content == MAY_HAVE_RUN.format(tool="rmdir")
    assert sent[4].content == NOT_RUN.format(tool="ls")
    assert "mkdir ran; rmdir may have run; ls did not" in str(sent[5].content)
    # Built, never stored: the rows still say only what happened.
    assert [m.role for m in branch_history(current_branch(session))] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert stored[-1].content == ""


def test_a_stopped_message_with_nothing_done_is_not_joined_to_the_next(session):
    stopped(session, "do the whole thing", "", [])
    turn_start(session=session, message="ok, forget that")
    sent = to_agno(branch_history(current_branch(session)))
    assert (sent[0].role, sent[0].content) == ("user", "do the whole thing")
    assert sent[1].role == "assistant"
    assert "stopped this turn" in str(sent[1].content)
    assert (sent[2].role, sent[2].content) == ("user", "ok, forget that")


def test_a_partial_reply_keeps_its_text_with_the_note_after_it(session):
    stopped(session, "tell me", "Once upon", [])
    sent = to_agno(branch_history(current_branch(session)))
    assert str(sent[-1].content).startswith("Once upon\n\n[The user stopped this turn")


def test_an_unstopped_unanswered_call_is_still_removed(session, branch):
    from sessions_app.services import message_append

    message_append(branch=branch, role="user", content="q")
    message_append(branch=branch, role="assistant", content="", tool_calls=[call("x", "ls")])
    message_append(branch=branch, role="assistant", content="answer")
    sent = to_agno(branch_history(current_branch(session)))
    assert [m.role for m in sent] == ["user", "assistant", "assistant"]
    assert sent[1].tool_calls is None
