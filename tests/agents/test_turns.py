"""Turns against a real local Chat Completions server: what is stored, what the model receives,
events, automatic checkpoints, rollbacks, retries and failures."""

from __future__ import annotations

import json

import pytest

from agents.agent_service import AgentService
from agents.services import turn_regenerate, turn_submit
from agents.worker import run_turn
from checkpoints.models import Checkpoint
from checkpoints.services import checkpoint_create
from core.errors import InvalidInput
from sessions_app.errors import MessageTooLong, TurnInProgress
from sessions_app.models import Branch, Message, Session, Turn
from sessions_app.selectors import branch_history, current_branch
from sessions_app.services import session_create, session_update
from sessions_app.turns import CUT_NOTE, turn_cancel, turn_start
from tests.conftest import ask, run_hearing
from tests.fakes.chat_server import (
    Drop,
    Error,
    Garbage,
    Hang,
    Reply,
    ToolCall,
    ToolCalls,
)
from tests.waits import until

# Real commits, as in a worker: events sent after a commit arrive in the order they happen.
pytestmark = pytest.mark.django_db(transaction=True)


def sent(server, i: int = -1) -> list[tuple[str, str]]:
    """(role, content) of the messages request i carried, without the system prompt."""
    out = []
    for m in server.messages(i):
        if m["role"] == "system":
            continue
        content = m.get("content") or ""
        if m.get("tool_calls"):
            content = "calls " + ",".join(c["function"]["name"] for c in m["tool_calls"])
        out.append((m["role"], content))
    return out


def history(session) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in branch_history(current_branch(session))]


# --- plain turns -----------------------------------------------------------------------------


def test_a_plain_turn_stores_the_reply_with_model_tokens_and_latency(fake_llm, session):
    fake_llm.queue(Reply("Hello **there**.", prompt_tokens=12, completion_tokens=4))
    events: list[dict] = []
    turn = ask(session, "hi", events)
    assert turn.status == "done"
    assert turn.reply == "Hello **there**."
    assert history(session) == [("user", "hi"), ("assistant", "Hello **there**.")]
    reply = branch_history(current_branch(session))[-1]
    assert reply.metadata["model"] == "fake-model"
    assert reply.metadata["input_tokens"] == 12
    assert reply.metadata["output_tokens"] == 4
    assert reply.metadata["latency_ms"] >= 0
    body = fake_llm.requests[-1]
    assert body["model"] == "fake-model"
    assert body["stream"] is True
    assert body["messages"][0]["role"] == "system"  # not "developer": any compatible server
    assert sent(fake_llm) == [("user", "hi")]
    kinds = [e["type"] for e in events]
    assert kinds[0] == "turn.started"
    assert kinds[-1] == "turn.finished"
    deltas = [e["delta"] for e in events if e["type"] == "message.delta"]
    assert len(deltas) > 1
    assert "".join(deltas) == "Hello **there**."


def test_each_turn_sends_exactly_the_branch_history(fake_llm, session):
    fake_llm.queue(Reply("one"), Reply("two"))
    ask(session, "first")
    ask(session, "second")
    assert sent(fake_llm) == [("user", "first"), ("assistant", "one"), ("user", "second")]


def test_session_settings_choose_an_allowed_model_and_temperature(fake_llm, session, settings):
    settings.AGENT_ALLOWED_MODELS = ["other"]
    session_update(session=session, metadata={"settings": {"model": "other", "temperature": 0.2}})
    fake_llm.queue(Reply("ok"))
    ask(session, "hi")
    assert fake_llm.requests[-1]["model"] == "other"
    assert fake_llm.requests[-1]["temperature"] == 0.2


