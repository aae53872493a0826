"""The chat header's model picker, the session's instructions dialog and the profile's
instructions, through HTTP."""

from __future__ import annotations

import pytest
from django.urls import reverse

from core.model_choice import (
    DEMO_MODEL_ID,
    DEMO_MODEL_NAME,
    INSTRUCTIONS_MAX_CHARS,
    TEST_COMMAND_MAX_CHARS,
)
from sessions_app.models import Session

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def as_alice(client, alice):
    client.force_login(alice)
    return client


@pytest.fixture
def as_bob(client, bob):
    client.force_login(bob)
    return client


def settings_url(session) -> str:
    return reverse("chat:session_settings", args=[session.pk])


def test_the_header_offers_the_allowed_models_with_the_sessions_choice_selected(
    as_alice, session, settings
):
    settings.OPENAI_API_KEY = "key"  # a real server: the session's choice answers
    settings.AGENT_MODEL, settings.AGENT_ALLOWED_MODELS = "house-model", ["big-model"]
    page = as_alice.get(reverse("chat:session", args=[session.pk])).content.decode()
    assert 'data-testid="model-picker"' in page
    assert '<option value="house-model" selected>' in page
    assert '<option value="big-model">' in page
    assert DEMO_MODEL_ID not in page

    response = as_alice.post(settings_url(session), {"model": "big-model"}, **HX)
    assert response.status_code == 200
    assert '<option value="big-model" selected>' in response.content.decode()
    assert Session.objects.get(pk=session.pk).settings == {"model": "big-model"}


@pytest.mark.parametrize("stored", [{}, {"settings": {"model": "gpt-4o-mini"}}])
def test_with_the_demo_model_the_header_names_it_not_the_default_model(
    as_alice, session, settings, stored
):
    """Issue 39: with no model server the demo model answers, whatever the session chose; the
    header named gpt-4o-mini (AGENT_MODEL) as selected."""
    settings.OPENAI_API_KEY, settings.OPENAI_BASE_URL = "", ""
    settings.AGENT_MODEL, settings.AGENT_ALLOWED_MODELS = "gpt-4o-mini", []
    Session.objects.filter(pk=session.pk).update(metadata=stored)
    page = as_alice.get(reverse("chat:session", args=[session.pk])).content.decode()
    controls = page[page.index('data-testid="session-controls"') :]
    controls = controls[: controls.index('data-testid="open-instructions"')]
    assert 'data-testid="model-picker"' not in controls
    assert "gpt-4o-mini" not in controls
    assert f'data-model="{DEMO_MODEL_ID}"' in controls
    assert f">{DEMO_MODEL_NAME}</span>" in controls


def test_with_one_model_allowed_it_is_named_not_offered(as_alice, session, settings):
    settings.OPENAI_API_KEY = "key"  # a real server: no demo model beside it
    settings.AGENT_MODEL, settings.AGENT_ALLOWED_MODELS = "house-model", []
    page = as_alice.get(reverse("chat:session", args=[session.pk])).content.decode()
    assert 'data-testid="model-picker"' not in page
    assert 'data-testid="model-name"' in page
    assert "house-model" in page


def test_an_unknown_model_is_refused_in_place_and_nothing_is_written(as_alice, session):
    response = as_alice.post(settings_url(session), {"model": "o1-pro"}, **HX)
    assert response.status_code == 400
    assert "&#x27;o1-pro&#x27; is not allowed here" in response.content.decode()
    assert 'data-testid="model-error"' in response.content.decode()
    assert Session.objects.get(pk=session.pk).metadata == {}


def test_the_instructions_dialog_saves_them_and_the_header_marks_them_set(as_alice, session):
    dialog = as_alice.get(settings_url(session), **HX).content.decode()
    assert 'data-testid="session-settings-dialog"' in dialog
    assert f'maxlength="{INSTRUCTIONS_MAX_CHARS}"' in dialog

    response = as_alice.post(settings_url(session), {"instructions": "Use <b>metric</b>."}, **HX)
    assert response.status_code == 200
    body = response.content.decode()
    assert 'hx-swap-oob="true"' in body
    assert 'data-testid="instructions-set"' in body
    assert Session.objects.get(pk=session.pk).settings == {"instructions": "Use <b>metric</b>."}
    dialog = as_alice.get(settings_url(session), **HX).content.decode()
    assert "Use &lt;b&gt;metric&lt;/b&gt;." in dialog  # escaped, never raw HTML


