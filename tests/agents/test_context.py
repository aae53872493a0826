"""Long conversations within the model's context window (agents.context), against a local
Chat Completions server that counts tokens and refuses a request longer than its window."""

from __future__ import annotations

import json
import time

import pytest

from agents.context import (
    REFUSAL_HALF_LIFE,
    REFUSAL_MAX,
    SUMMARY_INSTRUCTIONS,
    calibrate,
    context_usage,
    overflowed,
    ratio_for,
    refusal_factor,
)
from agents.demo_model import SUMMARY_MARKER
from checkpoints.services import checkpoint_create, checkpoint_restore
from core.errors import InvalidInput
from sessions_app.models import Message, Summary
from sessions_app.selectors import branch_history, current_branch
from sessions_app.services import session_create, session_update
from tests.conftest import ask, grow
from tests.fakes.chat_server import Error, Reply, ToolCall, ToolCalls, count_tokens

pytestmark = pytest.mark.django_db(transaction=True)

WINDOW = 8_000


@pytest.fixture
def window(fake_llm, settings):
    """A model with an 8,000-token window that answers summaries briefly, and the app told so."""
    settings.AGENT_CONTEXT_TOKENS = WINDOW
    settings.AGENT_MAX_OUTPUT_TOKENS = 1_000
    fake_llm.context_window = WINDOW

    def answer(body: dict) -> Reply:
        first = body["messages"][0]["content"] or ""
        if SUMMARY_MARKER in first:
            return Reply(f"Summary #{len(summary_requests(fake_llm))} of the talk so far.")
        return Reply("An answer.")

    fake_llm.default = answer
    return fake_llm


def summary_requests(server) -> list[dict]:
    return [r for r in server.requests if SUMMARY_MARKER in (r["messages"][0]["content"] or "")]


def turn_requests(server) -> list[dict]:
    return [r for r in server.requests if SUMMARY_MARKER not in (r["messages"][0]["content"] or "")]


def test_a_3000_message_branch_fits_an_8000_token_window_and_is_summarised_once(window, session):
    branch = current_branch(session)
    grow(branch, 3000, 90)

    turn = ask(session, "what did we talk about?")

    assert turn.status == "done", turn.error
    assert turn.reply == "An answer."
    final = turn_requests(window)
    assert len(final) == 1  # the server never refused it
    request = final[0]
    assert count_tokens(request) + request["max_tokens"] <= WINDOW
    assert request["max_tokens"] == 1_000
    # Every summarising request fitted too, each building on the summary before it.
    pieces = summary_requests(window)
    assert len(pieces) > 1
    for i, body in enumerate(pieces):
        assert count_tokens(body) + body["max_tokens"] <= WINDOW
        if i:
            assert f"Summary #{i} of the talk so far." in body["messages"][-1]["content"]
    # The model sees the last summary in its instructions, then the newest messages whole.
    system = request["messages"][0]["content"]
    assert f"Summary #{len(pieces)} of the talk so far." in system
    summary = Summary.objects.order_by("-end_position").first()
    assert summary is not None
    assert turn.metadata["context"]["view_start"] == summary.end_position
    assert turn.metadata["context"]["summary"] == summary.pk
    shown = [m["content"] for m in request["messages"][1:]]
    kept = branch_history(current_branch(session), start=summary.end_position, end=3000)
    assert shown == [m.content for m in kept] + ["what did we talk about?"]
    assert 0 < len(kept) < 3000
    # A summary per piece, stored once: nothing is copied into the branch.
    assert Summary.objects.count() == len(pieces)
    assert current_branch(session).message_count == 3002

    # The next turn reuses the summary: no summarising request.
    window.requests.clear()
    again = ask(session, "and then?")
    assert again.status == "done", again.error
    assert summary_requests(window) == []
    assert f"Summary #{len(pieces)} of the talk so far." in window.messages()[0]["content"]


