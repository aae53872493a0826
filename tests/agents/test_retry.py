"""agents.retry: how long the model server asks us to wait, under every name servers and gateways
give it, and a turn's retries waiting exactly that, against the local Chat Completions server."""

from __future__ import annotations

import asyncio
import email.utils

import pytest
from agno.models.message import Message

from agents.model import ChatModel, build_model
from agents.retry import RETRY_AFTER_MAX, Client, duration, retry_after
from tests.agents.test_turns import history
from tests.conftest import ask
from tests.fakes.chat_server import Error, Reply

NOW = 1_800_000_000.0


def http_date(seconds_from_now: float) -> str:
    return email.utils.formatdate(NOW + seconds_from_now, usegmt=True)


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after-ms": "250", "retry-after": "1"}, 0.25),  # milliseconds first
        ({"retry-after": "2"}, 2.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after": http_date(30)}, 30.0),
        ({"retry-after": http_date(-30)}, 0.0),  # a date that passed: at once, never negative
        ({"retry-after": "-3"}, 0.0),
        ({"llm_provider-retry-after": "7"}, 7.0),  # LiteLLM forwards the upstream's, renamed
        ({"llm_provider-retry-after-ms": "1500", "llm_provider-retry-after": "2"}, 1.5),
        ({"retry-after": "1", "llm_provider-retry-after": "4"}, 4.0),  # gateway and upstream
        (
            {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "6m0s"},
            360.0,
        ),
        (
            {
                "x-ratelimit-remaining-requests": "0",
                "x-ratelimit-reset-requests": "1.5s",
                "x-ratelimit-remaining-tokens": "0",
                "x-ratelimit-reset-tokens": "20ms",
            },
            1.5,
        ),
        (
            {
                "llm_provider-x-ratelimit-remaining-tokens": "0",
                "llm_provider-x-ratelimit-reset-tokens": "1m30s",
            },
            90.0,
        ),
        # A limit that is not used up says nothing about when to retry.
        ({"x-ratelimit-remaining-requests": "12", "x-ratelimit-reset-requests": "8s"}, None),
        ({"x-ratelimit-reset-tokens": "8s"}, None),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "nan"}, None),
        ({}, None),
    ],
)
def test_retry_after_reads_every_name_as_seconds(headers, seconds):
    assert retry_after(headers, now=NOW) == seconds


def test_retry_after_of_no_headers_is_none():
    assert retry_after(None) is None


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("6m0s", 360.0),
        ("1.5s", 1.5),
        ("20ms", 0.02),
        ("1h2m3s", 3723.0),
        ("2", 2.0),
        ("0s", 0.0),
        ("5x", None),
        ("1.5 s", None),
        ("", None),
    ],
)
def test_durations_read_as_openai_writes_them(text, seconds):
    assert duration(text) == seconds


def test_the_longest_wait_retried_is_the_request_timeout_or_two_minutes():
    assert Client(api_key="k", base_url="http://127.0.0.1:9/v1", timeout=5).retry_limit() == 5
    assert Client(api_key="k", base_url="http://127.0.0.1:9/v1").retry_limit() == RETRY_AFTER_MAX


# --- a turn's retries --------------------------------------------------------------------------

# Each is a wait of 1.2 s, longer than the client's own first backoff (at most 0.5 s), which is
# what it waited when it did not understand the header.
WAITS = {
    "litellm-retry-after": {"llm_provider-retry-after": "1.2"},
    "litellm-retry-after-ms": {"llm_provider-retry-after-ms": "1200"},
    "openai-reset-requests": {
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "1.2s",
    },
    "litellm-reset-tokens": {
        "llm_provider-x-ratelimit-remaining-tokens": "0",
        "llm_provider-x-ratelimit-reset-tokens": "0m1.2s",
    },
}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("headers", list(WAITS.values()), ids=list(WAITS))
def test_a_429_is_retried_after_the_wait_the_server_asks_for(
    fake_llm, session, settings, caplog, headers
):
    settings.AGENT_MAX_RETRIES = 1
    fake_llm.queue(Error(429, "slow down", retry_after_ms=None, headers=headers), Reply("ok"))
    with caplog.at_level("INFO", logger="agents.retry"):
        turn = ask(session, "hi")
    assert turn.status == "done"
    assert turn.reply == "ok"
    waits = [r.args[0] for r in caplog.records if r.msg.startswith("the model server asks")]
    assert waits == [pytest.approx(1.2)]
    first, second = fake_llm.request_times
    assert second - first >= 1.2  # it really waited that long before asking again


@pytest.mark.django_db(transaction=True)
def test_a_429_asking_for_longer_than_the_timeout_is_not_retried_and_says_how_long(
    fake_llm, session, settings
):
    settings.AGENT_TIMEOUT = 5
    headers = {"llm_provider-retry-after": "30"}
    fake_llm.queue(Error(429, "slow down", retry_after_ms=None, headers=headers), Reply("no"))
    turn = ask(session, "hi")
    assert turn.status == "failed"
    assert len(fake_llm.requests) == 1
    assert turn.error == (
        "The model did not answer: the model server answered HTTP 429: slow down "
        "(the server is rate limiting; it asks to wait 30 s)"
    )
    assert history(session) == [("user", "hi")]


def test_the_async_client_waits_as_the_server_asks_too(fake_llm, settings, caplog):
    settings.AGENT_MAX_RETRIES = 1
    headers = {"llm_provider-retry-after": "0.7"}
    fake_llm.queue(Error(429, retry_after_ms=None, headers=headers), Reply("async ok"))
    model = build_model()
    assert isinstance(model, ChatModel)

    async def stream() -> str:
        deltas = model.ainvoke_stream(
            messages=[Message(role="user", content="hi")],
            assistant_message=Message(role="assistant"),
        )
        return "".join([delta.content or "" async for delta in deltas])

    with caplog.at_level("INFO", logger="agents.retry"):
        assert asyncio.run(stream()) == "async ok"
    waits = [r.args[0] for r in caplog.records if r.msg.startswith("the model server asks")]
    assert waits == [pytest.approx(0.7)]
    first, second = fake_llm.request_times
    assert second - first >= 0.7