def test_instructions_over_the_limit_come_back_in_the_dialog_with_the_reason(as_alice, session):
    text = "y" * (INSTRUCTIONS_MAX_CHARS + 1)
    response = as_alice.post(settings_url(session), {"instructions": text}, **HX)
    body = response.content.decode()
    assert 'data-testid="instructions-error"' in body
    assert "The session&#x27;s instructions are 8,001 characters long; the limit is 8,000" in body
    assert "settings.instructions" not in body  # a stored field's name is the API's
    assert text in body  # what was typed is not lost
    assert Session.objects.get(pk=session.pk).metadata == {}


def test_the_dialog_sets_the_test_command_that_run_the_tests_runs(as_alice, session):
    dialog = as_alice.get(settings_url(session), **HX).content.decode()
    assert 'data-testid="session-test-command"' in dialog
    form = {"instructions": "", "test_command": "  python3 -m unittest  "}
    assert as_alice.post(settings_url(session), form, **HX).status_code == 200
    assert Session.objects.get(pk=session.pk).settings == {"test_command": "python3 -m unittest"}
    dialog = as_alice.get(settings_url(session), **HX).content.decode()
    assert 'value="python3 -m unittest"' in dialog
    as_alice.post(settings_url(session), {"instructions": "", "test_command": ""}, **HX)
    assert Session.objects.get(pk=session.pk).settings == {}


def test_a_test_command_too_long_comes_back_in_the_dialog_with_the_reason(as_alice, session):
    command = "x" * (TEST_COMMAND_MAX_CHARS + 1)
    form = {"instructions": "kept", "test_command": command}
    body = as_alice.post(settings_url(session), form, **HX).content.decode()
    assert 'data-testid="instructions-error"' in body
    assert "The session&#x27;s test command must be text of at most" in body
    assert "settings.test_command" not in body  # a stored field's name is the API's
    assert command in body  # what was typed is not lost
    assert ">kept</textarea>" in body
    assert Session.objects.get(pk=session.pk).metadata == {}


def test_another_users_session_settings_are_404(as_bob, session):
    assert as_bob.get(settings_url(session), **HX).status_code == 404
    response = as_bob.post(settings_url(session), {"instructions": "pwned"}, **HX)
    assert response.status_code == 404
    assert as_bob.post(settings_url(session), {"model": "rollback-demo"}).status_code == 404
    assert Session.objects.get(pk=session.pk).metadata == {}


def test_the_profile_saves_the_users_instructions_and_refuses_too_long_ones(as_alice, alice):
    url = reverse("accounts:profile")
    page = as_alice.get(url).content.decode()
    assert 'data-testid="user-instructions"' in page
    form = {"auto_checkpoint": "on", "theme": "system", "instructions": "Answer in French."}
    assert as_alice.post(url, form).status_code == 302
    alice.refresh_from_db()
    assert alice.preference("instructions") == "Answer in French."
    assert "Answer in French." in as_alice.get(url).content.decode()

    response = as_alice.post(url, {**form, "instructions": "z" * (INSTRUCTIONS_MAX_CHARS + 1)})
    assert response.status_code == 400
    assert "the limit is 8,000" in response.content.decode()
    alice.refresh_from_db()
    assert alice.preference("instructions") == "Answer in French."


def test_emptying_the_profiles_instructions_removes_them(as_alice, alice):
    url = reverse("accounts:profile")
    form = {"theme": "system", "instructions": "Answer in French."}
    as_alice.post(url, form)
    as_alice.post(url, {**form, "instructions": "   "})
    alice.refresh_from_db()
    assert "instructions" not in alice.metadata["preferences"]
