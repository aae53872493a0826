"""Turns through a real gateway: LiteLLM's proxy between the app and the fake model server
(conftest.py). They run in the PostgreSQL/Redis phase of `make test`, as CI runs a deployment."""

from __future__ import annotations

import openai
import pytest

from agents.demo_model import SUMMARY_MARKER
from sessions_app.selectors import branch_history, current_branch
from tests.conftest import ask, grow
from tests.fakes.chat_server import (
    Error,
    Reply,
    StreamError,
    ToolCall,
    ToolCalls,
    count_tokens,
)

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

OVERFLOW_MESSAGE = (
    "This model's maximum context length is 128000 tokens. However, your messages resulted in "
    "130512 tokens. Please reduce the length of the messages."
)


def history(session) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in branch_history(current_branch(session))]


def client(gateway, **kwargs) -> openai.OpenAI:
    kwargs.setdefault("max_retries", 0)
    return openai.OpenAI(base_url=gateway.base_url, api_key=gateway.key, timeout=20, **kwargs)


def test_the_gateway_started_offline_and_serves_its_model(gateway):
    models = [m.id for m in client(gateway).models.list().data]
    assert models == [gateway.model]
    assert gateway.startup_seconds < 60


def test_a_plain_turn_is_streamed_through_the_gateway_and_stored_with_its_usage(
    via_gateway, upstream, session
):
    upstream.queue(Reply("Hello from behind the gateway.", prompt_tokens=21, completion_tokens=6))
    events: list[dict] = []
    turn = ask(session, "hi", events)
    assert turn.status == "done", turn.error
    assert turn.reply == "Hello from behind the gateway."
    assert history(session) == [("user", "hi"), ("assistant", "Hello from behind the gateway.")]
    reply = branch_history(current_branch(session))[-1]
    assert reply.metadata["input_tokens"] == 21
    assert reply.metadata["output_tokens"] == 6
    # The upstream got the gateway's routing of our request: its own model name, streamed.
    (body,) = upstream.requests
    assert body["model"] == "fake-model"
    assert body["stream"] is True
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    deltas = [e["delta"] for e in events if e["type"] == "message.delta"]
    assert len(deltas) > 1
    assert "".join(deltas) == "Hello from behind the gateway."


def test_a_tool_turn_goes_through_the_gateway_both_ways(via_gateway, upstream, session):
    upstream.queue(
        ToolCalls([ToolCall("calculate", {"expression": "(2+3)*4"}, id="call_gw1")]),
        Reply("It is 20."),
    )
    turn = ask(session, "what is (2+3)*4?")
    assert turn.status == "done", turn.error
    assert turn.reply == "It is 20."
    assert turn.tools_used == ["calculate"]
    stored = branch_history(current_branch(session))
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    result = stored[2]
    assert (result.tool_name, result.tool_args, result.tool_result) == (
        "calculate",
        {"expression": "(2+3)*4"},
        "20",
    )
    assert len(upstream.requests) == 2
    # The first request offered the tool; the second carried the call and its result, by id.
    assert "calculate" in [t["function"]["name"] for t in upstream.requests[0]["tools"]]
    second = upstream.messages(1)
    assert second[-2]["role"] == "assistant"
    assert second[-2]["tool_calls"][0]["id"] == "call_gw1"
    assert second[-1]["role"] == "tool"
    assert second[-1]["tool_call_id"] == "call_gw1"
    assert second[-1]["content"] == "20"


def test_a_429_passes_through_the_gateway_unretried_and_reshaped(gateway, upstream):
    """The gateway is configured with num_retries: 0, so it hands the 429 to its client. It
    renames the upstream's headers (`retry-after` becomes `llm_provider-retry-after`, which the
    openai client alone does not read: agents.retry does) and rewrites the error's type and
    code."""
    upstream.queue(Error(429, "slow down", retry_after_ms=1000))
    with pytest.raises(openai.RateLimitError) as excinfo:
        client(gateway).chat.completions.create(
            model=gateway.model, messages=[{"role": "user", "content": "hi"}]
        )
    error = excinfo.value
    assert error.status_code == 429
    assert len(upstream.requests) == 1  # LiteLLM did not retry it
    headers = error.response.headers
    assert "retry-after" not in headers
    assert "retry-after-ms" not in headers
    assert headers["llm_provider-retry-after"] == "1"
    assert headers["llm_provider-retry-after-ms"] == "1000"
    body = error.response.json()["error"]
    assert (body["type"], body["code"]) == ("throttling_error", "429")
    assert "slow down" in body["message"]


