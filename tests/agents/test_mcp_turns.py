"""MCP tools through real turns: a real MCP server made with the official SDK (tests.fakes.
mcp_server, streamable HTTP) and the local model server scripted to call `<server>__<tool>`."""

from __future__ import annotations

import asyncio
import json
import socket

import pytest
from django.core.cache import cache
from django.urls import reverse

from agents.context import tokens
from agents.dispatch import drain
from agents.mcp.toolset import McpToolError, McpToolset
from agents.model import build_model
from agents.models import McpServer
from agents.rollback_agent import RollbackAgent
from checkpoints.transfer import session_export
from core.events import listen
from sessions_app.approvals import turn_approve
from sessions_app.models import Message, Turn
from sessions_app.services import session_create
from tests.conftest import ask
from tests.fakes.chat_server import Reply, ToolCall, ToolCalls
from tests.fakes.mcp_server import FakeMcpServer

pytestmark = pytest.mark.django_db

SECRET = "s3cret-token-never-shown"  # noqa: S105 - a test's secret, looked for everywhere


@pytest.fixture(scope="module")
def mcp_server():
    with FakeMcpServer(token=SECRET).start() as server:
        yield server


@pytest.fixture
def tracker(mcp_server, settings):
    """The fake server as the operator's `tracker`, with its secret header."""
    mcp_server.reset()
    mcp_server.slow_seconds = 5.0
    settings.AGENT_MCP_TIMEOUT = 10
    return McpServer.objects.create(
        name="tracker",
        url=mcp_server.url,
        headers={"Authorization": f"Bearer {SECRET}"},
        approval=["send_message"],
    )


def offered_tools(session) -> McpToolset:
    """The MCP tools a turn of this session is offered (RollbackAgent.attempt lists them)."""
    return RollbackAgent(session.pk, model=None, skip_session_creation=True).offer_mcp_tools()


def tool_messages(turn) -> list[Message]:
    return list(Message.objects.filter(branch_id=turn.branch_id, role="tool").order_by("position"))


def offered(request: dict) -> dict[str, dict]:
    return {t["function"]["name"]: t["function"] for t in request.get("tools", [])}


@pytest.mark.django_db(transaction=True)  # the approval's events are sent after commit
def test_an_mcp_tool_is_offered_with_its_schema_and_runs_once(
    fake_llm, session, tracker, mcp_server
):
    fake_llm.queue(
        ToolCalls([ToolCall("tracker__send_message", {"to": "bob", "text": "hi"})]),
        Reply("Sent."),
    )

    asked: list[dict] = []

    def owner_approves(event: dict) -> None:  # as the owner would, from another tab
        if event["type"] == "tool.approval_requested":
            asked.append(event)
            waiting = Turn.objects.get(pk=event["turn"])
            turn_approve(turn=waiting, tool_call_id=event["tool_call_id"], approved=True)

    stop = listen(session.pk, owner_approves)
    try:
        turn = ask(session, "Tell bob hi")
        drain()  # the answer queued the turn's continuation on the embedded pool
        turn.refresh_from_db()
    finally:
        stop()

    assert turn.status == "done"
    # On the server's approval list: it waited for the owner, then ran once.
    assert [e["tool_name"] for e in asked] == ["tracker__send_message"]
    assert asked[0]["args"] == {"to": "bob", "text": "hi"}
    assert mcp_server.calls == [("send_message", {"to": "bob", "text": "hi"})]
    # The secret header reached the server (it refuses every request without it).
    assert f"Bearer {SECRET}" in mcp_server.seen_authorization
    tools = offered(fake_llm.requests[0])
    send = tools["tracker__send_message"]
    assert send["description"] == "Send a message to someone (it cannot be unsent)."
    assert set(send["parameters"]["properties"]) == {"to", "text"}
    assert send["parameters"]["required"] == ["to", "text"]
    assert {"tracker__lookup", "tracker__drop_table", "tracker__explode"} <= set(tools)
    assert "create_checkpoint" in tools  # beside the built-in tools
    [message] = tool_messages(turn)
    assert message.tool_name == "tracker__send_message"
    assert message.tool_result == "sent to bob"
    assert message.effect == "external"  # not annotated read-only: nothing here can undo it
    assert not message.metadata.get("error")
    assert turn.tools_used == ["tracker__send_message"]
    assert "notices" not in turn.metadata


