"""Automatic titles (agents.titles): after the first exchange of a session still called "New
session", the model names it, with the fake model server and with the offline demo model."""

from __future__ import annotations

import pytest

from agents.demo_model import TITLE_MARKER
from agents.titles import TITLE_INSTRUCTIONS, TITLE_MAX_TOKENS, TITLE_TURNS, clean_title
from agents.worker import run_turn
from sessions_app.models import Session
from sessions_app.services import session_create, session_title_set, session_update
from sessions_app.turns import turn_start
from tests.conftest import ask
from tests.core.test_events import heard
from tests.fakes.chat_server import Error, Reply

pytestmark = pytest.mark.django_db


@pytest.fixture
def untitled(alice):
    return session_create(owner=alice)


@pytest.fixture
def scripted(fake_llm):
    """The fake server with titling requests scripted like any other (no side answer)."""
    fake_llm.aside = None
    return fake_llm


def name_of(session) -> str:
    return Session.objects.get(pk=session.pk).session_name


def is_title_request(body: dict) -> bool:
    return TITLE_MARKER in str(body["messages"][0]["content"])


@pytest.mark.django_db(transaction=True)  # events are sent once the change commits
def test_the_first_exchange_gets_a_title_from_the_model(untitled, scripted):
    scripted.queue(Reply("Rome is lovely in May."), Reply('"Trip to Rome."'))
    turn = turn_start(session=untitled, message="Plan a trip to Rome for me")
    events = heard(untitled.pk, lambda: run_turn(turn.pk))
    turn.refresh_from_db()
    assert turn.status == "done"
    assert turn.reply == "Rome is lovely in May."
    assert name_of(untitled) == "Trip to Rome"
    request = scripted.requests[-1]
    assert is_title_request(request)
    assert request["max_tokens"] == TITLE_MAX_TOKENS
    assert "Plan a trip to Rome for me" in request["messages"][-1]["content"]
    assert "Rome is lovely in May." in request["messages"][-1]["content"]
    assert not request.get("tools")  # a plain request: no tools to call
    # The page and integrations hear of it after the turn ended, like any rename.
    kinds = [e["type"] for e in events]
    assert kinds.index("turn.finished") < kinds.index("session.changed")
    changed = next(e for e in events if e["type"] == "session.changed")
    assert changed["name"] == "Trip to Rome"


def test_a_named_session_is_not_retitled_and_asks_nothing(alice, scripted):
    session = session_create(owner=alice, name="Mine")
    scripted.queue(Reply("Sure."))
    ask(session, "hello")
    assert name_of(session) == "Mine"
    assert not any(is_title_request(r) for r in scripted.requests)


def test_a_later_turn_of_a_titled_session_asks_nothing(untitled, scripted):
    scripted.queue(Reply("One."), Reply("First title"), Reply("Two."))
    ask(untitled, "first")
    ask(untitled, "second")
    assert name_of(untitled) == "First title"
    assert sum(is_title_request(r) for r in scripted.requests) == 1


def test_a_failed_title_keeps_the_turn_and_the_next_turn_tries_again(untitled, scripted, settings):
    settings.AGENT_MAX_RETRIES = 0
    scripted.queue(Reply("One."), Error(500, "down"), Reply("Two."), Reply("Second try"))
    turn = ask(untitled, "first")
    assert turn.status == "done"
    assert turn.reply == "One."
    assert name_of(untitled) == "New session"
    ask(untitled, "second")
    assert name_of(untitled) == "Second try"


def test_a_failed_turn_asks_for_no_title(untitled, scripted, settings):
    settings.AGENT_MAX_RETRIES = 0
    scripted.queue(Error(500, "down"))
    assert ask(untitled, "hello").status == "failed"
    assert name_of(untitled) == "New session"
    assert not any(is_title_request(r) for r in scripted.requests)


def test_an_empty_or_junk_title_leaves_the_name(untitled, scripted):
    scripted.queue(Reply("Sure."), Reply('"  . "'))
    ask(untitled, "hello")
    assert name_of(untitled) == "New session"


def test_a_name_given_before_the_title_is_stored_wins(untitled):
    stale = Session.objects.get(pk=untitled.pk)  # read before the user renamed it
    session_update(session=untitled, name="My own name")
    assert session_title_set(session=stale, title="Model title") is None
    assert name_of(untitled) == "My own name"


def test_the_demo_model_titles_from_the_first_message(untitled, settings):
    settings.OPENAI_API_KEY = settings.OPENAI_BASE_URL = ""
    turn = ask(untitled, "  how do I bake sourdough bread at home, step by step?")
    assert turn.status == "done"
    assert name_of(untitled) == "How do I bake sourdough bread"
    assert TITLE_INSTRUCTIONS.startswith(TITLE_MARKER)


@pytest.mark.parametrize(
    ("answer", "title"),
    [
        ("Trip to Rome", "Trip to Rome"),
        ('"Trip to Rome."', "Trip to Rome"),
        ("Title: **Trip to Rome**\nMore text", "Trip to Rome"),
        ("\n\n  « Voyage à Rome »  \n", "Voyage à Rome"),
        ("x" * 300, "x" * 79 + "…"),
        ("  ", ""),
        ("a\x00b\x07c", "abc"),
    ],
)
def test_clean_title(answer, title):
    assert clean_title(answer) == title


def test_a_session_whose_first_reply_failed_is_titled_by_the_next_exchange(
    untitled, scripted, settings
):
    settings.AGENT_MAX_RETRIES = 0
    scripted.queue(Error(500, "down"))
    assert ask(untitled, "hello there").status == "failed"
    scripted.queue(Reply("Sure, Rome."), Reply("Trip to Rome"))
    assert ask(untitled, "plan a trip to Rome").status == "done"
    assert name_of(untitled) == "Trip to Rome"
    title_request = scripted.requests[-1]
    assert is_title_request(title_request)
    assert "plan a trip to Rome" in title_request["messages"][-1]["content"]


def test_failed_exchanges_do_not_use_up_the_chances_of_a_title(untitled, scripted, settings):
    settings.AGENT_MAX_RETRIES = 0
    for _ in range(TITLE_TURNS * 2):  # as many failed exchanges as the old limit allowed
        scripted.queue(Error(500, "down"))
        assert ask(untitled, "hello").status == "failed"
    scripted.queue(Reply("At last."), Reply("Finally answered"))
    assert ask(untitled, "are you there?").status == "done"
    assert name_of(untitled) == "Finally answered"
