"""How a turn ends, against a real local Chat Completions server reproducing real servers'
quirks: finish reasons, replies cut off or empty, tool calls that did not run, the tool-call
limit, the history's alternating roles, and error texts."""

from __future__ import annotations

import pytest
from agno.models.message import Message as AgnoMessage

from agents.history import alternate
from checkpoints.models import Checkpoint
from sessions_app.selectors import branch_history, current_branch
from tests.agents.test_turns import history, sent
from tests.conftest import ask
from tests.fakes.chat_server import Drop, Error, Reply, StreamError, ToolCall, ToolCalls
from tests.procs import free_port

pytestmark = pytest.mark.django_db(transaction=True)


def stored(session):
    return branch_history(current_branch(session))


def tool_events(events: list[dict]) -> list[tuple[str, str, bool | None]]:
    return [
        (e["type"], e["tool"], e.get("error"))
        for e in events
        if e["type"] in ("tool.started", "tool.finished")
    ]


# --- stream quirks that still make a plain reply -----------------------------------------------


def test_a_role_only_first_chunk_reasoning_and_a_usage_only_last_chunk_make_a_plain_reply(
    fake_llm, session
):
    fake_llm.queue(Reply("Four.", reasoning="Two and two...", role_only=True, prompt_tokens=9))
    turn = ask(session, "2+2?")
    assert turn.status == "done"
    assert turn.reply == "Four."
    assert turn.finish_reason == "stop"
    assert fake_llm.requests[-1]["stream_options"] == {"include_usage": True}
    assert turn.metadata["usage"]["input_tokens"] == 9  # from the usage-only last chunk
    assert stored(session)[-1].content == "Four."


def test_a_stream_without_done_but_with_its_finish_is_a_normal_reply(fake_llm, session):
    fake_llm.queue(Reply("All here.", done=False))
    turn = ask(session, "hi")
    assert turn.status == "done"
    assert turn.finish_reason == "stop"
    assert stored(session)[-1].metadata["finish_reason"] == "stop"


def test_two_parallel_tool_calls_with_arguments_in_many_chunks_both_run(fake_llm, session):
    fake_llm.queue(
        ToolCalls(
            [
                ToolCall("calculate", {"expression": "6*7"}, id="call_a"),
                ToolCall("calculate", {"expression": "100-1"}, id="call_b"),
            ],
            arg_chunk=2,
        ),
        Reply("42 and 99."),
    )
    events: list[dict] = []
    turn = ask(session, "two sums", events)
    assert turn.status == "done"
    assert turn.tools_used == ["calculate", "calculate"]
    results = [(m.tool_call_id, m.tool_result) for m in stored(session) if m.role == "tool"]
    assert results == [("call_a", "42"), ("call_b", "99")]
    assert tool_events(events) == [
        ("tool.started", "calculate", None),
        ("tool.finished", "calculate", False),
        ("tool.started", "calculate", None),
        ("tool.finished", "calculate", False),
    ]


# --- cut off, interrupted, empty ---------------------------------------------------------------


@pytest.mark.parametrize(
    "item",
    [Reply("The first half", finish=False, done=False), Drop("The first half of it", 3)],
    ids=["ended-without-finish", "connection-dropped"],
)
def test_a_reply_whose_stream_ends_early_is_kept_as_interrupted(fake_llm, session, item):
    fake_llm.queue(item)
    events: list[dict] = []
    turn = ask(session, "tell me", events)
    assert turn.status == "done"
    assert turn.finish_reason == "interrupted"
    assert turn.reply.strip() == "The first half"
    last = stored(session)[-1]
    assert (last.role, last.content) == ("assistant", turn.reply)
    assert last.metadata["finish_reason"] == "interrupted"
    assert [e["type"] for e in events][-1] == "turn.finished"