def test_a_branch_restored_from_a_later_checkpoint_reuses_the_summary_and_a_rewind_below_drops_it(
    window, session
):
    branch = current_branch(session)
    grow(branch, 3000, 90)
    early = checkpoint_create(branch=current_branch(session), name="early", at=10)
    assert ask(session, "first").status == "done"
    summary = Summary.objects.order_by("-end_position").first()
    made = Summary.objects.count()
    later = checkpoint_create(branch=current_branch(session), name="later")
    assert later.message_count > summary.end_position

    restored = checkpoint_restore(checkpoint=later, session=session).branch
    assert restored.pk != branch.pk
    window.requests.clear()
    turn = ask(session, "on the new branch")
    assert turn.status == "done", turn.error
    assert turn.branch_id == restored.pk
    assert summary_requests(window) == []  # the parent's summary serves the new branch
    assert summary.content in window.messages()[0]["content"]
    assert Summary.objects.count() == made
    assert context_usage(restored).summary == summary

    # A rewind of the original branch below the summary's end drops the summaries above it.
    checkpoint_restore(checkpoint=early, mode="rewind", session=session)
    assert not Summary.objects.filter(end_position__gt=10).exists()
    assert context_usage(current_branch(session)).summary is None


def test_large_old_tool_results_are_shortened_before_anything_is_summarised(window, session):
    branch = current_branch(session)
    grow(branch, 2, 90)
    window.queue(
        ToolCalls([ToolCall("calculate", {"expression": "2+2"})]),
        Reply("Four."),
    )
    assert ask(session, "calculate 2+2").status == "done"
    tool = next(m for m in branch_history(current_branch(session)) if m.role == "tool")
    huge = "x" * 40_000  # about 11,000 tokens: more than the window
    Message.objects.filter(pk=tool.pk).update(tool_result=huge, content=huge)
    grow(current_branch(session), 4, 90)

    window.requests.clear()
    turn = ask(session, "next")
    assert turn.status == "done", turn.error
    assert summary_requests(window) == []
    sent_tool = next(m for m in window.messages() if m["role"] == "tool")["content"]
    assert "[shortened for the model: 40,000 characters in all]" in sent_tool
    assert len(sent_tool) < 2_000
    # Only the request is shortened: the stored result is whole.
    assert Message.objects.get(pk=tool.pk).tool_result == huge


def test_a_window_too_small_for_the_message_and_the_reply_fails_before_the_model_is_called(
    window, session, settings
):
    settings.AGENT_CONTEXT_TOKENS = 4_000
    turn = ask(session, "word " * 5_000)
    assert turn.status == "failed"
    assert "more than the model's window of 4,000 tokens" in turn.error
    assert "AGENT_MAX_OUTPUT_TOKENS" in turn.error
    assert window.requests == []
    assert [m.role for m in branch_history(current_branch(session))] == ["user"]


def test_a_failed_summary_fails_the_turn_readably_and_the_next_turn_succeeds(
    window, session, settings
):
    settings.AGENT_MAX_RETRIES = 0
    grow(current_branch(session), 3000, 90)
    window.queue(Error(503, "upstream overloaded"))
    turn = ask(session, "hello")
    assert turn.status == "failed"
    assert "could not be summarised" in turn.error
    assert "HTTP 503" in turn.error
    assert Summary.objects.count() == 0
    assert turn_requests(window) == []

    again = ask(session, "hello again")
    assert again.status == "done", again.error
    assert Summary.objects.exists()
    history = [m.content for m in branch_history(current_branch(session))][-3:]
    assert history == ["hello", "hello again", "An answer."] or history[-1] == "An answer."