def test_effects_and_approvals_come_from_annotations_and_the_servers_list(
    fake_llm, session, tracker
):
    tools = offered_tools(session)

    assert tools.effects["tracker__lookup"] == "none"  # readOnlyHint
    assert tools.effects["tracker__send_message"] == "external"
    assert tools.effects["tracker__drop_table"] == "external"
    assert tools.effects["tracker__explode"] == "external"
    # destructiveHint, and the server's `approval` list; not the read-only one.
    assert {"tracker__drop_table", "tracker__send_message"} <= tools.approvals
    assert "tracker__lookup" not in tools.approvals
    assert "tracker__explode" not in tools.approvals
    assert tools.notices == []


def test_an_approval_entry_spelled_as_the_page_shows_it_matches_too(fake_llm, session, tracker):
    """Issue 36: `tracker__explode` in the list (the name the model and the page show) matched
    nothing, and the tool ran without approval."""
    McpServer.objects.filter(pk=tracker.pk).update(approval=["tracker__explode", "lookup"])
    tools = offered_tools(session)
    assert "tracker__explode" in tools.approvals
    assert "tracker__lookup" in tools.approvals  # the server's own spelling still works
    assert "tracker__send_message" not in tools.approvals


def test_a_disabled_server_offers_nothing_and_is_not_contacted(
    fake_llm, session, tracker, mcp_server
):
    McpServer.objects.filter(pk=tracker.pk).update(enabled=False)

    tools = offered_tools(session)

    assert not any(name.startswith("tracker__") for name in tools.effects)
    assert mcp_server.seen_authorization == []


def test_a_tool_that_errors_gives_the_model_an_error_result(fake_llm, session, tracker):
    fake_llm.queue(ToolCalls([ToolCall("tracker__explode", {})]), Reply("It broke."))

    turn = ask(session, "Explode")

    assert turn.status == "done"
    [message] = tool_messages(turn)
    assert message.metadata.get("error") is True
    assert message.tool_result.startswith("✗ tracker__explode failed")
    assert "Error executing tool explode" in message.tool_result
    # The model read the error as the tool's result.
    tool_reply = [m for m in fake_llm.requests[1]["messages"] if m["role"] == "tool"]
    assert tool_reply[0]["content"].startswith("✗ tracker__explode failed")
    assert turn.tools_used == []


def test_a_tool_past_the_timeout_gives_an_error_result_and_the_turn_finishes(
    fake_llm, session, tracker, mcp_server, settings
):
    fake_llm.queue(ToolCalls([ToolCall("tracker__slow", {})]), Reply("Too slow."))
    mcp_server.slow_seconds = 5.0
    agent_timeout = 1
    settings.AGENT_MCP_TIMEOUT = agent_timeout

    turn = ask(session, "Be slow")

    assert turn.status == "done"
    [message] = tool_messages(turn)
    assert message.metadata.get("error") is True
    assert message.tool_result == (
        f"✗ tracker__slow failed: it did not answer within {agent_timeout} seconds; it may "
        "have run."
    )
    assert ("slow", {}) in mcp_server.calls


def test_a_server_that_is_down_leaves_a_notice_and_the_turn_goes_on(
    fake_llm, session, tracker, log_records
):
    McpServer.objects.create(name="gone", url="http://127.0.0.1:9/mcp", headers={})
    fake_llm.queue(Reply("Fine without it."))

    turn = ask(session, "hello")

    assert turn.status == "done"
    assert turn.reply == "Fine without it."
    tools = offered(fake_llm.requests[0])
    assert not any(name.startswith("gone__") for name in tools)
    assert "tracker__lookup" in tools  # the server that answered still offers its tools
    [notice] = turn.metadata["notices"]
    assert notice.startswith("The MCP server gone is unavailable (it could not be reached)")
    assert "127.0.0.1" not in notice
    assert any(notice in r.getMessage() for r in log_records)


