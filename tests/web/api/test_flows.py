"""Whole flows through the API as an integration would drive it, with real commits (turns run
when their transaction commits) and the real ASGI application for the event stream."""

from __future__ import annotations

import json
import threading

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from rollback_site.asgi import application
from tests.fakes.chat_server import Reply, ToolCall, ToolCalls
from tests.web.api.conftest import bearer_client

pytestmark = pytest.mark.django_db(transaction=True)


def _contents(server, i=-1):
    return [(m["role"], m.get("content") or "") for m in server.messages(i)[1:]]


def test_wait_true_answers_201_with_the_finished_turn(alice, fake_llm, inline_turns):
    api = bearer_client(alice)
    session = api.post("/api/v1/sessions/", {"name": "s"}, format="json").json()
    fake_llm.queue(Reply("Right away."))
    response = api.post(
        f"/api/v1/sessions/{session['id']}/turns/",
        {"message": "hi", "wait": True},
        format="json",
    )
    assert response.status_code == 201
    turn = response.json()
    assert turn["status"] == "done"
    assert turn["reply"] == "Right away."
    assert turn["finished_at"] is not None


def test_after_a_restore_the_next_turn_sends_exactly_the_restored_history(
    alice, fake_llm, inline_turns
):
    api = bearer_client(alice)
    sid = api.post("/api/v1/sessions/", {"name": "s"}, format="json").json()["id"]

    def ask(text, reply):
        fake_llm.queue(Reply(reply))
        body = {"message": text, "wait": True}
        turn = api.post(f"/api/v1/sessions/{sid}/turns/", body, format="json").json()
        assert turn.get("status") == "done", turn

    ask("what are variables?", "Names for values.")
    cp = api.post(f"/api/v1/sessions/{sid}/checkpoints/", {"name": "vars"}, format="json").json()
    ask("and functions?", "Reusable code.")
    restored = api.post(
        f"/api/v1/checkpoints/{cp['id']}/restore/", {"mode": "branch"}, format="json"
    )
    assert restored.status_code == 200
    ask("what next?", "Loops.")
    assert _contents(fake_llm) == [
        ("user", "what are variables?"),
        ("assistant", "Names for values."),
        ("user", "what next?"),
    ]
    # And after a rewind of the new branch to the same point.
    cp2 = api.post(f"/api/v1/sessions/{sid}/checkpoints/", {"name": "loops"}, format="json").json()
    ask("and classes?", "Blueprints.")
    rewind = api.post(
        f"/api/v1/checkpoints/{cp2['id']}/restore/", {"mode": "rewind"}, format="json"
    )
    assert rewind.status_code == 200
    ask("recap?", "Sure.")
    assert [c for _, c in _contents(fake_llm)] == [
        "what are variables?",
        "Names for values.",
        "what next?",
        "Loops.",
        "recap?",
    ]
    messages = api.get(f"/api/v1/sessions/{sid}/messages/").json()
    assert [m["content"] for m in messages["results"]][-2:] == ["recap?", "Sure."]


