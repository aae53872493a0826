"""The MCP tools a turn offers are made once per process, server and user (agents.mcp.toolset's
`_offers`): a later turn offers the very same callables, so what agno works out of a callable
(kept on it) is not worked out again at every turn (measured: 4 servers' 28 tools cost a turn
some 11 ms of CPU more without it); a change of the server's row makes new ones. A call reaches
the MCP sessions of the turn that makes it (two turns at once on two threads each use their
own), and never runs outside a turn."""

from __future__ import annotations

import threading

import pytest

from agents.mcp.toolset import McpToolset
from agents.models import McpServer
from agents.rollback_agent import RollbackAgent
from sessions_app.services import session_create
from tests.fakes.mcp_server import FakeMcpServer

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN = "offers-token"  # noqa: S105 - a test server's token


@pytest.fixture(scope="module")
def http_server():
    with FakeMcpServer(token=TOKEN).start() as server:
        yield server


@pytest.fixture
def tracker(http_server):
    return McpServer.objects.create(
        name="tracker", url=http_server.url, headers={"Authorization": f"Bearer {TOKEN}"}
    )


def offered(session) -> McpToolset:
    return RollbackAgent(session.pk, model=None, skip_session_creation=True).offer_mcp_tools()


def entrypoints(toolset: McpToolset) -> dict[str, object]:
    return {f.name: f.entrypoint for f in toolset.functions}


def test_a_later_turn_offers_the_same_callables_until_the_row_changes(session, tracker):
    offered(session).close()  # the turn that lists the server (and stores its catalogue)
    first, second = offered(session), offered(session)
    assert "tracker__lookup" in entrypoints(first)
    assert entrypoints(second) == entrypoints(first)  # the same objects (== is identity here)
    assert "tracker__send_message" not in second.approvals

    tracker.approval = ["send_message"]
    tracker.timeout = 7
    tracker.save()
    third = offered(session)

    assert set(entrypoints(third)) == set(entrypoints(first))
    assert not set(entrypoints(third).values()) & set(entrypoints(first).values())
    assert "tracker__send_message" in third.approvals
    assert third.timeouts["tracker__lookup"] == 7 + 3.5


def test_two_users_get_callables_of_their_own(session, tracker, bob):
    offered(session).close()
    bobs = offered(session_create(owner=bob, name="bob's"))
    alices = offered(session)
    assert not set(entrypoints(bobs).values()) & set(entrypoints(alices).values())


def test_two_turns_at_once_call_through_their_own_sessions(alice, tracker):
    sessions = [session_create(owner=alice, name=f"s{i}") for i in range(2)]
    offered(sessions[0]).close()  # the catalogue listed once, before the turns
    both_offered = threading.Barrier(2, timeout=30)
    seen: dict[int, tuple[object, str, list[int]]] = {}
    errors: list[BaseException] = []

    def turn(n: int) -> None:
        try:
            toolset = offered(sessions[n])
            both_offered.wait()  # each thread offered its turn's tools before either calls
            result = entrypoints(toolset)["tracker__lookup"](query=f"turn {n}")
            seen[n] = (toolset.sessions, str(result), list(toolset.sessions.held))
            toolset.close()
        except BaseException as exc:  # reported below, on the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=turn, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert not errors, errors
    (one, result_one, held_one), (two, result_two, held_two) = seen[0], seen[1]
    assert one is not two
    assert "turn 0" in result_one
    assert "turn 1" in result_two
    assert held_one == [tracker.pk]  # each call opened its own turn's session
    assert held_two == [tracker.pk]


def test_a_call_outside_any_turn_is_refused_clearly(session, tracker):
    toolset = offered(session)
    call = entrypoints(toolset)["tracker__lookup"]
    toolset.close()  # the turn ended

    with pytest.raises(Exception, match="called outside a turn"):
        call(query="late")