def test_a_server_refusing_the_headers_leaves_a_notice(fake_llm, session, tracker):
    McpServer.objects.filter(pk=tracker.pk).update(headers={"Authorization": "Bearer wrong"})
    fake_llm.queue(Reply("Hi."))

    turn = ask(session, "hello")

    assert turn.status == "done"
    assert not any(name.startswith("tracker__") for name in offered(fake_llm.requests[0]))
    [notice] = turn.metadata["notices"]
    assert notice.startswith("The MCP server tracker is unavailable (it answered")
    assert "wrong" not in notice


def test_the_secret_never_reaches_the_model_the_turn_the_logs_or_the_export(
    fake_llm, session, tracker, log_records
):
    fake_llm.queue(
        ToolCalls([ToolCall("tracker__lookup", {"query": "rollback"})]),
        Reply("Found it."),
    )

    turn = ask(session, "Look up rollback")

    assert turn.status == "done"
    assert tool_messages(turn)[0].tool_result == "definition of rollback"
    assert tool_messages(turn)[0].effect == "none"  # annotated read-only
    assert SECRET not in json.dumps(fake_llm.requests)
    assert SECRET not in json.dumps(turn.metadata)
    assert not [r for r in log_records if SECRET in r.getMessage()]
    assert SECRET not in json.dumps(session_export(session=session), default=str)


def test_tools_whose_names_do_not_fit_are_left_out_and_logged(
    fake_llm, session, tracker, log_records
):
    tools = offered_tools(session)

    names = {name for name in tools.effects if name.startswith("tracker__")}
    assert names == {
        "tracker__lookup",
        "tracker__send_message",
        "tracker__drop_table",
        "tracker__explode",
        "tracker__slow",
        "tracker__chart",
        "tracker__snapshot",
    }
    [warning] = [r.getMessage() for r in log_records if "not offered" in r.getMessage()]
    assert "bad.name" in warning
    assert "a_tool_whose_name_is_much_too_long" in warning


def test_a_server_offers_at_most_the_configured_number_of_tools(
    fake_llm, session, tracker, settings
):
    settings.AGENT_MCP_MAX_TOOLS = 2

    tools = offered_tools(session)

    assert [n for n in tools.effects if n.startswith("tracker__")] == [
        "tracker__lookup",
        "tracker__send_message",
    ]


def test_a_schema_past_the_size_limit_is_left_out(fake_llm, session, tracker, settings):
    settings.AGENT_MCP_MAX_SCHEMA_CHARS = 80  # the tools without arguments fit, not the others

    tools = offered_tools(session)

    names = {n for n in tools.effects if n.startswith("tracker__")}
    assert names == {"tracker__explode", "tracker__slow", "tracker__chart", "tracker__snapshot"}


def test_a_long_result_is_cut_and_says_so(fake_llm, session, tracker, settings):
    settings.AGENT_MCP_MAX_RESULT_CHARS = 10
    fake_llm.queue(ToolCalls([ToolCall("tracker__lookup", {"query": "x" * 50})]), Reply("ok"))

    turn = ask(session, "Look it up")

    [message] = tool_messages(turn)
    assert message.tool_result == "definition\n… (the result was cut at 10 characters)"


def test_a_server_gone_after_the_listing_gives_an_error_result(fake_llm, session, settings):
    settings.AGENT_MCP_TIMEOUT = 10
    with FakeMcpServer(token=SECRET).start() as short_lived:
        McpServer.objects.create(
            name="brief", url=short_lived.url, headers={"Authorization": f"Bearer {SECRET}"}
        )
        tools = offered_tools(session)
        assert "brief__send_message" in tools.effects
    # The server stopped between the listing and the call: the call cannot connect.
    [function] = [f for f in tools.functions if getattr(f, "name", "") == "brief__lookup"]
    with pytest.raises(McpToolError, match=r"^✗ brief__lookup failed: it could not be reached"):
        function.entrypoint(query="x")


