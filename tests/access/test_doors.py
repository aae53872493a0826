"""Each rule of a user's access holds at every door: the page, the API, the API's socket, and the
agent's own offer of tools (Telegram and the terminal `chat`: tests/integrations and
tests/agents/test_chat_limits.py)."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse

from accounts.models import User
from accounts.services import apikey_create
from sandbox.availability import availability
from sessions_app.models import Message, Session, Turn
from sessions_app.selectors import current_branch
from sessions_app.services import session_create
from sharing.models import ShareLink
from tests.access.conftest import grant
from tests.agents import approval_tools
from tests.fakes.chat_server import Reply, ToolCall, ToolCalls
from tests.web.api.conftest import bearer_client
from tests.web.test_socket_security import accepted, bearer

pytestmark = pytest.mark.django_db(transaction=True)


def page(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


HTMX = {"HTTP_HX_REQUEST": "true"}


# --- models ------------------------------------------------------------------------------------


def test_a_model_outside_the_users_access_is_refused_by_the_api_with_a_clear_400(
    alice, models_offered
):
    grant("interns", alice, all_models=False, model_ids="fake-small")
    api = bearer_client(alice)
    made = api.post(
        "/api/v1/sessions/",
        {"name": "s", "metadata": {"settings": {"model": "fake-large"}}},
        format="json",
    )
    assert made.status_code == 400
    assert "'fake-large'" in made.json()["detail"]
    assert "you may use: fake-small" in made.json()["detail"]
    sid = api.post("/api/v1/sessions/", {"name": "s"}, format="json").json()["id"]
    patched = api.patch(
        f"/api/v1/sessions/{sid}/",
        {"metadata": {"settings": {"model": "fake-large"}}},
        format="json",
    )
    assert patched.status_code == 400
    assert Session.objects.get(pk=sid).settings == {}
    ok = api.patch(
        f"/api/v1/sessions/{sid}/",
        {"metadata": {"settings": {"model": "fake-small"}}},
        format="json",
    )
    assert ok.status_code == 200


def test_a_session_that_chose_a_model_before_it_was_taken_away_cannot_start_a_turn(
    alice, models_offered, inline_turns
):
    session = session_create(owner=alice, name="s", metadata={"settings": {"model": "fake-large"}})
    grant("interns", alice, all_models=False, model_ids="fake-small")
    api = bearer_client(alice)
    refused = api.post(
        f"/api/v1/sessions/{session.pk}/turns/", {"message": "hi", "wait": True}, format="json"
    )
    assert refused.status_code == 400
    assert "fake-large" in refused.json()["detail"]
    sent = page(alice).post(
        reverse("chat:send", args=[session.pk]), {"message": "hi again"}, **HTMX
    )
    assert sent.status_code == 400
    assert "fake-large" in sent.content.decode()
    # Nothing was stored, and the model was never called.
    assert not Turn.objects.filter(session=session).exists()
    assert not Message.objects.filter(branch__session=session).exists()
    assert models_offered.requests == []
    # Another setting of the session can still be changed, and choosing an allowed model works.
    api.patch(
        f"/api/v1/sessions/{session.pk}/",
        {"metadata": {"settings": {"model": "fake-large", "instructions": "Be brief."}}},
        format="json",
    )
    session.refresh_from_db()
    assert session.settings["instructions"] == "Be brief."
    chose = page(alice).post(
        reverse("chat:session_settings", args=[session.pk]), {"model": "fake-small"}, **HTMX
    )
    assert chose.status_code == 200
    models_offered.queue(Reply("Small answers."))
    done = api.post(
        f"/api/v1/sessions/{session.pk}/turns/", {"message": "hi", "wait": True}, format="json"
    )
    assert done.status_code == 201, done.json()
    assert done.json()["reply"] == "Small answers."
    assert models_offered.requests[0]["model"] == "fake-small"


def test_the_picker_offers_only_the_users_models_and_refuses_another(alice, models_offered):
    grant("interns", alice, all_models=False, model_ids="fake-small\nfake-large")
    session = session_create(owner=alice, name="s")
    shown = page(alice).get(reverse("chat:session", args=[session.pk])).content.decode()
    assert 'value="fake-small"' in shown
    assert 'value="fake-large"' in shown
    assert 'value="fake-model"' not in shown
    refused = page(alice).post(
        reverse("chat:session_settings", args=[session.pk]), {"model": "fake-model"}, **HTMX
    )
    assert refused.status_code == 400
    assert "you may use: fake-small, fake-large" in refused.content.decode()


def test_a_user_whose_access_lacks_the_default_model_is_answered_by_the_first_they_have(
    alice, models_offered, inline_turns
):
    grant("interns", alice, all_models=False, model_ids="fake-large")
    session = session_create(owner=alice, name="s")
    models_offered.queue(Reply("Large answers."))
    done = bearer_client(alice).post(
        f"/api/v1/sessions/{session.pk}/turns/", {"message": "hi", "wait": True}, format="json"
    )
    assert done.status_code == 201
    assert models_offered.requests[0]["model"] == "fake-large"


def test_a_reply_cannot_be_regenerated_with_a_model_outside_the_users_access(
    alice, models_offered, inline_turns
):
    grant("interns", alice, all_models=False, model_ids="fake-model\nfake-small")
    session = session_create(owner=alice, name="s")
    models_offered.queue(Reply("First."))
    bearer_client(alice).post(
        f"/api/v1/sessions/{session.pk}/turns/", {"message": "hi", "wait": True}, format="json"
    )
    reply = Message.objects.get(branch=current_branch(session), role="assistant")
    shown = page(alice).get(reverse("chat:session", args=[session.pk])).content.decode()
    assert 'data-testid="regenerate-model">fake-small<' in shown
    assert 'data-testid="regenerate-model">fake-large<' not in shown
    refused = page(alice).post(
        reverse("chat:regenerate", args=[session.pk, reply.pk]), {"model": "fake-large"}, **HTMX
    )
    assert refused.status_code == 400
    assert "fake-large" in refused.content.decode()
    assert Turn.objects.filter(session=session).count() == 1


def test_a_turn_queued_before_its_model_was_taken_away_fails_before_the_model_is_called(
    alice, models_offered, celery_eager
):
    from agents.worker import run_turn
    from sessions_app.turns import turn_start

    session = session_create(owner=alice, name="s", metadata={"settings": {"model": "fake-large"}})
    turn = turn_start(session=session, message="queued")
    grant("interns", User.objects.get(pk=alice.pk), all_models=False, model_ids="fake-small")
    run_turn(turn.pk)
    turn.refresh_from_db()
    assert turn.status == Turn.Status.FAILED
    assert "fake-large" in turn.error
    assert models_offered.requests == []


# --- tools -------------------------------------------------------------------------------------


def offered_tools(llm) -> set[str]:
    return {t["function"]["name"] for t in llm.requests[0].get("tools") or []}


def one_turn(user: User, llm) -> set[str]:
    session = session_create(owner=user, name="s")
    llm.queue(Reply("Done."))
    done = bearer_client(user).post(
        f"/api/v1/sessions/{session.pk}/turns/", {"message": "hi", "wait": True}, format="json"
    )
    assert done.status_code == 201, done.json()
    return offered_tools(llm)


def test_the_shell_tools_are_offered_only_to_those_whose_access_has_them(
    alice, bob, fake_llm, inline_turns
):
    assert availability().ok, availability()  # bubblewrap is installed wherever tests run
    grant("no shell", alice, may_use_shell=False)
    tools = one_turn(alice, fake_llm)
    assert "run_shell" not in tools
    assert "run_tests" not in tools
    assert "write_file" in tools  # the rest stay
    fake_llm.reset()
    assert {"run_shell", "run_tests"} <= one_turn(bob, fake_llm)


def test_the_operators_custom_tools_are_offered_as_the_access_names_them(
    alice, bob, fake_llm, inline_turns, settings
):
    settings.AGENT_TOOLS = [
        "tests.agents.custom_tools.shout",
        "tests.agents.custom_tools.send_message",
    ]
    grant("some tools", alice, all_tools=False, tool_ids="shout")
    tools = one_turn(alice, fake_llm)
    assert "shout" in tools
    assert "send_message" not in tools
    fake_llm.reset()
    assert {"shout", "send_message"} <= one_turn(bob, fake_llm)


# --- sharing -----------------------------------------------------------------------------------


def test_sharing_is_refused_to_those_whose_access_lacks_it_at_the_api_and_the_page(alice, bob):
    grant("no sharing", alice, may_share=False)
    mine = current_branch(session_create(owner=alice, name="s"))
    refused = bearer_client(alice).post(f"/api/v1/branches/{mine.pk}/share/", {}, format="json")
    assert refused.status_code == 403
    assert refused.json()["detail"].startswith("Your access does not include sharing links")
    dialog = page(alice).post(reverse("shares:branch", args=[mine.pk]), {}, **HTMX)
    assert "Your access does not include sharing links" in dialog.content.decode()
    assert not ShareLink.objects.filter(owner=alice).exists()
    theirs = current_branch(session_create(owner=bob, name="s"))
    shared = bearer_client(bob).post(f"/api/v1/branches/{theirs.pk}/share/", {}, format="json")
    assert shared.status_code == 201


# --- the API -----------------------------------------------------------------------------------


def test_the_api_and_its_socket_refuse_those_whose_access_lacks_it_and_the_pages_do_not(alice, bob):
    grant("no api", alice, may_use_api=False)
    session = session_create(owner=alice, name="s")
    api = bearer_client(alice)
    refused = api.get("/api/v1/sessions/")
    assert refused.status_code == 403
    assert refused.json()["detail"].startswith("Your access does not include the API")
    assert page(alice).get("/api/v1/sessions/").status_code == 403  # the browser's login too
    assert page(alice).get(reverse("chat:session", args=[session.pk])).status_code == 200
    assert bearer_client(bob).get("/api/v1/sessions/").status_code == 200
    _, secret = apikey_create(user=alice, name="socket")
    url = f"/ws/v1/sessions/{session.pk}/"
    assert not async_to_sync(accepted)(url, bearer(secret))
    Group.objects.get(name="no api").user_set.remove(alice)
    assert async_to_sync(accepted)(url, bearer(secret))
    assert api.get("/api/v1/sessions/").status_code == 200


def test_the_title_of_a_users_session_is_asked_of_a_model_of_their_access(
    alice, models_offered, inline_turns
):
    grant("interns", alice, all_models=False, model_ids="fake-large")
    session = session_create(owner=alice, name="New session")
    models_offered.queue(Reply("Large answers."))
    bearer_client(alice).post(
        f"/api/v1/sessions/{session.pk}/turns/", {"message": "hi", "wait": True}, format="json"
    )
    assert models_offered.aside_requests, "no title was asked for"
    assert {r["model"] for r in models_offered.aside_requests} == {"fake-large"}


def test_a_user_removed_from_a_group_mid_turn_sees_that_turn_finish_and_the_next_refused(
    alice, models_offered, inline_turns, settings
):
    settings.AGENT_TOOLS = ["tests.agents.approval_tools.send_email"]
    group = grant("large", alice, all_models=False, model_ids="fake-large")
    grant("small", alice, all_models=False, model_ids="fake-small")
    session = session_create(owner=alice, name="s", metadata={"settings": {"model": "fake-large"}})
    email = {"to": "bob@example.com", "subject": "hello"}
    models_offered.queue(ToolCalls([ToolCall("send_email", email, id="call_mail")]))
    models_offered.queue(Reply("Sent."))
    api = bearer_client(alice)
    waiting = api.post(
        f"/api/v1/sessions/{session.pk}/turns/",
        {"message": "mail bob", "wait": True},
        format="json",
    ).json()
    assert waiting["status"] == "awaiting_approval", waiting
    group.user_set.remove(alice)  # mid-turn: the turn waits for its owner's answer
    answered = api.post(
        f"/api/v1/turns/{waiting['id']}/approve/",
        {"tool_call_id": "call_mail", "approved": True},
        format="json",
    )
    assert answered.status_code == 200
    turn = Turn.objects.get(pk=waiting["id"])
    assert turn.status == Turn.Status.DONE, turn.error  # a turn already running finishes
    assert [r["model"] for r in models_offered.requests] == ["fake-large", "fake-large"]
    refused = api.post(
        f"/api/v1/sessions/{session.pk}/turns/", {"message": "again", "wait": True}, format="json"
    )
    assert refused.status_code == 400
    assert "you may use: fake-small" in refused.json()["detail"]
    approval_tools.SENT.clear()