def test_a_server_with_a_smaller_window_than_configured_is_fitted_after_its_refusal(
    window, session, settings
):
    window.context_window = 4_500  # AGENT_CONTEXT_TOKENS says 8,000: the server refuses first
    grow(current_branch(session), 3000, 90)
    turn = ask(session, "hello")
    assert turn.status == "done", turn.error
    refused = [r for r in window.requests if count_tokens(r) + r["max_tokens"] > 4_500]
    assert len(refused) == 1  # one refusal: its error states the window, which is used after
    accepted = turn_requests(window)[-1]
    assert count_tokens(accepted) + accepted["max_tokens"] <= 4_500
    assert context_usage(current_branch(session)).limits.context == 4_500


def test_the_server_reported_usage_calibrates_the_count(window, session):
    grow(current_branch(session), 40, size=400)
    assert ask(session, "one").status == "done"
    usage = context_usage(current_branch(session))
    # The server counts four characters to a token, we count three and a half: calibrated,
    # the next request by our count is within a few percent of the server's.
    body = turn_requests(window)[-1]
    assert abs(usage.tokens - count_tokens(body)) / count_tokens(body) < 0.25


def test_the_demo_model_summarises_offline(session, settings):
    settings.OPENAI_API_KEY = settings.OPENAI_BASE_URL = ""
    settings.AGENT_CONTEXT_TOKENS = 6_000
    settings.AGENT_MAX_OUTPUT_TOKENS = 500
    grow(current_branch(session), 600, 90)
    turn = ask(session, "hello")
    assert turn.status == "done", turn.error
    summary = Summary.objects.order_by("-end_position").first()
    assert summary is not None
    assert summary.content.startswith("The user asked: message 0")
    assert SUMMARY_INSTRUCTIONS.startswith(SUMMARY_MARKER)


def test_a_session_may_set_its_own_window_within_bounds(session):
    session_update(session=session, metadata={"settings": {"context_tokens": 16_000}})
    assert context_usage(current_branch(session)).limits.context == 16_000
    for bad in (10, "big", 10**9, True, 2.5):
        with pytest.raises(InvalidInput, match="context_tokens"):
            session_update(session=session, metadata={"settings": {"context_tokens": bad}})