@pytest.mark.parametrize("in_chunk", [False, True], ids=["litellm-event", "openrouter-chunk"])
def test_an_error_event_in_the_middle_of_a_stream_fails_the_turn_with_its_text(
    fake_llm, session, in_chunk
):
    """A gateway (LiteLLM, OpenRouter) whose upstream fails mid-stream says so in an explicit
    error event after some text: the answer is not a reply cut short but a failure. The turn
    fails with the server's message; like any failed run it stores nothing of the answer."""
    fake_llm.queue(
        StreamError("upstream overloaded, try later", "The first half of it", 3, in_chunk=in_chunk)
    )
    events: list[dict] = []
    turn = ask(session, "tell me", events)
    assert turn.status == "failed"
    assert turn.finish_reason is None
    assert turn.reply == ""
    assert turn.error == (
        "The model did not answer: the model server sent an error in the middle of its answer: "
        "upstream overloaded, try later"
    )
    assert history(session) == [("user", "tell me")]
    deltas = "".join(e["delta"] for e in events if e["type"] == "message.delta")
    assert deltas.strip() == "The first half"  # what had been streamed was shown as it came
    assert [e["type"] for e in events][-1] == "turn.failed"
    assert len(fake_llm.requests) == 1  # an answer that failed half-way is not asked again


def test_an_error_event_before_any_text_fails_the_turn_with_its_text(fake_llm, session):
    fake_llm.queue(StreamError("no capacity", after_chunks=0, type="overloaded", code=529))
    turn = ask(session, "tell me")
    assert turn.status == "failed"
    assert turn.error == (
        "The model did not answer: the model server sent an error instead of an answer: no capacity"
    )
    assert history(session) == [("user", "tell me")]


def test_a_stream_error_names_neither_the_servers_address_nor_the_key_and_is_bounded(
    fake_llm, session, settings
):
    settings.OPENAI_API_KEY = "sk-secret-test-key"
    leak = f"upstream {fake_llm.base_url} refused key sk-secret-test-key\x00 " + "x" * 3_000
    fake_llm.queue(StreamError(leak, "Some text", 2))
    turn = ask(session, "tell me")
    assert turn.status == "failed"
    assert "127.0.0.1" not in turn.error
    assert "sk-secret-test-key" not in turn.error
    assert "[the model server]" in turn.error
    assert "[the API key]" in turn.error
    assert "\x00" not in turn.error
    assert len(turn.error) < 1_200


def test_an_interrupted_reply_can_be_continued(fake_llm, session):
    fake_llm.queue(Reply("The first half", finish=False), Reply("and the second half."))
    ask(session, "tell me")
    turn = ask(session, "Continue.")
    assert turn.status == "done"
    assert turn.finish_reason == "stop"
    assert sent(fake_llm) == [
        ("user", "tell me"),
        ("assistant", "The first half"),
        ("user", "Continue."),
    ]


def test_a_stream_that_ends_before_any_text_fails_the_turn(fake_llm, session):
    fake_llm.queue(Reply("", finish=False, done=False))
    turn = ask(session, "hello?")
    assert turn.status == "failed"
    assert turn.finish_reason is None
    assert "the model's answer ended before it was finished" in turn.error
    assert history(session) == [("user", "hello?")]


def test_tool_calls_whose_stream_ends_without_a_finish_are_not_run(fake_llm, session):
    fake_llm.queue(ToolCalls([ToolCall("calculate", {"expression": "1+1"})], finish=False))
    turn = ask(session, "1+1?")
    assert turn.status == "failed"
    assert "tool calls may be incomplete" in turn.error
    assert len(fake_llm.requests) == 1
    assert history(session) == [("user", "1+1?")]


@pytest.mark.parametrize("text", ["", "  \n"])
def test_an_empty_reply_fails_the_turn_and_keeps_the_users_message(fake_llm, session, text):
    fake_llm.queue(Reply(text))
    events: list[dict] = []
    turn = ask(session, "anyone?", events)
    assert turn.status == "failed"
    assert turn.error == "The model sent an empty reply."
    assert history(session) == [("user", "anyone?")]
    assert [e["type"] for e in events][-1] == "turn.failed"