def test_a_429_is_retried_by_our_client_and_the_turn_succeeds(via_gateway, upstream, session):
    upstream.queue(Error(429, "slow down", retry_after_ms=200), Reply("second time lucky"))
    turn = ask(session, "hi")
    assert turn.status == "done", turn.error
    assert turn.reply == "second time lucky"
    assert history(session) == [("user", "hi"), ("assistant", "second time lucky")]
    assert len(upstream.requests) == 2  # the 429, then our client's retry


def retry_waits(caplog) -> list[float]:
    """The waits before a retry that our client took from the server's headers (agents.retry)."""
    return [r.args[0] for r in caplog.records if r.msg.startswith("the model server asks")]


def test_a_429_retry_after_renamed_by_the_gateway_is_waited_for(
    via_gateway, upstream, session, caplog
):
    upstream.queue(Error(429, "slow down", retry_after_ms=1500), Reply("after the wait"))
    with caplog.at_level("INFO", logger="agents.retry"):
        turn = ask(session, "hi")
    assert turn.status == "done", turn.error
    assert turn.reply == "after the wait"
    assert len(upstream.requests) == 2
    # The wait used is the header's (llm_provider-retry-after-ms: 1500), not the client's own
    # backoff (at most 0.5 s before a first retry), and it was really waited.
    assert retry_waits(caplog) == [pytest.approx(1.5)]
    first, second = upstream.request_times
    assert second - first >= 1.5


def test_a_used_up_limit_behind_the_gateway_is_waited_out(via_gateway, upstream, session, caplog):
    """OpenAI's own way: the limit used up and when it resets. The gateway passes on the
    remaining count under its own name and the reset only renamed; the wait is the reset's."""
    headers = {
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "1.2s",
        "x-ratelimit-remaining-tokens": "5000",
        "x-ratelimit-reset-tokens": "30s",
    }
    upstream.queue(Error(429, "slow down", retry_after_ms=None, headers=headers), Reply("reset"))
    with caplog.at_level("INFO", logger="agents.retry"):
        turn = ask(session, "hi")
    assert turn.status == "done", turn.error
    assert retry_waits(caplog) == [pytest.approx(1.2)]
    first, second = upstream.request_times
    assert second - first >= 1.2


def test_a_429_asking_for_longer_than_the_timeout_fails_the_turn_at_once(
    via_gateway, upstream, session
):
    upstream.queue(Error(429, "slow down", retry_after_ms=90_000), Reply("never sent"))
    turn = ask(session, "hi")
    assert turn.status == "failed"
    assert len(upstream.requests) == 1  # AGENT_TIMEOUT is 20 s: not worth a retry
    assert "HTTP 429" in turn.error
    assert "it asks to wait 90 s" in turn.error
    assert history(session) == [("user", "hi")]


def test_a_429_fails_the_turn_when_our_client_may_not_retry(
    via_gateway, upstream, session, settings
):
    """The other half of the proof that our client, not the gateway, retried the 429 above."""
    settings.AGENT_MAX_RETRIES = 0
    upstream.queue(Error(429, "slow down", retry_after_ms=200), Reply("never sent"))
    turn = ask(session, "hi")
    assert turn.status == "failed"
    assert "429" in turn.error
    assert len(upstream.requests) == 1
    assert history(session) == [("user", "hi")]


