"""The log lines of a turn run as a worker runs it: every one carries the ids of the request that
queued the turn, its user, its session and the turn itself (agno's, openai's and httpx's lines
included), and the last one reports how the turn ended, with the model's latency and tokens."""

from __future__ import annotations

import time

import pytest

from agents.worker import run_turn
from core import logs
from sessions_app.services import session_create
from sessions_app.turns import turn_start
from tests.fakes.chat_server import Error, Reply, ToolCall, ToolCalls

pytestmark = pytest.mark.django_db(transaction=True)


def queue_turn(session, text: str, request_id: str = "req-from-the-api"):
    """Queue a turn as a request does: with the request's id bound."""
    with logs.bound(request_id=request_id, user_id=session.owner_id):
        return turn_start(session=session, message=text)


def ids(record) -> tuple:
    return tuple(getattr(record, name, None) for name in logs.FIELDS)


def of_the_turn(records) -> list:
    """The records a turn's run logged, less one line that cannot carry its ids: each event the
    run publishes goes through asgiref's async_to_sync, which starts an event loop on a thread of
    its own (no context there), and asyncio logs that loop's creation at DEBUG. The event's own
    code runs in a copy of the turn's context."""
    return [r for r in records if not (r.name == "asyncio" and r.msg == "Using selector: %s")]


def test_every_line_of_a_turn_carries_its_request_user_session_and_turn(
    fake_llm, alice, log_records
):
    session = session_create(owner=alice)  # untitled: a title request follows the turn
    fake_llm.queue(Reply("Hello there, how are you?", prompt_tokens=12, completion_tokens=4))
    turn = queue_turn(session, "hi")
    assert turn.metadata["request_id"] == "req-from-the-api"
    log_records.clear()

    run_turn(turn.pk)

    records = of_the_turn(log_records)
    assert records, "the turn logged nothing"
    expected = ("req-from-the-api", alice.pk, session.pk, turn.pk)
    for record in records:
        assert ids(record) == expected, f"{record.name}: {record.getMessage()}"
    # The model's client (openai, over httpx) logged during the turn, and again for the title
    # request that followed it: their lines carry the ids too.
    requests = [r for r in records if r.getMessage().startswith("HTTP Request: POST")]
    assert len(requests) == 2
    assert len(fake_llm.aside_requests) == 1
    # Nothing is left bound once the turn is over.
    assert logs.current() == {}


def test_the_last_line_of_a_turn_has_its_latency_tokens_and_outcome(fake_llm, session, log_records):
    fake_llm.queue(
        ToolCalls([ToolCall("calculate", {"expression": "6*7"})], prompt_tokens=20),
        Reply("It is 42.", prompt_tokens=30, completion_tokens=5),
    )
    turn = queue_turn(session, "what is 6*7?")
    started = time.perf_counter()
    run_turn(turn.pk)
    wall_ms = (time.perf_counter() - started) * 1000

    last = log_records[-1]
    assert (last.name, last.getMessage(), last.levelname) == (
        "rollback.turns",
        "turn finished",
        "INFO",
    )
    assert ids(last)[1:] == (session.owner_id, session.pk, turn.pk)
    assert last.status == "done"
    assert last.finish_reason == "stop"
    assert last.model == "fake-model"
    assert last.input_tokens == 50
    assert last.output_tokens == 12
    assert last.total_tokens == 62
    assert isinstance(last.latency_ms, int)
    assert last.latency_ms >= 0
    assert isinstance(last.first_token_ms, int)
    assert 0 <= last.first_token_ms <= last.latency_ms
    assert last.tool_calls == 1
    assert last.tools == ["calculate"]
    assert [r for r in log_records if r.name == "rollback.turns"] == [last]  # one such line
    # Where the worker spent its time, step by step, in order; within the run's own time.
    phases = last.phases_ms
    assert list(phases) == [
        "claim",
        "agent",
        "prepare",
        "memories",
        "fit",
        "model",
        "settle",
        "store",
        "after",
    ]
    assert all(ms >= 0 for ms in phases.values())
    assert sum(phases.values()) <= wall_ms


def test_a_failed_turn_reports_its_error_at_warning(fake_llm, session, settings, log_records):
    settings.AGENT_MAX_RETRIES = 1
    fake_llm.queue(Error(500, "the model is down"), Error(500, "the model is down"))
    turn = queue_turn(session, "hi", request_id="req-failing")
    run_turn(turn.pk)

    for record in of_the_turn(log_records):
        assert ids(record) == ("req-failing", session.owner_id, session.pk, turn.pk), (
            f"{record.name}: {record.getMessage()}"
        )
    # openai said it retried, in the turn's context.
    assert any("Retrying request" in r.getMessage() for r in log_records)
    last = log_records[-1]
    assert (last.name, last.getMessage(), last.levelname) == (
        "rollback.turns",
        "turn finished",
        "WARNING",
    )
    assert last.status == "failed"
    assert "the model is down" in last.error
    assert last.model == "fake-model"
    assert isinstance(last.latency_ms, int)


def test_a_turn_queued_outside_any_request_has_no_request_id(fake_llm, session, log_records):
    fake_llm.queue(Reply("Hello."))
    turn = turn_start(session=session, message="hi")
    assert "request_id" not in turn.metadata
    run_turn(turn.pk)
    records = of_the_turn(log_records)
    assert records
    assert all(ids(r) == (None, session.owner_id, session.pk, turn.pk) for r in records)
