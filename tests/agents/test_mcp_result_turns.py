"""An MCP tool's image and resources through real turns: a real MCP server (tests.fakes.
mcp_server, `snapshot`) and the local model server, which records what the model received."""

from __future__ import annotations

import base64
import json

import pytest

from agents.mcp.vision import MEDIA_NOTE, sees_images
from agents.models import McpServer
from agents.worker import run_turn
from sessions_app.models import Message
from sessions_app.turns import turn_cancel, turn_start
from sessions_app.turns.paused import paused_state
from tests.agents.test_approval_pause import answer
from tests.agents.test_stopped_turns import stop_on
from tests.conftest import ask, run_hearing
from tests.fakes.chat_server import Reply, ToolCall, ToolCalls
from tests.fakes.mcp_server import FakeMcpServer, tiny_png

pytestmark = pytest.mark.django_db

TOKEN = "results-token"  # noqa: S105 - a test server's token
PNG_URL = "data:image/png;base64," + base64.b64encode(tiny_png()).decode()


@pytest.fixture(scope="module")
def mcp_server():
    with FakeMcpServer(token=TOKEN).start() as server:
        yield server


@pytest.fixture
def camera(mcp_server, settings):
    mcp_server.reset()
    settings.AGENT_MCP_TIMEOUT = 10
    settings.AGENT_VISION_MODELS = ["fake-*"]
    return McpServer.objects.create(
        name="camera", url=mcp_server.url, headers={"Authorization": f"Bearer {TOKEN}"}
    )


def snapshot_turn(fake_llm, session, text="Show me the snapshot"):
    fake_llm.queue(ToolCalls([ToolCall("camera__snapshot", {})]), Reply("A red square."))
    return ask(session, text)


def image_urls(messages: list[dict]) -> list[str]:
    return [
        part["image_url"]["url"]
        for m in messages
        if isinstance(m.get("content"), list)
        for part in m["content"]
        if part.get("type") == "image_url"
    ]


def test_the_image_reaches_a_vision_model_after_the_tool_result(fake_llm, session, camera):
    turn = snapshot_turn(fake_llm, session)

    sent = fake_llm.messages(1)
    [tool_at] = [i for i, m in enumerate(sent) if m["role"] == "tool"]
    tool, carrier = sent[tool_at], sent[tool_at + 1]
    assert "[image img-" in tool["content"]
    assert "image_url" not in json.dumps(tool)  # the API takes no image in a tool message
    assert carrier["role"] == "user"
    assert carrier["content"][0] == {"type": "text", "text": MEDIA_NOTE}
    assert image_urls([carrier]) == [PNG_URL]
    turn.refresh_from_db()
    assert turn.status == "done"


def test_resources_are_readable_and_named_for_the_model(fake_llm, session, camera):
    snapshot_turn(fake_llm, session)

    [tool] = [m for m in fake_llm.messages(1) if m["role"] == "tool"]
    lines = tool["content"].splitlines()
    assert lines[0] == "The snapshot:"
    assert lines[2:] == [
        "[resource file:///notes.txt (text/plain)]",
        "Meeting at noon",
        "[binary resource file:///data.bin (application/octet-stream), 4 bytes, not shown]",
        "[resource link report: https://reports.example/q3.pdf (application/pdf), not fetched]",
    ]


def test_the_image_is_stored_with_its_tool_message_and_agnos_carrier_is_not(
    fake_llm, session, camera
):
    turn = snapshot_turn(fake_llm, session)

    rows = list(Message.objects.filter(branch_id=turn.branch_id).order_by("position"))
    assert [m.role for m in rows] == ["user", "assistant", "tool", "assistant"]
    [image] = rows[2].metadata["images"]
    assert image["mime"] == "image/png"
    assert base64.b64decode(image["data"]) == tiny_png()
    assert f"[image {image['id']}: image/png" in rows[2].tool_result
    assert all(MEDIA_NOTE not in m.content for m in rows)