@pytest.mark.parametrize(
    ("chosen", "error"),
    [({"model": "other"}, "'other' is not allowed here"), ({"temperature": 9}, "from 0 to 2")],
    ids=["model", "temperature"],
)
def test_a_stored_session_whose_model_is_no_longer_allowed_fails_its_turn_without_calling_it(
    fake_llm, session, chosen, error
):
    # Stored before the allow-list existed (or before the operator narrowed it).
    Session.objects.filter(pk=session.pk).update(metadata={"settings": chosen})
    session.refresh_from_db()
    events: list[dict] = []
    turn = ask(session, "hi", events)
    assert turn.status == "failed"
    assert error in turn.error
    assert fake_llm.requests == []
    assert [e["type"] for e in events][-1] == "turn.failed"
    assert [m.role for m in branch_history(current_branch(session))] == ["user"]


# --- length limits ---------------------------------------------------------------------------


def test_each_request_carries_the_output_token_limit_as_max_tokens(fake_llm, session, settings):
    settings.AGENT_MAX_OUTPUT_TOKENS = 321
    fake_llm.queue(Reply("ok"))
    turn = ask(session, "hi")
    assert fake_llm.requests[-1]["max_tokens"] == 321
    assert turn.metadata["finish_reason"] == "stop"


def test_an_output_token_limit_of_0_is_not_sent(fake_llm, session, settings):
    settings.AGENT_MAX_OUTPUT_TOKENS = 0
    fake_llm.queue(Reply("ok"))
    ask(session, "hi")
    assert "max_tokens" not in fake_llm.requests[-1]


def test_a_reply_longer_than_the_bound_is_stopped_there_and_stored_cut_off(
    fake_llm, session, settings
):
    settings.AGENT_MAX_REPLY_CHARS = 5000
    text = ("x" * 999 + " ") * 2000  # 2 MB
    fake_llm.queue(Reply(text, chunk_size=10))
    events: list[dict] = []
    turn = ask(session, "talk for a long time", events)
    cut = text[:5000] + CUT_NOTE
    assert turn.status == "done"
    assert turn.metadata["finish_reason"] == "length"
    assert turn.reply == cut
    stored = branch_history(current_branch(session))[-1]
    assert stored.content == cut
    assert stored.metadata["finish_reason"] == "length"
    # The stream itself stopped at the bound: no more of it was relayed.
    assert "".join(e["delta"] for e in events if e["type"] == "message.delta") == cut


def test_a_reply_the_server_cut_at_max_tokens_is_marked_and_ends_with_length(fake_llm, session):
    fake_llm.queue(Reply("The answer is", finish_reason="length"))
    turn = ask(session, "hi")
    assert turn.status == "done"
    assert turn.metadata["finish_reason"] == "length"
    assert turn.reply == "The answer is" + CUT_NOTE
    assert branch_history(current_branch(session))[-1].content == "The answer is" + CUT_NOTE


def test_a_tool_call_longer_than_the_bound_fails_the_turn_and_runs_nothing(
    fake_llm, session, settings
):
    settings.AGENT_MAX_REPLY_CHARS = 1000
    fake_llm.queue(ToolCalls([ToolCall("calculate", {"expression": "1+" * 1000 + "1"})]))
    turn = ask(session, "add a lot of ones")
    assert turn.status == "failed"
    assert "passed the limit of 1000 characters (AGENT_MAX_REPLY_CHARS)" in turn.error
    assert len(fake_llm.requests) == 1
    assert [m.role for m in branch_history(current_branch(session))] == ["user"]


def test_a_long_tool_result_is_stored_cut_off(fake_llm, session, branch, settings):
    settings.AGENT_MAX_REPLY_CHARS = 300
    for i in range(20):
        checkpoint_create(branch=branch, name=f"a checkpoint with a rather long name {i}")
    fake_llm.queue(ToolCalls([ToolCall("list_checkpoints_tool", {})]), Reply("Here they are."))
    turn = ask(session, "list checkpoints")
    assert turn.status == "done"
    assert turn.reply == "Here they are."
    (result,) = [m for m in branch_history(current_branch(session)) if m.role == "tool"]
    assert result.tool_result.endswith(CUT_NOTE)
    assert len(result.tool_result) == 300 + len(CUT_NOTE)
    assert result.content == result.tool_result


# --- tools and automatic checkpoints -------------------------------------------------------


