"""A long history summarised ahead of need (agents.summaries), in the background: after an
import, and as a branch grows; against a local Chat Completions server that counts tokens and
refuses a request longer than its window."""

from __future__ import annotations

import threading

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents.context import context_usage, fit_turn, is_summarising, needs_summary_ahead
from agents.demo_model import SUMMARY_MARKER
from agents.summaries import branch_summarise, usage_after_turn
from checkpoints.transfer import session_export
from core.model_choice import model_id_for
from sessions_app.models import Branch, Session, Summary
from sessions_app.selectors import branch_history, current_branch
from sessions_app.services import message_append, session_create
from tests.conftest import ask, grow
from tests.fakes.chat_server import Error, Reply, count_tokens
from tests.web.api.conftest import bearer_client

pytestmark = pytest.mark.django_db(transaction=True)

WINDOW = 8_000


def is_summary(body: dict) -> bool:
    return SUMMARY_MARKER in (body["messages"][0]["content"] or "")


@pytest.fixture
def window(fake_llm, settings):
    """A model with an 8,000-token window that answers summaries briefly, and the app told so."""
    settings.AGENT_CONTEXT_TOKENS = WINDOW
    settings.AGENT_MAX_OUTPUT_TOKENS = 1_000
    fake_llm.context_window = WINDOW

    def answer(body: dict) -> Reply:
        if is_summary(body):
            return Reply("Summary of the talk so far.")
        return Reply("An answer.")

    fake_llm.default = answer
    return fake_llm


def imported(alice, messages: int) -> tuple[Session, dict]:
    """A session of `messages` messages, exported and imported through the API (the import's
    summarising runs when its transaction commits: inline here, as `inline_turns` asks)."""
    source = session_create(owner=alice, name="long")
    grow(current_branch(source), messages, 90)
    document = session_export(session=source)
    api = bearer_client(alice)
    response = api.post("/api/v1/sessions/import/", document, format="json")
    assert response.status_code == 201, response.content
    return Session.objects.get(pk=response.json()["id"]), response.json()


def test_the_first_turn_on_a_10000_message_import_makes_at_most_three_requests_before_its_reply(
    window, alice, inline_turns
):
    seen: list[dict] = []
    api = bearer_client(alice)
    answer = window.default

    def watch(body: dict) -> Reply:
        # While the import's summariser works, the branch's context says so.
        if is_summary(body) and not seen:
            branch = current_branch(Session.objects.order_by("-pk").first())
            seen.append(api.get(f"/api/v1/branches/{branch.pk}/context/").json())
            connection.close()  # this server thread's own connection
        return answer(body)

    window.default = watch
    session, _ = imported(alice, 10_000)
    assert seen
    assert seen[0]["summarizing"] is True
    assert Summary.objects.exists()  # summarised ahead, before any turn
    branch = current_branch(session)
    assert api.get(f"/api/v1/branches/{branch.pk}/context/").json()["summarizing"] is False

    window.requests.clear()
    turn = ask(session, "what did we talk about?")
    assert turn.status == "done", turn.error
    assert turn.reply == "An answer."
    assert len(window.requests) <= 3
    assert all(count_tokens(r) + r["max_tokens"] <= WINDOW for r in window.requests)
    assert not any(is_summary(r) for r in window.requests)


def test_a_3000_message_import_succeeds_first_time_with_a_denser_tokenizer(
    window, alice, inline_turns
):
    # A well-behaved server (it keeps max_tokens and enforces its window) whose tokenizer counts
    # a token for every two characters, where we count one for three and a half.
    window.chars_per_token = 2
    session, _ = imported(alice, 3_000)
    turn = ask(session, "hello")
    assert turn.status == "done", turn.error
    assert turn.reply == "An answer."
    answered = [r for r in window.requests if count_tokens(r, 2) + r["max_tokens"] <= WINDOW]
    assert len(window.requests) - len(answered) <= 2  # refused, then asked again smaller


def test_a_failing_background_summary_breaks_nothing_and_the_turn_summarises(
    window, alice, inline_turns, settings
):
    settings.AGENT_MAX_RETRIES = 0
    window.queue(Error(503, "upstream overloaded"))
    session, _ = imported(alice, 3_000)
    assert not is_summarising(current_branch(session).pk)
    turn = ask(session, "hello")
    assert turn.status == "done", turn.error
    assert any(is_summary(r) for r in window.requests[1:])
    assert Summary.objects.exists()