def test_usage_counts_the_history_in_the_database(session, settings):
    settings.AGENT_CONTEXT_TOKENS = 100_000
    branch = current_branch(session)
    empty = context_usage(branch)
    grow(branch, 100, size=350)
    usage = context_usage(current_branch(session))
    assert usage.view_start == 0
    assert usage.summary is None
    assert usage.tokens - empty.tokens == pytest.approx(100 * (350 // 27 * 27 + 13) / 3.5, rel=0.1)
    assert json.dumps(usage.percent)


REFUSAL = Error(
    400,
    "This model's maximum context length is 8000 tokens. However, you requested 9000 tokens. "
    "Please reduce the length of the messages or completion.",
    retry_after_ms=None,
    code="context_length_exceeded",
)


def test_refusals_as_too_long_never_lock_the_model_out_for_a_new_session(fake_llm, settings, alice):
    settings.AGENT_CONTEXT_TOKENS = 8_000
    settings.AGENT_MAX_OUTPUT_TOKENS = 4_096  # the default reserve
    fake_llm.default = lambda body: REFUSAL
    refused = session_create(owner=alice, name="refused")
    for i in range(4):
        turn = ask(refused, f"hello {i}")
        assert turn.status == "failed"
    assert len(fake_llm.requests) >= 4  # every refused turn was sent, and refused

    fake_llm.default = lambda body: Reply("Hello!")
    sent = len(fake_llm.requests)
    turn = ask(session_create(owner=alice, name="fresh"), "hello")
    assert turn.status == "done", turn.error
    assert len(fake_llm.requests) == sent + 1  # the new session's "hello" reached the server
    assert fake_llm.messages()[-1]["content"] == "hello"


def test_a_message_whose_characters_fit_the_window_is_always_sent(fake_llm, session, settings):
    settings.AGENT_CONTEXT_TOKENS = 8_000
    settings.AGENT_MAX_OUTPUT_TOKENS = 4_096
    # Whatever was learned (a server reporting absurd usage, refusals without end) ...
    calibrate("fake-model", estimated=1_000, reported=1_000_000)
    for _ in range(20):
        overflowed("fake-model", "context_length_exceeded")
    # ... a request whose characters fit the window (a token is never less than a character)
    # is sent, and the server decides.
    turn = ask(session, "hello")
    assert turn.status == "done", turn.error
    assert fake_llm.messages()[-1]["content"] == "hello"


def test_the_count_learned_from_refusals_is_bounded_and_decays_back():
    for _ in range(20):
        assert overflowed("m", "context_length_exceeded") is False
    assert 1.9 < ratio_for("m") <= REFUSAL_MAX
    half_life_later = time.time() + REFUSAL_HALF_LIFE
    assert refusal_factor("m", now=half_life_later) == pytest.approx(1.5, abs=0.02)
    assert refusal_factor("m", now=time.time() + 8 * REFUSAL_HALF_LIFE) < 1.01
    # A turn the server answers says what it counts: the extra ends at once.
    calibrate("m", estimated=1_000, reported=1_000)
    assert ratio_for("m") == 1.0


def test_a_summary_longer_than_its_budget_is_cut_before_it_is_stored_and_is_counted(
    window, session
):
    huge = "word " * 173_542  # 867,710 characters: the server ignored max_tokens

    def answer(body: dict) -> Reply:
        if SUMMARY_MARKER in (body["messages"][0]["content"] or ""):
            return Reply(huge)
        return Reply("An answer.")

    window.default = answer
    grow(current_branch(session), 3000, 90)
    turn = ask(session, "what did we talk about?")

    assert turn.status == "done", turn.error
    summaries = list(Summary.objects.all())
    assert summaries
    for body in summary_requests(window):  # each summary's request carried the cut summary
        assert count_tokens(body) + body["max_tokens"] <= WINDOW
    for summary in summaries:
        assert len(summary.content) <= 1_024 * 3.5  # its budget (max_tokens) by our count
        assert summary.content.endswith("[summary cut to its budget]")
        assert summary.metadata["cut_from_chars"] == len(huge.strip())
    request = turn_requests(window)[-1]
    assert count_tokens(request) + request["max_tokens"] <= WINDOW
    last = max(summaries, key=lambda s: s.end_position)
    assert last.content in request["messages"][0]["content"]
    # The count, context.tokens and the gauge include the summary.
    summary_tokens = len(last.content) / 3.5
    history = branch_history(current_branch(session), start=last.end_position, end=3000)
    history_tokens = sum(len(m.content) for m in history) / 3.5
    assert turn.metadata["context"]["tokens"] >= summary_tokens + history_tokens
    usage = context_usage(current_branch(session))
    assert usage.tokens >= summary_tokens
    assert usage.percent <= 100


def test_a_request_refused_as_too_long_is_fitted_again_smaller_for_itself_alone(window, session):
    # The server's tokenizer counts a token for every 2.5 characters, we count 3.5: the turn's
    # first request fits by our count and is refused; the one error states the window we knew.
    window.chars_per_token = 2.5
    grow(current_branch(session), 120, 90)
    before = context_usage(current_branch(session)).limits
    turn = ask(session, "hello")
    assert turn.status == "done", turn.error
    sent = turn_requests(window)
    assert len(sent) == 2
    assert count_tokens(sent[0], 2.5) + sent[0]["max_tokens"] > WINDOW  # refused
    assert count_tokens(sent[1], 2.5) + sent[1]["max_tokens"] <= WINDOW  # fitted again, smaller
    assert turn.metadata["context"]["tokens"] <= 0.75 * before.usable
    # The smaller share was for that request alone.
    after = context_usage(current_branch(session)).limits
    assert (after.context, after.usable) == (before.context, before.usable) == (WINDOW, 6_600)