def test_a_reply_cut_at_max_tokens_has_finish_reason_length(fake_llm, session):
    fake_llm.queue(Reply("The answer is", finish_reason="length"))
    turn = ask(session, "hi")
    assert turn.finish_reason == "length"


# --- tool calls that did not run ---------------------------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        ToolCall("calculate", '{"expression": "1+', id="call_x"),
        ToolCall("no_such_tool", {}, id="call_x"),
        ToolCall("get_checkpoint_info_tool", {"checkpoint_id": "abc"}, id="call_x"),
    ],
    ids=["invalid-json", "unknown-tool", "tool-raised"],
)
def test_a_tool_call_that_did_not_run_is_flagged_reported_and_not_checkpointed(
    fake_llm, session, call
):
    fake_llm.queue(ToolCalls([call]), Reply("That did not work."))
    events: list[dict] = []
    turn = ask(session, "do it", events)
    assert turn.status == "done"
    assert turn.reply == "That did not work."
    (tool,) = [m for m in stored(session) if m.role == "tool"]
    assert tool.metadata == {"error": True}
    assert tool.tool_call_id == "call_x"
    assert turn.tools_used == []
    assert turn.checkpoint is None
    assert not Checkpoint.objects.exists()
    assert tool_events(events) == [
        ("tool.started", call.name, None),
        ("tool.finished", call.name, True),
    ]
    assert [e["call_id"] for e in events if e["type"].startswith("tool.")] == ["call_x"] * 2


def test_a_tool_that_ran_next_to_one_that_did_not_is_the_only_one_used(fake_llm, session):
    fake_llm.queue(
        ToolCalls(
            [
                ToolCall("no_such_tool", {}),
                ToolCall("write_file", {"path": "a.md", "content": "x"}),
            ]
        ),
        Reply("Written."),
    )
    turn = ask(session, "go")
    assert turn.tools_used == ["write_file"]
    assert turn.checkpoint is not None
    assert turn.checkpoint.checkpoint_name == "after-write_file"


# --- the tool-call limit -----------------------------------------------------------------------


def loop(n: int, per_request: int = 1) -> list[ToolCalls]:
    return [
        ToolCalls([ToolCall("calculate", {"expression": "1+1"}) for _ in range(per_request)])
        for _ in range(n)
    ]


def test_a_model_that_keeps_calling_tools_is_stopped_at_the_limit(fake_llm, session, settings):
    settings.AGENT_MAX_TOOL_CALLS = 3
    fake_llm.queue(*loop(40))
    events: list[dict] = []
    turn = ask(session, "loop forever", events)
    assert turn.status == "done"
    assert turn.finish_reason == "tool_limit"
    assert len(fake_llm.requests) <= 3 + 1
    assert turn.tools_used == ["calculate"] * 3
    assert turn.reply == "Stopped after 3 tool calls (the limit per turn)."
    assert stored(session)[-1].metadata["finish_reason"] == "tool_limit"
    assert [e["type"] for e in events].count("tool.started") == 3
    assert [e["type"] for e in events][-1] == "turn.finished"


def test_a_batch_of_calls_crossing_the_limit_runs_only_up_to_it(fake_llm, session, settings):
    settings.AGENT_MAX_TOOL_CALLS = 3
    fake_llm.queue(*loop(10, per_request=2))
    events: list[dict] = []
    turn = ask(session, "loop in pairs", events)
    assert turn.finish_reason == "tool_limit"
    assert len(fake_llm.requests) == 2
    assert turn.tools_used == ["calculate"] * 3
    flags = [bool(m.metadata.get("error")) for m in stored(session) if m.role == "tool"]
    assert flags == [False, False, False, True]
    assert tool_events(events)[-2:] == [
        ("tool.started", "calculate", None),
        ("tool.finished", "calculate", True),
    ]


def test_a_limit_of_0_runs_no_tool(fake_llm, session, settings):
    settings.AGENT_MAX_TOOL_CALLS = 0
    fake_llm.queue(*loop(5))
    turn = ask(session, "try a tool")
    assert turn.finish_reason == "tool_limit"
    assert len(fake_llm.requests) == 1
    assert turn.tools_used == []
    assert turn.reply == "Stopped after 0 tool calls (the limit per turn)."


