"""A streamed chat completion of plain JSON skips openai's request transform
(agents.plain_body): the request it sends is the one openai's own `create` sends (the same
JSON, its keys in the caller's order, and the same headers); anything else still goes through
openai's."""

from __future__ import annotations

import contextlib
import datetime
import json

import httpx2
import openai
import pytest
from openai.resources.chat.completions import completions as openai_completions

from agents.retry import Client

CHUNK = (
    'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m",'
    '"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}\n\n'
    "data: [DONE]\n\n"
)

PARAMS = {
    "model": "gpt-test",
    "messages": [
        {"role": "system", "content": "Be brief. ünïcødé ✓"},
        {"role": "user", "content": "What is in the file?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "hello\nworld"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "and this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ],
        },
    ],
    "stream": True,
    "stream_options": {"include_usage": True},
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Read a file.",
                "parameters": {
                    "type": "object",
                    "properties": {"path": {"type": "string"}},
                    "required": ["path"],
                },
            },
        }
    ],
    "tool_choice": "auto",
    "temperature": 0.2,
    "max_tokens": None,
    "extra_headers": {"X-Gateway": "one"},
    "extra_body": {"provider_option": 1},
}


def _sent(client_class, params):
    requests: list[httpx2.Request] = []

    def answer(request: httpx2.Request) -> httpx2.Response:
        requests.append(request)
        return httpx2.Response(
            200, headers={"content-type": "text/event-stream"}, content=CHUNK.encode()
        )

    http = httpx2.Client(transport=httpx2.MockTransport(answer))
    client = client_class(api_key="sk-test", base_url="http://model.test/v1", http_client=http)
    chunks = list(client.chat.completions.create(**params))
    assert [c.choices[0].delta.content for c in chunks if c.choices] == ["hi"]
    [request] = requests
    # openai's user agent names the client's class ("OpenAI/Python", "Client/Python").
    headers = {k: v for k, v in request.headers.items() if k.lower() != "user-agent"}
    return request.method, str(request.url), headers, json.loads(request.content)


@pytest.fixture
def walked(monkeypatch) -> list[int]:
    """One entry per run of openai's request transform (which still runs as it did)."""
    runs: list[int] = []
    transform = openai_completions.maybe_transform
    monkeypatch.setattr(
        openai_completions,
        "maybe_transform",
        lambda *a, **k: runs.append(1) or transform(*a, **k),
    )
    return runs


def test_a_plain_streamed_request_is_sent_exactly_as_openai_sends_it(walked):
    theirs = _sent(openai.OpenAI, dict(PARAMS))
    walked.clear()
    ours = _sent(Client, dict(PARAMS))
    assert ours == theirs
    assert walked == []  # the transform was not run


@pytest.mark.parametrize(
    "changed",
    [
        {"metadata": {"when": datetime.date(2026, 1, 2)}},  # not plain JSON
        {"stream_options": ({"include_usage": True},)},  # a tuple
    ],
)
def test_anything_else_goes_through_openais_own_create(walked, changed):
    params = {**PARAMS, **changed}
    with contextlib.suppress(TypeError):  # openai's own refused it, as it would without us
        _sent(Client, params)
    assert walked == [1]


def test_an_unknown_argument_is_refused_as_openai_refuses_it():
    with pytest.raises(TypeError):
        _sent(Client, {**PARAMS, "not_a_parameter": 1})