def test_a_tool_turn_stores_every_step_and_checkpoints_automatically(fake_llm, session):
    fake_llm.queue(
        ToolCalls([ToolCall("calculate", {"expression": "6*7"}, id="call_a")]),
        Reply("It is 42."),
    )
    events: list[dict] = []
    turn = ask(session, "what is 6*7?", events)
    assert turn.status == "done"
    assert turn.tools_used == ["calculate"]
    stored = branch_history(current_branch(session))
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    call, result = stored[1], stored[2]
    assert call.tool_calls[0]["id"] == "call_a"
    assert (result.tool_name, result.tool_args, result.tool_result) == (
        "calculate",
        {"expression": "6*7"},
        "42",
    )
    assert result.tool_call_id == "call_a"
    # The second request carried the call and its result, paired by id.
    second = fake_llm.messages(-1)
    assert second[-1] == {"role": "tool", "content": "42", "tool_call_id": "call_a"}
    assert turn.checkpoint is None  # a sum changes nothing a checkpoint could mark
    kinds = [e["type"] for e in events]
    assert kinds.index("tool.started") < kinds.index("tool.finished") < kinds.index("turn.finished")
    assert "checkpoint.created" not in kinds


def test_a_turn_whose_tool_changed_something_ends_with_an_automatic_checkpoint(fake_llm, session):
    fake_llm.queue(
        ToolCalls([ToolCall("write_file", {"path": "a.md", "content": "x"}, id="call_w")]),
        Reply("Written."),
    )
    events: list[dict] = []
    turn = ask(session, "write a.md", events)
    auto = turn.checkpoint
    assert auto is not None
    assert auto.is_auto
    assert auto.checkpoint_name == "after-write_file"
    assert auto.message_count == 4
    assert auto.metadata["trigger"] == "tool_call"
    assert auto.metadata["tool_name"] == "write_file"
    assert auto.metadata["message_count"] == 4
    kinds = [e["type"] for e in events]
    assert kinds.index("tool.finished") < kinds.index("checkpoint.created")


def test_a_replayed_tool_exchange_is_valid_protocol(fake_llm, session):
    fake_llm.queue(
        ToolCalls([ToolCall("calculate", {"expression": "1+1"}, id="call_abc1")]),
        Reply("2"),
        Reply("ok"),
    )
    ask(session, "1+1?")
    ask(session, "thanks")
    msgs = fake_llm.messages(-1)[1:]
    assert [m["role"] for m in msgs] == ["user", "assistant", "tool", "assistant", "user"]
    assert msgs[1]["tool_calls"][0]["id"] == "call_abc1" == msgs[2]["tool_call_id"]
    assert json.loads(msgs[1]["tool_calls"][0]["function"]["arguments"]) == {"expression": "1+1"}


def test_no_automatic_checkpoint_when_the_session_turns_it_off(fake_llm, session):
    session_update(session=session, metadata={"settings": {"auto_checkpoint": False}})
    fake_llm.queue(ToolCalls([ToolCall("calculate", {"expression": "1+1"})]), Reply("2"))
    turn = ask(session, "1+1?")
    assert turn.checkpoint is None
    assert not Checkpoint.objects.exists()


def test_the_owners_preference_turns_automatic_checkpoints_off(fake_llm, alice, session):
    alice.metadata = {"preferences": {"auto_checkpoint": False}}
    alice.save()
    fake_llm.queue(ToolCalls([ToolCall("calculate", {"expression": "1+1"})]), Reply("2"))
    assert ask(session, "1+1?").checkpoint is None


def test_a_checkpoint_the_model_makes_marks_the_conversation_before_the_request(fake_llm, session):
    fake_llm.queue(Reply("hi"))
    ask(session, "hello")
    fake_llm.queue(ToolCalls([ToolCall("create_checkpoint", {"name": "greeted"})]), Reply("Saved."))
    turn = ask(session, "save this as greeted")
    cp = Checkpoint.objects.get(checkpoint_name="greeted")
    assert not cp.is_auto
    assert cp.message_count == 2
    assert turn.checkpoint is None  # only checkpoint tools ran: no automatic checkpoint
    assert "created successfully (ID: " in branch_history(current_branch(session))[-2].tool_result