def test_the_limit_is_20_by_default(settings):
    from agents.model import max_tool_calls

    assert settings.AGENT_MAX_TOOL_CALLS == 20
    assert max_tool_calls() == 20


# --- what the model is sent ------------------------------------------------------------------


def test_consecutive_user_messages_are_joined():
    joined = alternate(
        [
            AgnoMessage(role="user", content="one"),
            AgnoMessage(role="user", content="two"),
            AgnoMessage(role="assistant", content="ok"),
            AgnoMessage(role="user", content="three"),
            AgnoMessage(role="user", content="four"),
            AgnoMessage(role="user", content="five"),
        ]
    )
    assert [(m.role, m.content) for m in joined] == [
        ("user", "one\n\ntwo"),
        ("assistant", "ok"),
        ("user", "three\n\nfour\n\nfive"),
    ]


def test_after_two_failed_turns_the_model_gets_one_user_message(fake_llm, session, settings):
    settings.AGENT_MAX_RETRIES = 0
    fake_llm.queue(Error(500), Error(500), Reply("finally"))
    ask(session, "one")
    ask(session, "two")
    assert ask(session, "three").status == "done"
    assert sent(fake_llm) == [("user", "one\n\ntwo\n\nthree")]
    # What is stored is what the user wrote, message by message.
    assert [m.content for m in stored(session)] == ["one", "two", "three", "finally"]


# --- error texts -------------------------------------------------------------------------------


def test_a_429_with_retry_after_is_retried_and_the_turn_succeeds(fake_llm, session):
    fake_llm.queue(Error(429, retry_after_ms=50), Reply("after waiting"))
    turn = ask(session, "hi")
    assert turn.status == "done"
    assert turn.reply == "after waiting"
    assert len(fake_llm.requests) == 2


def test_the_error_counts_the_attempts_really_made(fake_llm, session, settings):
    settings.AGENT_MAX_RETRIES = 1
    fake_llm.queue(Error(429), Error(429))
    turn = ask(session, "hi")
    assert len(fake_llm.requests) == 2
    assert "HTTP 429 after 2 attempts" in turn.error
    assert "retries" not in turn.error


def test_an_error_that_is_not_retried_says_no_attempt_count(fake_llm, session):
    fake_llm.queue(Error(401, "bad key"))
    turn = ask(session, "hi")
    assert len(fake_llm.requests) == 1
    assert "attempt" not in turn.error


def test_context_length_exceeded_reads_plainly(fake_llm, session):
    """Refused twice as too long (the request is fitted again once, see test_context.py)."""
    overflow = Error(
        400, "This model's maximum context length is 8 tokens.", code="context_length_exceeded"
    )
    fake_llm.queue(overflow, overflow)
    turn = ask(session, "hi")
    assert turn.status == "failed"
    assert len(fake_llm.requests) == 2
    assert turn.error.startswith(
        "The model did not answer: the model server answered HTTP 400: "
        "This model's maximum context length is 8 tokens. (the request was longer than the "
        "model's window even after fitting it: set AGENT_CONTEXT_TOKENS"
    )


def test_a_connection_failure_names_neither_the_servers_address_nor_the_key(
    fake_llm, session, settings, caplog
):
    port = free_port()
    settings.OPENAI_BASE_URL = f"http://127.0.0.1:{port}/v1"
    settings.OPENAI_API_KEY = "sk-secret-test-key"
    settings.AGENT_MAX_RETRIES = 1
    with caplog.at_level("WARNING", logger="agents.model"):
        turn = ask(session, "hi")
    assert turn.status == "failed"
    assert turn.error == (
        "The model did not answer: the connection to the model server failed after 2 attempts"
    )
    assert "127.0.0.1" not in turn.error
    assert str(port) not in turn.error
    assert "sk-secret-test-key" not in turn.error
    assert f"127.0.0.1:{port}" in caplog.text  # the operator finds it in the log
