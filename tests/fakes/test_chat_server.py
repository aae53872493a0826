"""The fake chat server, driven by the real `openai` client."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import openai
import pytest

from tests.fakes.chat_server import (
    Drop,
    Error,
    FakeChatServer,
    Garbage,
    Hang,
    Reply,
    StreamError,
    ToolCall,
    ToolCalls,
)

MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "hello"},
]


@pytest.fixture
def server() -> Iterator[FakeChatServer]:
    with FakeChatServer().start() as fake:
        yield fake


def client(server: FakeChatServer, **kwargs) -> openai.OpenAI:
    kwargs.setdefault("max_retries", 0)
    return openai.OpenAI(base_url=server.base_url, api_key="test", **kwargs)


def create(server: FakeChatServer, client_kwargs: dict | None = None, **kwargs):
    kwargs.setdefault("model", "gpt-test")
    kwargs.setdefault("messages", MESSAGES)
    return client(server, **(client_kwargs or {})).chat.completions.create(**kwargs)


def test_non_streamed_reply(server):
    server.queue(Reply("Hi there, friend.", prompt_tokens=3, completion_tokens=4))

    completion = create(server)

    assert completion.object == "chat.completion"
    assert completion.model == "gpt-test"
    choice = completion.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content == "Hi there, friend."
    assert choice.message.tool_calls is None
    assert choice.finish_reason == "stop"
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (3, 4)
    assert completion.usage.total_tokens == 7


def test_default_answer_echoes_last_user_message(server):
    completion = create(server)

    assert completion.choices[0].message.content == "Echo: hello"


def test_streamed_reply_arrives_in_chunks(server):
    text = "The quick brown fox jumps over the lazy dog"
    server.queue(Reply(text, chunk_size=2))

    chunks = list(create(server, stream=True))

    assert {chunk.object for chunk in chunks} == {"chat.completion.chunk"}
    assert {chunk.model for chunk in chunks} == {"gpt-test"}
    assert len({chunk.id for chunk in chunks}) == 1
    assert chunks[0].choices[0].delta.role == "assistant"
    pieces = [
        c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content
    ]
    assert "".join(pieces) == text
    assert pieces[:2] == ["The quick ", "brown fox "]
    assert len(pieces) == 5
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert all(chunk.usage is None for chunk in chunks)


def test_streamed_reply_with_usage(server):
    server.queue(Reply("counted words", prompt_tokens=5, completion_tokens=2))

    chunks = list(create(server, stream=True, stream_options={"include_usage": True}))

    assert chunks[-2].choices[0].finish_reason == "stop"
    last = chunks[-1]
    assert last.choices == []
    assert last.usage is not None
    assert (last.usage.prompt_tokens, last.usage.completion_tokens) == (5, 2)
    assert last.usage.total_tokens == 7


def test_a_reply_cut_at_max_tokens_ends_with_finish_reason_length(server):
    server.queue(Reply("cut sho", finish_reason="length"), Reply("cut", finish_reason="length"))

    chunks = list(create(server, stream=True))

    assert chunks[-1].choices[0].finish_reason == "length"
    assert create(server).choices[0].finish_reason == "length"


def test_streamed_reply_delay(server):
    server.queue(Reply("a b c", delay=0.05))

    started = time.monotonic()
    list(create(server, stream=True))

    assert time.monotonic() - started >= 0.15


def test_non_streamed_tool_calls(server):
    server.queue(
        ToolCalls(
            [
                ToolCall("get_weather", {"city": "Paris", "days": 2}),
                ToolCall("broken", '{"oops": ', id="call_custom"),
            ],
            text="Let me check.",
        )
    )

    completion = create(server)

    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Let me check."
    first, second = choice.message.tool_calls
    assert first.type == "function"
    assert first.id.startswith("call_")
    assert first.function.name == "get_weather"
    assert json.loads(first.function.arguments) == {"city": "Paris", "days": 2}
    assert (second.id, second.function.name) == ("call_custom", "broken")
    assert second.function.arguments == '{"oops": '


def test_streamed_tool_calls(server):
    server.queue(ToolCalls([ToolCall("get_weather", {"city": "Paris"}), ToolCall("noop", {})]))

    chunks = list(create(server, stream=True))

    calls: dict[int, dict] = {}
    for chunk in chunks:
        for delta in chunk.choices[0].delta.tool_calls or []:
            call = calls.setdefault(delta.index, {"id": None, "name": None, "arguments": ""})
            if delta.id:
                call["id"] = delta.id
            if delta.function and delta.function.name:
                call["name"] = delta.function.name
            if delta.function and delta.function.arguments:
                call["arguments"] += delta.function.arguments
    assert [calls[i]["name"] for i in sorted(calls)] == ["get_weather", "noop"]
    assert json.loads(calls[0]["arguments"]) == {"city": "Paris"}
    assert json.loads(calls[1]["arguments"]) == {}
    assert calls[0]["id"].startswith("call_")
    assert calls[0]["id"] != calls[1]["id"]
    deltas = [d for c in chunks for d in c.choices[0].delta.tool_calls or []]
    assert len([d for d in deltas if d.id is None]) >= 3  # arguments arrive over several chunks
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_callable_item_sees_request(server):
    seen = []

    def answer(body):
        seen.append(body)
        return Reply(f"you sent {len(body['messages'])} messages to {body['model']}")

    server.queue(answer, "plain string is a Reply")

    assert create(server).choices[0].message.content == "you sent 2 messages to gpt-test"
    assert create(server).choices[0].message.content == "plain string is a Reply"
    assert seen == [server.requests[0]]


def test_rate_limit_error(server):
    server.queue(Error(429, "slow down"))

    with pytest.raises(openai.RateLimitError) as excinfo:
        create(server)

    assert excinfo.value.status_code == 429
    assert "slow down" in str(excinfo.value)
    assert excinfo.value.code == "rate_limit_exceeded"


def test_an_error_can_carry_a_code_of_its_own(server):
    server.queue(Error(400, "too long", code="context_length_exceeded"))

    with pytest.raises(openai.BadRequestError) as excinfo:
        create(server)

    assert excinfo.value.status_code == 400
    assert excinfo.value.code == "context_length_exceeded"


def test_rate_limit_then_retry_succeeds(server):
    server.queue(Error(429), Reply("second time lucky"))

    started = time.monotonic()
    completion = create(server, client_kwargs={"max_retries": 2})

    assert completion.choices[0].message.content == "second time lucky"
    assert len(server.requests) == 2
    assert server.requests[0] == server.requests[1]
    assert time.monotonic() - started < 1  # retry-after-ms was honoured, no 0.5 s backoff


def test_internal_server_error(server):
    server.queue(Error(500))

    with pytest.raises(openai.InternalServerError) as excinfo:
        create(server)

    assert excinfo.value.status_code == 500
    assert excinfo.value.type == "server_error"


def test_error_while_streaming_is_a_status_error(server):
    server.queue(Error(503, "overloaded"))

    with pytest.raises(openai.InternalServerError, match="overloaded"):
        create(server, stream=True)


def test_hang_times_out(server):
    server.queue(Hang(seconds=3))

    with pytest.raises(openai.APITimeoutError):
        create(server, client_kwargs={"timeout": 0.5})

    assert len(server.requests) == 1


def test_garbage_non_streaming_raises(server):
    server.queue(Garbage())

    # The client parses the body with json.loads and does not wrap the error.
    with pytest.raises((openai.OpenAIError, ValueError)):
        create(server)


def test_garbage_streaming_raises(server):
    server.queue(Garbage())

    with pytest.raises((openai.OpenAIError, ValueError)):
        list(create(server, stream=True))


def test_error_event_mid_stream(server):
    server.queue(Garbage(json.dumps({"error": {"message": "stream broke"}})))

    with pytest.raises(openai.APIError, match="stream broke"):
        list(create(server, stream=True))


@pytest.mark.parametrize("in_chunk", [False, True])
def test_an_explicit_error_event_after_some_text(server, in_chunk):
    server.queue(StreamError("upstream died", "partial answer that never", 2, in_chunk=in_chunk))

    received = []
    with pytest.raises(openai.APIError, match="upstream died") as excinfo:
        received.extend(c.choices[0].delta.content or "" for c in create(server, stream=True))

    assert "".join(received) == "partial answer "
    assert not isinstance(excinfo.value, openai.APIStatusError | openai.APIConnectionError)
    assert excinfo.value.body["type"] == "server_error"


def test_a_stream_error_not_streamed_is_a_500(server):
    server.queue(StreamError("upstream died"))

    with pytest.raises(openai.InternalServerError, match="upstream died"):
        create(server)


def test_an_error_sends_the_headers_it_is_given(server):
    server.queue(Error(429, retry_after_ms=None, headers={"llm_provider-retry-after": "3"}))

    with pytest.raises(openai.RateLimitError) as excinfo:
        create(server)

    headers = excinfo.value.response.headers
    assert headers["llm_provider-retry-after"] == "3"
    assert "retry-after" not in headers


def test_the_times_requests_arrive_are_recorded(server):
    server.queue(Reply("one"), Reply("two"))
    create(server)
    create(server)

    first, second = server.request_times
    assert len(server.requests) == 2
    assert first <= second


def test_drop_while_streaming(server):
    server.queue(Drop("partial answer that never ends", after_chunks=2))

    received = []
    with pytest.raises(openai.APIConnectionError):
        received.extend(c.choices[0].delta.content or "" for c in create(server, stream=True))

    assert "".join(received) == "partial answer "


def test_drop_non_streaming(server):
    server.queue(Drop())

    with pytest.raises(openai.APIConnectionError):
        create(server)


def test_requests_are_recorded(server):
    server.queue(Error(400, "bad"), Reply("ok"))

    with pytest.raises(openai.BadRequestError):
        create(server, temperature=0.2)
    create(server, messages=[{"role": "user", "content": "second"}], stream=True).close()

    assert len(server.requests) == 2
    assert server.requests[0]["temperature"] == 0.2
    assert server.messages(0) == MESSAGES
    assert server.messages() == [{"role": "user", "content": "second"}]
    assert server.requests[1]["stream"] is True

    server.reset()
    assert server.requests == []
    assert create(server).choices[0].message.content == "Echo: hello"


def test_models_and_unknown_paths(server):
    models = client(server).models.list()
    assert [model.id for model in models.data] == ["fake-model"]

    with pytest.raises(urllib.error.HTTPError) as excinfo:
        urllib.request.urlopen(server.base_url + "/nope", timeout=2)  # noqa: S310 - a local http URL the test built
    assert excinfo.value.code == 404
    error = json.loads(excinfo.value.read())["error"]
    assert set(error) >= {"message", "type", "code"}
    assert server.requests == []


def test_client_disconnect_does_not_kill_server(server):
    server.queue(Reply("one two three four five six", delay=0.05))

    stream = create(server, stream=True)
    next(iter(stream))
    stream.close()

    assert create(server).choices[0].message.content == "Echo: hello"


# --- quirks of real servers ------------------------------------------------------------------


def raw_stream(server: FakeChatServer) -> list[str]:
    """The `data:` payloads of a streamed answer, as sent."""
    body = json.dumps({"model": "m", "messages": MESSAGES, "stream": True}).encode()
    request = urllib.request.Request(  # noqa: S310 - a local http URL the test built
        server.base_url + "/chat/completions",
        data=body,
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310 - a local http URL the test built
        text = response.read().decode()
    return [line.removeprefix("data: ") for line in text.splitlines() if line.startswith("data: ")]


def test_a_stream_can_end_without_done(server):
    server.queue(Reply("no done here", done=False))
    events = raw_stream(server)
    assert "[DONE]" not in events
    assert json.loads(events[-1])["choices"][0]["finish_reason"] == "stop"


def test_a_stream_can_end_cleanly_without_a_finish_chunk(server):
    server.queue(Reply("cut mid reply", finish=False, done=False))
    chunks = list(create(server, stream=True))  # no error: the body ended properly
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "cut mid reply"
    assert all(c.choices[0].finish_reason is None for c in chunks)


def test_a_role_only_first_chunk_and_reasoning_deltas(server):
    server.queue(Reply("The answer.", reasoning="Let me think.", role_only=True))
    chunks = list(create(server, stream=True))
    first = chunks[0].choices[0].delta
    assert first.role == "assistant"
    assert first.content is None
    reasoning = "".join(
        getattr(c.choices[0].delta, "reasoning_content", None) or "" for c in chunks
    )
    assert reasoning == "Let me think."
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "The answer."


def test_tool_arguments_can_arrive_in_many_small_chunks(server):
    server.queue(ToolCalls([ToolCall("f", {"expression": "1+2+3"})], arg_chunk=3))
    chunks = list(create(server, stream=True))
    parts = [
        d.function.arguments
        for c in chunks
        for d in c.choices[0].delta.tool_calls or []
        if d.function and d.function.arguments
    ]
    assert len(parts) == len('{"expression": "1+2+3"}') // 3 + 1
    assert json.loads("".join(parts)) == {"expression": "1+2+3"}


def test_a_usage_only_final_chunk_when_usage_is_asked_for(server):
    server.queue(Reply("hi", prompt_tokens=5, completion_tokens=2))
    chunks = list(create(server, stream=True, stream_options={"include_usage": True}))
    assert chunks[-1].choices == []
    assert chunks[-1].usage.total_tokens == 7


def test_an_error_can_carry_its_own_code(server):
    server.queue(Error(400, "too long", code="context_length_exceeded"))
    with pytest.raises(openai.BadRequestError) as excinfo:
        create(server)
    assert excinfo.value.code == "context_length_exceeded"