def _ask_a_long_history(gateway, *, stream: bool) -> None:
    """One request through the gateway; a streamed answer is read to its end."""
    response = client(gateway).chat.completions.create(
        model=gateway.model,
        messages=[{"role": "user", "content": "a very long history"}],
        stream=stream,
    )
    if stream:
        list(response)


def test_a_context_overflow_comes_back_through_the_gateway_as_a_400_without_its_code(
    gateway, upstream
):
    """What the gateway returns for an upstream 400 `context_length_exceeded`, streamed or not:
    the shape our code has to recognise as a context overflow behind a gateway. LiteLLM keeps the
    status and the type but replaces the code with "400": only the message tells, prefixed with
    LiteLLM's own exception name and followed by its notes."""
    for stream in (False, True):
        upstream.reset()
        upstream.queue(Error(400, OVERFLOW_MESSAGE, code="context_length_exceeded"))
        with pytest.raises(openai.BadRequestError) as excinfo:
            _ask_a_long_history(gateway, stream=stream)
        error = excinfo.value
        assert error.status_code == 400
        assert len(upstream.requests) == 1  # not retried
        body = error.response.json()
        assert set(body) == {"error"}
        assert set(body["error"]) == {"message", "type", "param", "code"}
        assert (body["error"]["type"], body["error"]["param"], body["error"]["code"]) == (
            "invalid_request_error",
            None,
            "400",
        )
        assert (error.code, error.type) == ("400", "invalid_request_error")
        message = body["error"]["message"]
        assert message.startswith(
            "litellm.ContextWindowExceededError: litellm.BadRequestError: "
            "ContextWindowExceededError: OpenAIException - " + OVERFLOW_MESSAGE
        )
        assert "context_length_exceeded" not in error.response.text


def test_a_context_overflow_behind_the_gateway_is_handled(via_gateway, upstream, session, settings):
    """The upstream's window is smaller than AGENT_CONTEXT_TOKENS says. Its refusal reaches us
    through the gateway without its code, but its message names the window: the turn is fitted
    to that window (older messages summarised) and sent again, and succeeds."""
    settings.AGENT_CONTEXT_TOKENS = 8_000
    settings.AGENT_MAX_OUTPUT_TOKENS = 1_000
    upstream.context_window = 4_500

    def answer(body: dict) -> Reply:
        if SUMMARY_MARKER in (body["messages"][0]["content"] or ""):
            return Reply("What was said so far, in short.")
        return Reply("Fitted.")

    upstream.default = answer
    grow(current_branch(session), 3000, 90)
    turn = ask(session, "hello")
    assert turn.status == "done", turn.error
    assert turn.reply == "Fitted."
    refused = [r for r in upstream.requests if count_tokens(r) + r["max_tokens"] > 4_500]
    assert len(refused) == 1
    assert all(count_tokens(r) + r["max_tokens"] <= 4_500 for r in upstream.requests[1:])
    assert "What was said so far, in short." in upstream.messages()[0]["content"]
    assert current_branch(session).message_count == 3002


def test_an_error_in_the_middle_of_a_stream_through_the_gateway_fails_the_turn_with_its_text(
    via_gateway, upstream, session
):
    """The upstream fails half-way through its answer with an explicit error event; LiteLLM
    passes it on as an error event of its own, with the upstream's message in its text."""
    upstream.queue(StreamError("upstream overloaded, try later", "The first half of it", 3))
    events: list[dict] = []
    turn = ask(session, "tell me", events)
    assert turn.status == "failed"
    assert turn.finish_reason is None
    assert turn.reply == ""
    assert turn.error.startswith(
        "The model did not answer: the model server sent an error in the middle of its answer: "
    )
    assert "upstream overloaded, try later" in turn.error
    assert via_gateway.url.removeprefix("http://") not in turn.error
    assert via_gateway.key not in turn.error
    assert history(session) == [("user", "tell me")]
    deltas = "".join(e["delta"] for e in events if e["type"] == "message.delta")
    assert deltas.strip() == "The first half"
    assert [e["type"] for e in events][-1] == "turn.failed"
    assert len(upstream.requests) == 1