def test_the_event_stream_of_a_tool_turn_with_a_bearer_key(alice, fake_llm, inline_turns):
    api = bearer_client(alice)
    sid = api.post("/api/v1/sessions/", {"name": "s"}, format="json").json()["id"]
    fake_llm.queue(
        ToolCalls([ToolCall("write_file", {"path": "a.md", "content": "42"})]),
        Reply("It is 42.", chunk_size=1),
    )
    headers = [(b"authorization", f"Bearer {api.secret}".encode())]

    def post_turn():
        body = {"message": "6*7?", "wait": True}
        return api.post(f"/api/v1/sessions/{sid}/turns/", body, format="json").json()

    async def run():
        socket = WebsocketCommunicator(application, f"/ws/v1/sessions/{sid}/", headers=headers)
        connected, _ = await socket.connect(timeout=5)
        assert connected
        turn = await database_sync_to_async(post_turn)()
        events = []
        while not events or events[-1]["type"] not in ("turn.finished", "turn.failed"):
            events.append(json.loads(await socket.receive_from(timeout=10)))
        await socket.disconnect(timeout=10)
        return turn, events

    turn, events = async_to_sync(run)()
    kinds = [e["type"] for e in events]
    assert kinds[0] == "turn.started"
    assert kinds[-1] == "turn.finished"
    order = [kinds.index(k) for k in ("tool.started", "tool.finished", "message.delta")]
    assert order == sorted(order)
    assert kinds.index("checkpoint.created") < kinds.index("turn.finished")
    finished = events[-1]
    assert finished["turn"] == turn["id"]
    assert finished["checkpoint"] == turn["checkpoint"]
    assert "".join(e["delta"] for e in events if e["type"] == "message.delta") == "It is 42."
    tool = next(e for e in events if e["type"] == "tool.finished")
    assert tool["tool"] == "write_file"
    assert tool["result"] == "✓ Created a.md (2 bytes)."


def test_the_event_stream_refuses_another_users_key_and_a_bad_key(alice, bob):
    api = bearer_client(alice)
    sid = api.post("/api/v1/sessions/", {"name": "s"}, format="json").json()["id"]
    bobs = bearer_client(bob)

    async def run():
        for header in (f"Bearer {bobs.secret}", "Bearer rbk_wrong", "Bearer"):
            socket = WebsocketCommunicator(
                application,
                f"/ws/v1/sessions/{sid}/",
                headers=[(b"authorization", header.encode())],
            )
            connected, _ = await socket.connect(timeout=5)
            assert not connected, header

    async_to_sync(run)()


def test_the_turn_says_how_it_ended_and_lists_only_tools_that_ran(
    alice, fake_llm, inline_turns, settings
):
    settings.AGENT_MAX_TOOL_CALLS = 2
    api = bearer_client(alice)
    sid = api.post("/api/v1/sessions/", {"name": "s"}, format="json").json()["id"]

    def turn(text):
        body = {"message": text, "wait": True}
        return api.post(f"/api/v1/sessions/{sid}/turns/", body, format="json").json()

    fake_llm.queue(Reply("half a", finish=False))
    assert turn("one")["finish_reason"] == "interrupted"
    fake_llm.queue(
        ToolCalls([ToolCall("no_such_tool", {}), ToolCall("calculate", {"expression": "1+1"})]),
        ToolCalls([ToolCall("calculate", {"expression": "2+2"})]),
    )
    limited = turn("two")
    assert limited["finish_reason"] == "tool_limit"
    assert limited["tools_used"] == ["calculate"]
    # The model asked for two calls (the limit; the unknown tool counts) in the first request of
    # turn two: it got no second one.
    assert len(fake_llm.requests) == 2


def test_wait_true_is_woken_by_the_turn_end_event_not_a_poll(
    alice, fake_llm, settings, celery_eager
):
    # The turn runs on the embedded pool (another thread); the request must return when its
    # end event arrives. The poll is an hour away, so only the event can end the wait in time.
    settings.API_TURN_WAIT_SECONDS = 3600
    settings.API_TURN_WAIT_POLL_SECONDS = 3600
    api = bearer_client(alice)
    session = api.post("/api/v1/sessions/", {"name": "s"}, format="json").json()
    fake_llm.queue(Reply("Woken by the event.", delay=0.05))
    answers: list = []

    def post() -> None:
        answers.append(
            api.post(
                f"/api/v1/sessions/{session['id']}/turns/",
                {"message": "hi", "wait": True},
                format="json",
            )
        )

    request = threading.Thread(target=post, daemon=True)
    request.start()
    request.join(60)
    assert not request.is_alive(), "the wait did not wake on turn.finished"
    assert answers[0].status_code == 201
    assert answers[0].json()["status"] == "done"
    assert answers[0].json()["reply"] == "Woken by the event."