# --- rollback ------------------------------------------------------------------------------


def _two_topics(server, session):
    server.queue(Reply("Variables hold values."))
    ask(session, "what are variables?")
    checkpoint_create(branch=current_branch(session), name="after-variables")
    server.queue(Reply("Functions take arguments."))
    ask(session, "and functions?")


def test_rollback_asked_in_plain_words_restores_a_new_branch(fake_llm, session):
    _two_topics(fake_llm, session)
    old = current_branch(session)
    fake_llm.queue(
        ToolCalls(
            [ToolCall("rollback_to_checkpoint_tool", {"checkpoint_id_or_name": "after-variables"})]
        ),
        Reply("Rolled back."),
    )
    events: list[dict] = []
    turn = ask(session, "roll back to after-variables", events)
    assert turn.status == "done"
    assert turn.rolled_back_to.checkpoint_name == "after-variables"
    new = current_branch(session)
    assert new.pk != old.pk
    assert new.parent_id == old.pk
    assert new.fork_position == 2
    assert any(e["type"] == "branch.changed" and e["branch"] == new.pk for e in events)
    # The old branch keeps everything, including the rollback exchange.
    old.refresh_from_db()
    assert old.message_count == 8
    fake_llm.queue(Reply("Sure."))
    ask(session, "what next?")
    assert sent(fake_llm) == [
        ("user", "what are variables?"),
        ("assistant", "Variables hold values."),
        ("user", "what next?"),
    ]


def test_rollback_through_the_service_then_the_model_sees_the_restored_history(
    fake_llm, alice, session
):
    _two_topics(fake_llm, session)
    cp = Checkpoint.objects.get(checkpoint_name="after-variables")
    agent = AgentService(user=alice).rollback_to_checkpoint(session.pk, cp.pk)
    assert agent is not None
    assert agent.internal_session.pk == current_branch(session).pk
    fake_llm.queue(Reply("Back."))
    agent.run("where were we?")
    assert sent(fake_llm) == [
        ("user", "what are variables?"),
        ("assistant", "Variables hold values."),
        ("user", "where were we?"),
    ]


def test_rollback_to_an_unknown_name_is_a_tool_error_and_the_turn_goes_on(fake_llm, session):
    _two_topics(fake_llm, session)
    fake_llm.queue(
        ToolCalls([ToolCall("rollback_to_checkpoint_tool", {"checkpoint_id_or_name": "nope"})]),
        lambda body: Reply(f"Tool said: {body['messages'][-1]['content']}"),
    )
    branches = Branch.objects.count()
    turn = ask(session, "roll back to nope")
    assert turn.status == "done"
    assert turn.rolled_back_to is None
    assert "no checkpoint named 'nope'" in fake_llm.messages(-1)[-1]["content"]
    assert Branch.objects.count() == branches


def test_rollback_to_another_sessions_checkpoint_is_refused(fake_llm, alice, session):
    other = session_create(owner=alice, name="other")
    foreign = checkpoint_create(branch=current_branch(other), name="elsewhere")
    fake_llm.queue(
        ToolCalls([ToolCall("rollback_to_checkpoint_tool", {"checkpoint_id_or_name": foreign.pk})]),
        Reply("Could not."),
    )
    turn = ask(session, f"roll back to {foreign.pk}")
    assert turn.status == "done"
    assert turn.rolled_back_to is None
    assert f"no checkpoint {foreign.pk} in this session" in fake_llm.messages(-1)[-1]["content"]
    assert Branch.objects.filter(session=session).count() == 1


@pytest.mark.parametrize(
    "arguments",
    [{"checkpoint_id": "abc"}, {}, "{not json"],
    ids=["wrong-type", "missing", "broken-json"],
)
def test_a_tool_call_with_bad_arguments_gives_the_model_an_error(fake_llm, session, arguments):
    fake_llm.queue(
        ToolCalls([ToolCall("get_checkpoint_info_tool", arguments)]), Reply("Sorry about that.")
    )
    turn = ask(session, "info please")
    assert turn.status == "done"
    assert turn.reply == "Sorry about that."
    tool_reply = fake_llm.messages(-1)[-1]
    assert tool_reply["role"] == "tool"
    assert "error" in tool_reply["content"].lower()


