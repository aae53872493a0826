"""agents.model, the model adapter, driven directly against the local Chat Completions server:
the async stream (agno's `arun`) is bounded like the one turns use."""

from __future__ import annotations

import asyncio

from agno.models.message import Message

from agents.model import ChatModel, build_model, reply_cut_off
from tests.fakes.chat_server import Reply


def test_the_async_stream_stops_at_the_reply_bound(fake_llm, settings):
    settings.AGENT_MAX_REPLY_CHARS = 50
    fake_llm.queue(Reply("word " * 1000, chunk_size=3))
    model = build_model()
    assert isinstance(model, ChatModel)

    async def stream() -> str:
        text = ""
        deltas = model.ainvoke_stream(
            messages=[Message(role="user", content="hi")],
            assistant_message=Message(role="assistant"),
        )
        async for delta in deltas:
            text += delta.content or ""
        return text

    assert asyncio.run(stream()) == ("word " * 1000)[:50]
    assert reply_cut_off(model)
    assert model.cut_off == "chars"
    assert fake_llm.requests[-1]["max_tokens"] == settings.AGENT_MAX_OUTPUT_TOKENS


def test_turns_share_one_openai_client_per_configuration(fake_llm, settings):
    # Building an openai client (httpx, TLS context, pool) was most of a turn's own cost.
    first, second = build_model(), build_model()
    assert first is not second
    assert first.get_client() is second.get_client()
    settings.OPENAI_BASE_URL = fake_llm.base_url.replace("127.0.0.1", "localhost")
    other = build_model()
    assert other.get_client() is not first.get_client()
    assert str(other.get_client().base_url).startswith("http://localhost:")
    # The shared client answers as a fresh one would.
    fake_llm.queue(Reply("shared"))
    reply = first.response(messages=[Message(role="user", content="hi")])
    assert reply.content == "shared"