def test_a_later_turn_gives_the_model_the_image_again(fake_llm, session, camera):
    snapshot_turn(fake_llm, session)
    fake_llm.queue(Reply("Still red."))

    ask(session, "What colour was it?")

    later = fake_llm.messages(2)
    assert image_urls(later) == [PNG_URL]
    roles = [m["role"] for m in later]
    assert roles[roles.index("tool") + 1] == "user"  # right after its tool result
    assert roles[-1] == "user"
    assert later[-1]["content"] == "What colour was it?"


def test_a_model_not_listed_as_seeing_images_gets_the_text_only(
    fake_llm, session, camera, settings
):
    settings.AGENT_VISION_MODELS = ["gpt-4o*"]
    turn = snapshot_turn(fake_llm, session)
    fake_llm.queue(Reply("ok"))
    ask(session, "And now?")

    for i in (1, 2):
        sent = fake_llm.messages(i)
        assert image_urls(sent) == []
        assert all(m.get("content") != MEDIA_NOTE for m in sent)
    [tool] = Message.objects.filter(branch_id=turn.branch_id, role="tool")
    assert len(tool.metadata["images"]) == 1  # the page still shows it


def test_the_demo_model_never_sees_images(settings):
    from agents.demo_model import DemoModel

    settings.AGENT_VISION_MODELS = ["*"]
    assert not sees_images(DemoModel())


def test_only_the_last_images_of_the_history_ride_again(session):
    from agents.history import to_agno
    from agents.mcp.vision import REPLAY_IMAGES
    from sessions_app.models import Branch
    from sessions_app.services import message_append

    branch = Branch.objects.get(session=session, is_current=True)
    png = base64.b64encode(tiny_png()).decode()
    for n in range(3):  # three calls of two images each: six in all
        message_append(branch=branch, role="user", content=f"picture {n}")
        call = {"id": f"c{n}", "type": "function", "function": {"name": "cam", "arguments": "{}"}}
        message_append(branch=branch, role="assistant", tool_calls=[call])
        images = [{"id": f"img-{n}-{i}", "mime": "image/png", "data": png} for i in (0, 1)]
        message_append(
            branch=branch,
            role="tool",
            tool_name="cam",
            tool_call_id=f"c{n}",
            tool_result="two",
            metadata={"images": images},
        )
        message_append(branch=branch, role="assistant", content="seen")
    history = list(Message.objects.filter(branch=branch).order_by("position"))

    sent = to_agno(history, images=REPLAY_IMAGES)

    carriers = [m for m in sent if m.images]
    assert [[i.id for i in m.images] for m in carriers] == [
        ["img-1-0", "img-1-1"],
        ["img-2-0", "img-2-1"],
    ]
    assert all(sent[sent.index(m) - 1].role == "tool" for m in carriers)
    assert not any(m.images for m in to_agno(history))  # a model that sees no images


@pytest.mark.parametrize("then", ["approved", "stopped"])
def test_an_image_from_before_a_pause_stays_with_its_result(fake_llm, session, camera, then):
    """A batch whose first call returns an image and whose second waits for approval: the
    pause saves the image with the result (not a dump of agno's carrier), and the approved
    turn's continuation, or the Stop of the paused turn, stores it with its tool message; the
    continuation gives it to the model."""
    from agents.worker import run_turn
    from sessions_app.turns import turn_cancel, turn_start
    from sessions_app.turns.paused import paused_state

    fake_llm.queue(
        ToolCalls(
            [
                ToolCall("camera__snapshot", {}, id="call_snap"),
                ToolCall("camera__drop_table", {"table": "old"}, id="call_drop"),
            ]
        )
    )
    turn = turn_start(session=session, message="snapshot, then drop old")
    run_turn(turn.pk)
    turn.refresh_from_db()
    assert turn.status == "awaiting_approval"
    [saved] = paused_state(turn.metadata)["results"].values()
    assert saved[1] is False
    assert "ToolResult" not in saved[0]  # the text, not a dump of agno's carrier
    assert base64.b64decode(saved[2][0]["data"]) == tiny_png()

    if then == "approved":
        fake_llm.queue(Reply("Dropped."))
        answer(turn, True, resume=False)  # the continuation is this test's to run
        run_turn(turn.pk)  # the continuation, as a worker runs it
        assert image_urls(fake_llm.messages(-1)) == [PNG_URL]
    else:
        turn_cancel(turn=turn)
    turn.refresh_from_db()
    assert turn.status == ("done" if then == "approved" else "cancelled")
    [snap] = Message.objects.filter(branch_id=turn.branch_id, tool_call_id="call_snap")
    [image] = snap.metadata["images"]
    assert base64.b64decode(image["data"]) == tiny_png()
    assert f"[image {image['id']}:" in snap.tool_result