# --- failures and retries ------------------------------------------------------------------


def test_429_and_500_are_retried_then_the_turn_succeeds(fake_llm, session):
    fake_llm.queue(Error(429), Error(503), Reply("finally"))
    turn = ask(session, "hi")
    assert turn.status == "done"
    assert turn.reply == "finally"
    assert len(fake_llm.requests) == 3


def test_when_retries_run_out_the_turn_fails_and_keeps_the_users_message(fake_llm, session):
    fake_llm.queue(Error(500), Error(500), Error(500), Reply("too late"))
    events: list[dict] = []
    turn = ask(session, "are you there?", events)
    assert turn.status == "failed"
    assert turn.error == (
        "The model did not answer: the model server answered HTTP 500 after 3 attempts: "
        "injected failure (a server error)"
    )
    assert len(fake_llm.requests) == 3  # the first try and AGENT_MAX_RETRIES=2 retries
    assert history(session) == [("user", "are you there?")]
    assert events[-1]["type"] == "turn.failed"
    assert events[-1]["error"] == turn.error


def test_a_timeout_fails_the_turn_readably(fake_llm, session, settings):
    settings.AGENT_TIMEOUT = 0.3
    settings.AGENT_MAX_RETRIES = 0
    fake_llm.queue(Hang(3))
    turn = ask(session, "slow?")
    assert turn.status == "failed"
    assert turn.error == "The model did not answer: the model server did not answer within 0.3 s"
    assert history(session) == [("user", "slow?")]


def test_an_authentication_error_is_not_retried_and_says_what_to_check(fake_llm, session):
    fake_llm.queue(Error(401, "bad key"), Reply("never"))
    turn = ask(session, "hi")
    assert turn.status == "failed"
    assert "HTTP 401" in turn.error
    assert "check OPENAI_API_KEY" in turn.error
    assert len(fake_llm.requests) == 1


@pytest.mark.parametrize(
    ("item", "error"),
    [
        (Garbage(), "could not be read"),
        (Drop(after_chunks=0), "the connection to the model server failed"),
    ],
    ids=["garbage", "dropped-before-any-text"],
)
def test_garbage_or_a_dropped_stream_fails_the_turn_and_loses_nothing(
    fake_llm, session, settings, item, error
):
    settings.AGENT_MAX_RETRIES = 0
    fake_llm.queue(Reply("an earlier answer"))
    ask(session, "earlier")
    fake_llm.queue(item)
    turn = ask(session, "now")
    assert turn.status == "failed"
    assert error in turn.error
    assert history(session) == [
        ("user", "earlier"),
        ("assistant", "an earlier answer"),
        ("user", "now"),
    ]


def test_the_next_turn_after_a_failure_works(fake_llm, session, settings):
    settings.AGENT_MAX_RETRIES = 0
    fake_llm.queue(Error(500), Reply("better"))
    assert ask(session, "one").status == "failed"
    assert ask(session, "two").status == "done"
    # The failed turn's message has no answer: it is joined to the next one, so the model never
    # gets two user messages in a row (strict chat templates refuse that).
    assert sent(fake_llm) == [("user", "one\n\ntwo")]


# --- bad input -----------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "   \n", None, 42])
def test_an_empty_message_is_refused_before_the_model_is_called(fake_llm, session, text):
    with pytest.raises(InvalidInput):
        turn_start(session=session, message=text)
    assert fake_llm.requests == []
    assert not Message.objects.exists()
    assert not Turn.objects.exists()


def test_an_oversized_message_is_refused_before_the_model_is_called(fake_llm, session, settings):
    settings.AGENT_MAX_INPUT_CHARS = 100
    with pytest.raises(MessageTooLong, match="limit is 100"):
        turn_start(session=session, message="x" * 101)
    assert fake_llm.requests == []
    assert not Message.objects.exists()