def test_a_branch_grown_past_the_threshold_is_summarised_after_its_turn(
    window, session, inline_turns
):
    # About 4,000 tokens of history: it fits a request (little more is left for it beside the
    # instructions and the tool schemas, SYSTEM_CHARS), but past three quarters of that, the
    # next turns would soon need a summary.
    grow(current_branch(session), 134, 90)
    turn = ask(session, "hello")
    assert turn.status == "done", turn.error
    assert not is_summary(window.requests[0])  # the reply did not wait for a summary
    assert window.requests[0]["messages"][-1]["content"] == "hello"
    assert any(is_summary(r) for r in window.requests[1:])  # summarised after it
    summary = Summary.objects.get()
    assert 0 < summary.end_position < 136
    assert not is_summarising(current_branch(session).pk)

    window.requests.clear()
    assert ask(session, "and then?").status == "done"
    assert not any(is_summary(r) for r in window.requests)
    assert "Summary of the talk so far." in window.messages(0)[0]["content"]


@pytest.mark.postgres
@pytest.mark.redis
def test_two_summarisers_of_one_branch_at_once_summarise_it_once(window, session):
    grow(current_branch(session), 3_000, 90)
    barrier = threading.Barrier(2)
    made: list[int] = []

    def work() -> None:
        try:
            barrier.wait()
            made.append(branch_summarise(branch_id=current_branch(session).pk))
        finally:
            connection.close()

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert sorted(made)[0] == 0
    assert sorted(made)[1] > 0
    summary_requests = [r for r in window.requests if is_summary(r)]
    assert Summary.objects.count() == len(summary_requests) == made[0] + made[1]
    assert not is_summarising(current_branch(session).pk)


def test_the_header_gauge_says_when_older_messages_are_being_summarised(client, alice, session):
    from django.urls import reverse

    from agents.context import summarising

    client.force_login(alice)
    page = reverse("chat:session", args=[session.pk])
    with summarising(current_branch(session).pk, wait=False) as claim:
        assert claim is not None
        html = client.get(page).content.decode()
        assert 'data-summarizing="true"' in html
        assert "summarising…" in html
    assert "summarising…" not in client.get(page).content.decode()


def _after_a_turn(session, history: int):
    """A branch of `history` messages and one summary, fitted for a turn as the worker fits it,
    then the turn's messages appended (a tool call, its result, the reply): the fitting and
    what the branch gained."""
    branch = current_branch(session)
    grow(branch, history, 90)
    Summary.objects.create(
        last_message_id=branch_history(branch, start=9, end=10)[0].pk,
        end_position=10,
        content="What was said before.",
        model="demo",
    )
    asked = message_append(branch=branch, role="user", content="Read the notes, please.")
    fit = fit_turn(
        session=session,
        branch=branch,
        end=asked.position,
        message=asked.content,
        model=model_id_for(session.settings),
    )
    calls = [{"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]
    added = [
        asked,
        message_append(branch=branch, role="assistant", tool_calls=calls),
        message_append(branch=branch, role="tool", tool_result="notes " * 300, tool_call_id="c1"),
        message_append(branch=branch, role="assistant", content="They say hello. " * 20),
    ]
    branch = Branch.objects.select_related("session__owner").get(pk=branch.pk)
    return branch, fit, added


def test_the_count_after_a_turn_agrees_with_the_branchs_own_without_a_query(window, session):
    branch, fit, added = _after_a_turn(session, 40)
    assert fit.summary is not None
    assert fit.summary.end_position == 10
    with CaptureQueriesContext(connection) as ctx:
        known = usage_after_turn(branch, fit, added)
    assert ctx.captured_queries == []
    counted = context_usage(branch)
    # The same summary and view; the tokens within what a tool call's JSON spelling changes.
    assert (known.summary, known.view_start, known.message_count) == (
        counted.summary,
        counted.view_start,
        counted.message_count,
    )
    assert abs(known.tokens - counted.tokens) <= max(5, counted.tokens // 100)
    assert needs_summary_ahead(branch, known) == needs_summary_ahead(branch)


def test_a_branch_the_turn_did_not_account_for_is_counted_afresh(window, session):
    branch, fit, added = _after_a_turn(session, 40)
    grow(branch, 3, 90)  # written meanwhile, by another hand
    branch = Branch.objects.select_related("session__owner").get(pk=branch.pk)
    assert usage_after_turn(branch, fit, added).tokens == context_usage(branch).tokens