def snap_image(turn) -> bytes:
    """The bytes of the image stored with the turn's `call_snap` result."""
    [snap] = Message.objects.filter(branch_id=turn.branch_id, tool_call_id="call_snap")
    [image] = snap.metadata["images"]
    assert f"[image {image['id']}:" in snap.tool_result
    return base64.b64decode(image["data"])


@pytest.mark.django_db(transaction=True)  # a Stop while the turn runs: its events after commit
def test_a_turn_stopped_after_a_tools_image_keeps_the_image_with_its_result(
    fake_llm, session, camera
):
    fake_llm.queue(
        ToolCalls([ToolCall("camera__snapshot", {}, id="call_snap")]),
        Reply(" ".join(f"word{i}" for i in range(40)), delay=0.3),
    )
    turn = turn_start(session=session, message="show me, then talk")

    run_hearing(turn, stop_on(turn, "message.delta"))

    assert turn.status == "cancelled"
    assert snap_image(turn) == tiny_png()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("then", ["approved", "stopped", "stopped while it runs", "paused again"])
def test_an_image_from_a_batch_before_the_pause_stays_with_its_result(
    fake_llm, session, camera, then
):
    """The batch before the one that paused returned an image: the pause saves it with that
    result; the continuation gives it to the model again and stores it with the result, as
    does a Stop of the paused turn, a Stop of its continuation, and a second pause."""
    fake_llm.queue(
        ToolCalls([ToolCall("camera__snapshot", {}, id="call_snap")]),
        ToolCalls([ToolCall("camera__drop_table", {"table": "old"}, id="call_drop")]),
    )
    turn = turn_start(session=session, message="snapshot, then drop old")
    run_turn(turn.pk)
    turn.refresh_from_db()
    assert turn.status == "awaiting_approval"
    [saved] = [m for m in paused_state(turn.metadata)["messages"] if m["role"] == "tool"]
    assert base64.b64decode(saved["images"][0]["data"]) == tiny_png()

    if then == "stopped":
        turn_cancel(turn=turn)
        assert snap_image(turn) == tiny_png()
        return
    fake_llm.queue(
        {
            "approved": Reply("Dropped."),
            "stopped while it runs": Reply(" ".join(f"w{i}" for i in range(40)), delay=0.3),
            "paused again": ToolCalls(
                [ToolCall("camera__drop_table", {"table": "older"}, id="call_drop_2")]
            ),
        }[then]
    )
    answer(turn, True, resume=False)  # the continuation is this test's to run
    stops = then == "stopped while it runs"
    # The continuation, as a worker runs it (Stopped, as from another tab, as it answers).
    run_hearing(turn, stop_on(turn, "message.delta") if stops else [].append)

    assert image_urls(fake_llm.messages(-1)) == [PNG_URL]  # after the snapshot's result
    if then == "paused again":
        assert turn.status == "awaiting_approval"
        [saved] = [m for m in paused_state(turn.metadata)["messages"] if m.get("images")]
        assert saved["tool_call_id"] == "call_snap"
        turn_cancel(turn=turn)
    else:
        assert turn.status == ("done" if then == "approved" else "cancelled")
    assert snap_image(turn) == tiny_png()