def test_a_second_turn_while_one_is_queued_is_refused(fake_llm, session):
    turn_start(session=session, message="first")
    with pytest.raises(TurnInProgress):
        turn_start(session=session, message="second")
    assert Message.objects.count() == 1


def test_a_redelivered_task_does_not_run_the_turn_twice(fake_llm, session):
    fake_llm.queue(Reply("once"))
    turn = ask(session, "hi")
    assert run_turn(turn.pk) is None
    assert len(fake_llm.requests) == 1
    assert len(history(session)) == 2


def test_turn_submit_runs_the_turn_on_commit(
    fake_llm, session, inline_turns, django_capture_on_commit_callbacks
):
    fake_llm.queue(Reply("queued and done"))
    with django_capture_on_commit_callbacks(execute=True):
        turn = turn_submit(session=session, message="hi")
    turn.refresh_from_db()
    assert turn.status == "done"
    assert turn.reply == "queued and done"


def test_a_turn_whose_branch_was_rewound_meanwhile_is_failed_not_misplaced(fake_llm, session):
    from checkpoints.services import branch_rewind

    fake_llm.queue(Reply("hi"))
    ask(session, "hello")
    turn = turn_start(session=session, message="second")
    branch_rewind(branch=current_branch(session), position=2)  # another tab cut it back
    fake_llm.queue(Reply("lost"))
    run_turn(turn.pk)
    turn.refresh_from_db()
    assert turn.status == "failed"
    assert "rewound" in turn.error
    assert history(session) == [("user", "hello"), ("assistant", "hi")]


# --- what the database cannot store, and turns that cannot run --------------------------------

NUL_ARGS = '{"expression": "1+1\\u0000"}'  # a JSON string holding a NUL character


def test_a_nul_in_tool_arguments_content_and_results_is_stored_cleaned(fake_llm, session):
    fake_llm.queue(
        ToolCalls([ToolCall("calculate", NUL_ARGS, id="call_nul\u0000")]),
        Reply("two\u0000 and done"),
    )
    events: list[dict] = []
    turn = ask(session, "add\u0000 these", events)
    assert turn.status == "done", turn.error
    assert turn.reply == "two and done"
    stored = branch_history(current_branch(session))
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[0].content == "add these"
    assert "\x00" not in json.dumps([m.tool_calls for m in stored])
    tool = stored[2]
    assert tool.tool_args == {"expression": "1+1"}
    assert "\x00" not in tool.tool_result
    assert [e["type"] for e in events][-1] == "turn.finished"
    # The session is not blocked: the next turn runs and sends the cleaned history.
    fake_llm.queue(Reply("next"))
    assert ask(session, "again").status == "done"


def test_a_turn_for_a_deleted_session_does_nothing_and_says_why(fake_llm, session, caplog):
    turn = turn_start(session=session, message="gone soon")
    session.delete()
    with caplog.at_level("INFO", logger="agents.turn"):
        assert run_turn(turn.pk) is None
    assert "it is gone" in caplog.text
    assert fake_llm.requests == []


def test_a_redelivered_task_of_a_finished_turn_stores_nothing_twice(fake_llm, session, caplog):
    fake_llm.queue(Reply("once"))
    turn = ask(session, "hello")
    with caplog.at_level("INFO", logger="agents.turn"):
        assert run_turn(turn.pk) is None
    assert "it is done" in caplog.text
    assert history(session) == [("user", "hello"), ("assistant", "once")]
    assert len(fake_llm.requests) == 1


# --- stopping a turn -------------------------------------------------------------------------


