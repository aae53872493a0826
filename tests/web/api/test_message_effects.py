"""The API's message shows its `effect`: a tool message's none/workspace/external, null for
every other role; the same from the history endpoint's rows as from the serializer."""

from __future__ import annotations

import json

import pytest

from sessions_app.selectors import branch_history, current_branch
from tests.conftest import ask
from tests.fakes.chat_server import Reply, ToolCall, ToolCalls
from web.api.serializers import MessageOut

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def used_tools(fake_llm, session, settings):
    settings.AGENT_TOOLS = ["tests.agents.custom_tools.send_message"]
    fake_llm.queue(
        ToolCalls(
            [
                ToolCall("write_file", {"path": "notes.md", "content": "hi"}),
                ToolCall("read_file", {"path": "notes.md"}),
                ToolCall("send_message", {"to": "bob", "text": "hi"}),
            ]
        ),
        Reply("Done."),
    )
    turn = ask(session, "write, read, send")
    assert turn.status == "done", turn.error
    return session


def test_each_message_shows_its_effect_tool_messages_only(api, used_tools):
    response = api.get(f"/api/v1/sessions/{used_tools.pk}/messages/")
    assert response.status_code == 200
    shown = [(m["role"], m["tool_name"], m["effect"]) for m in response.json()["results"]]
    assert shown == [
        ("user", "", None),
        ("assistant", "", None),
        ("tool", "write_file", "workspace"),
        ("tool", "read_file", "none"),
        ("tool", "send_message", "external"),
        ("assistant", "", None),
    ]


def test_the_effect_is_the_same_from_the_rows_as_from_the_serializer(api, used_tools):
    rows = api.get(f"/api/v1/sessions/{used_tools.pk}/messages/").json()["results"]
    data = MessageOut(branch_history(current_branch(used_tools)), many=True).data
    expected = json.loads(json.dumps(data, default=str))
    assert [m["effect"] for m in rows] == [m["effect"] for m in expected]


def test_bob_gets_404_on_alices_messages(bob_api, used_tools):
    response = bob_api.get(f"/api/v1/sessions/{used_tools.pk}/messages/")
    assert response.status_code == 404
