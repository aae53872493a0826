"""A reply regenerated with another model, from the reply's menu (issue 39, item 17): the menu
lists the allowed models (none in the demo mode, nor with one model allowed); the chosen model
answers that turn only, the session's own choice is unchanged, and the new reply is badged with
its model; a model not allowed is a 400 and nothing happens."""

from __future__ import annotations

import pytest
from django.urls import reverse

from sessions_app.models import Branch, Message, Turn
from sessions_app.selectors import branch_history, current_branch
from sessions_app.turns import turn_fail, turn_retry, turn_start
from tests.conftest import say
from tests.fakes.chat_server import Reply

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def as_alice(client, alice):
    client.force_login(alice)
    return client


@pytest.fixture
def two_models(fake_llm, settings):
    settings.AGENT_ALLOWED_MODELS = ["other-model"]  # with AGENT_MODEL "fake-model"
    return fake_llm


@pytest.fixture
def reply(branch):
    say(branch, "question", "old answer")
    return Message.objects.get(branch=branch, role="assistant")


def page(client, session) -> str:
    return client.get(reverse("chat:session", args=[session.pk])).content.decode()


def regenerate(client, session, reply, captured, **data):
    with captured(execute=True):
        return client.post(reverse("chat:regenerate", args=[session.pk, reply.pk]), data, **HX)


def asked_models(llm) -> list[str]:
    return [body["model"] for body in llm.requests if "question" in str(body.get("messages"))]


def test_the_menu_lists_the_allowed_models(as_alice, session, reply, two_models):
    html = page(as_alice, session)
    assert 'data-testid="regenerate-with"' in html
    assert 'name="model" value="fake-model"' in html
    assert 'name="model" value="other-model"' in html


def test_the_menu_shows_only_when_there_is_a_choice(as_alice, session, reply, settings):
    assert 'data-testid="regenerate"' in page(as_alice, session)  # the demo model answers
    assert 'data-testid="regenerate-with"' not in page(as_alice, session)
    settings.OPENAI_BASE_URL, settings.AGENT_ALLOWED_MODELS = "http://127.0.0.1:9/v1", []
    assert 'data-testid="regenerate-with"' not in page(as_alice, session)
    settings.AGENT_ALLOWED_MODELS = ["other-model"]
    assert 'data-testid="regenerate-with"' in page(as_alice, session)


def test_the_chosen_model_answers_that_turn_only(
    as_alice, session, branch, reply, two_models, inline_turns, django_capture_on_commit_callbacks
):
    two_models.queue(Reply("answer of the other model"))
    response = regenerate(
        as_alice, session, reply, django_capture_on_commit_callbacks, model="other-model"
    )
    assert response.status_code == 200
    assert asked_models(two_models) == ["other-model"]
    new = current_branch(session)
    assert new.pk != branch.pk
    answer = branch_history(new)[-1]
    assert answer.content == "answer of the other model"
    assert answer.metadata["model"] == "other-model"
    session.refresh_from_db()
    assert "model" not in session.settings  # the session's choice is unchanged
    # The new version is badged with its model, which is not the session's.
    html = page(as_alice, session)
    assert 'data-testid="reply-model"' in html
    assert "this session now uses fake-model" in html
    # Regenerated again without a model: the session's own answers.
    two_models.queue(Reply("answer of the house model"))
    regenerate(as_alice, session, answer, django_capture_on_commit_callbacks)
    assert asked_models(two_models) == ["other-model", "fake-model"]
    assert branch_history(current_branch(session))[-1].metadata["model"] == "fake-model"
    assert 'data-testid="reply-model"' not in page(as_alice, session)


def test_a_model_not_allowed_is_a_400_and_nothing_happens(
    as_alice, session, branch, reply, two_models, inline_turns, django_capture_on_commit_callbacks
):
    for model in ("gpt-evil", "x" * 500):
        response = regenerate(
            as_alice, session, reply, django_capture_on_commit_callbacks, model=model
        )
        assert response.status_code == 400
        assert "is not allowed here" in response.content.decode()
    assert Branch.objects.filter(session=session).count() == 1
    assert not Turn.objects.filter(session=session).exists()
    assert current_branch(session).pk == branch.pk
    assert two_models.requests == []


def test_a_retried_turn_keeps_the_model_it_was_asked_with(session, branch, two_models):
    turn = turn_start(session=session, message="question", model="other-model")
    turn_fail(turn=turn, error="the server was away")
    again = turn_retry(turn=Turn.objects.get(pk=turn.pk))
    assert again.metadata["turn_model"] == "other-model"