def test_a_cancelled_turn_closes_the_model_stream_and_keeps_the_partial_reply_marked_stopped(
    fake_llm, session
):
    words = " ".join(f"word{i}" for i in range(40))
    fake_llm.queue(Reply(words, delay=0.2))  # 8 s if it were not stopped
    turn = turn_start(session=session, message="tell me a long story")
    seen: list[dict] = []
    deltas_after_cancel: list[str] = []

    def on_event(event: dict) -> None:
        seen.append(event)
        if event["type"] != "message.delta":
            return
        if any(e["type"] == "turn.cancelled" for e in seen):
            deltas_after_cancel.append(event["delta"])
        elif sum(e["type"] == "message.delta" for e in seen) == 3:
            turn_cancel(turn=Turn.objects.get(pk=turn.pk))  # as Stop does, from anywhere

    run_hearing(turn, on_event)

    assert turn.status == "cancelled"
    assert turn.finish_reason == "cancelled"
    # The stream was closed: the server saw its client go away before the reply's end.
    until(lambda: fake_llm.abandoned == 1, "the model's stream abandoned")
    # Within about a second of the cancel (the worker looks every 0.5 s, a chunk comes every
    # 0.2 s): a few more deltas at most, far from the 37 that were left.
    assert len(deltas_after_cancel) <= 6
    streamed = "".join(e["delta"] for e in seen if e["type"] == "message.delta")
    assert words.startswith(streamed)
    assert len(streamed) < len(words)
    # What was shown when Stop was pressed is kept, at once (the cancel keeps it): the few
    # pieces the worker sent before it noticed are not part of the reply.
    ended = [e["type"] for e in seen].index("turn.cancelled")
    shown = "".join(e["delta"] for e in seen[:ended] if e["type"] == "message.delta")
    assert streamed.startswith(shown)
    stored = branch_history(current_branch(session))
    assert [(m.role, m.content) for m in stored] == [
        ("user", "tell me a long story"),
        ("assistant", shown),
    ]
    assert stored[-1].metadata["stopped"] is True
    assert stored[-1].metadata["finish_reason"] == "cancelled"
    assert stored[-1].metadata["model"] == "fake-model"  # the worker's metadata, added
    assert turn.reply == shown
    kinds = [e["type"] for e in seen]
    assert kinds.count("turn.cancelled") == 1
    assert "turn.finished" not in kinds
    assert "turn.failed" not in kinds


def test_a_stopped_reply_can_be_regenerated(fake_llm, session):
    fake_llm.queue(Reply("one two three four five six seven eight", delay=0.2))
    turn = turn_start(session=session, message="go")

    deltas: list[str] = []

    def on_event(event: dict) -> None:
        if event["type"] == "message.delta":
            deltas.append(event["delta"])
            if len(deltas) == 2:
                turn_cancel(turn=Turn.objects.get(pk=turn.pk))

    run_hearing(turn, on_event)
    stopped = branch_history(current_branch(session))[-1]
    assert stopped.metadata["stopped"] is True

    again = turn_regenerate(session=session, message_id=stopped.pk)
    assert again.status == "queued"
    assert again.message == "go"
    assert history(session) == [("user", "go")]  # a new branch, before the stopped reply


def test_a_queued_turn_cancelled_before_a_worker_took_it_never_runs(fake_llm, session):
    turn = turn_start(session=session, message="never mind")
    turn_cancel(turn=turn)
    assert run_turn(turn.pk) is None
    turn.refresh_from_db()
    assert turn.status == "cancelled"
    assert turn.attempts == 0
    assert fake_llm.requests == []
    assert history(session) == [("user", "never mind"), ("assistant", "")]  # marked stopped


@pytest.mark.postgres
def test_a_turn_gives_its_pooled_connection_back_while_the_model_answers(fake_llm, session):
    # With 50 turns at once in a worker, turns that kept a connection for their whole stream
    # used up the pool and the others failed. When the model is asked, no connection of this
    # process's pool is out: the turn (on this thread) has given its connection back.
    from django.db import connection

    seen: list[dict] = []

    def answer(body: dict) -> Reply:
        seen.append(connection.pool.get_stats())  # the pool is the process's, shared by threads
        return Reply("pooled")

    fake_llm.queue(answer)
    turn = ask(session, "hello")
    assert turn.status == Turn.Status.DONE
    assert turn.reply == "pooled"
    stats = seen[0]
    assert stats.get("pool_size", 0) >= 1
    assert stats["pool_available"] == stats["pool_size"], stats