def test_the_page_shows_the_notice_and_an_mcp_result_as_escaped_text(
    fake_llm, session, tracker, client, alice
):
    McpServer.objects.create(name="gone", url="http://127.0.0.1:9/mcp")
    fake_llm.queue(
        ToolCalls([ToolCall("tracker__lookup", {"query": "<script>alert(1)</script>"})]),
        Reply("Done."),
    )
    turn = ask(session, "Look it up")
    assert turn.status == "done"
    client.force_login(alice)

    html = client.get(reverse("chat:session", args=[session.pk])).content.decode()

    assert 'data-testid="turn-notice"' in html
    assert "The MCP server gone is unavailable" in html
    assert "<script>alert(1)" not in html
    assert "definition of &lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_a_server_that_never_answers_the_listing_is_left_out_after_the_timeout(
    fake_llm, session, settings
):
    settings.AGENT_MCP_TIMEOUT = 1
    with socket.socket() as silent:  # accepts connections (the backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        McpServer.objects.create(name="silent", url=f"http://127.0.0.1:{port}/mcp")

        tools = offered_tools(session)

    assert not any(name.startswith("silent__") for name in tools.effects)
    assert tools.notices == [
        "The MCP server silent is unavailable (it did not answer within 1 seconds); its tools "
        "were left out of this turn."
    ]


def test_a_second_turn_offers_each_tool_once_with_the_new_approval_list(
    fake_llm, session, tracker, mcp_server
):
    agent = RollbackAgent(session.pk, model=build_model(), skip_session_creation=True)
    assert not any(n.startswith("tracker__") for n in agent.tool_effects)  # none before a turn
    fake_llm.queue(
        Reply("one"),
        ToolCalls([ToolCall("tracker__send_message", {"to": "bob", "text": "hi"})]),
        Reply("two"),
    )

    agent.run("first")
    first = set(offered(fake_llm.requests[0]))
    McpServer.objects.filter(pk=tracker.pk).update(approval=[], enabled=True)
    McpServer.objects.create(name="gone", url="http://127.0.0.1:9/mcp")
    agent.run("second")
    second = offered(fake_llm.requests[1])

    assert set(second) == first  # the same tools, once each (not added twice)
    assert len(fake_llm.requests[1]["tools"]) == len(second)
    # The new approval list: the call ran without waiting.
    assert agent.last_turn.status == "done"
    assert mcp_server.calls == [("send_message", {"to": "bob", "text": "hi"})]
    assert agent.last_turn.metadata["notices"][0].startswith("The MCP server gone")
    # The turns' MCP tools were theirs: the agent keeps none of them.
    kept = [*agent.tool_effects, *agent.tool_approvals, *agent.tool_timeouts]
    assert not any(n.startswith("tracker__") for n in kept)
    assert agent.turn_state is None


def test_an_image_whose_bytes_are_not_an_image_is_a_note_for_the_model(fake_llm, session, tracker):
    fake_llm.queue(ToolCalls([ToolCall("tracker__chart", {})]), Reply("A chart."))

    turn = ask(session, "Draw it")

    [message] = tool_messages(turn)
    assert message.tool_result == (
        "A chart of the week:\n"
        "[image (image/png) left out: its bytes are not a PNG, JPEG, GIF or WebP]"
    )
    assert not message.metadata.get("error")
    assert "images" not in message.metadata


def test_a_listing_from_a_thread_that_runs_an_event_loop_uses_a_loop_of_its_own(tracker):
    from agents.mcp.client import Endpoint
    from agents.mcp.listing import list_tools

    endpoint = Endpoint.of(tracker)

    async def inside_a_loop():
        return list_tools([endpoint])  # synchronous code called on a running loop

    [tools] = asyncio.run(inside_a_loop())

    assert "lookup" in {tool.name for tool in tools}
    assert SECRET not in repr(endpoint)


def test_the_window_counts_the_tools_an_mcp_server_offers(fake_llm, session, tracker, alice):
    """The servers' tool schemas go with every request: fitting the window counts them like the
    instructions (a small window then keeps less history instead of being overflowed)."""
    offered = offered_tools(session).schema_chars
    assert offered > 500
    fake_llm.queue(Reply("One."))
    with_tools = ask(session, "hello")
    McpServer.objects.filter(pk=tracker.pk).update(enabled=False)
    cache.clear()  # what the first turn taught of the server's count: both count alike
    other = session_create(owner=alice, name="no tools")
    fake_llm.queue(Reply("Two."))
    without = ask(other, "hello")

    # The same message on an empty history: the difference is the tools' schemas, as tokens.
    counted = with_tools.metadata["context"]["tokens"] - without.metadata["context"]["tokens"]
    assert abs(counted - tokens(offered)) <= 1  # one rounding each
