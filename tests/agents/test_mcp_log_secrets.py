"""No log line shows an MCP server's secrets (core.log_secrets): a real turn against a real MCP
server whose URL carries a token in its query and whose header carries another, a user's own
credential, and a server that is down with a secret in its URL, with every logger at DEBUG;
then every line of every record (message and traceback) is searched for each secret."""

from __future__ import annotations

import logging
import socket

import pytest

from agents.mcp.credentials import mcp_credentials_set
from agents.models import McpServer
from core.log_secrets import clean, mask_url
from sessions_app.services import session_create
from tests.conftest import ask
from tests.fakes.chat_server import Reply, ToolCall, ToolCalls
from tests.fakes.mcp_server import FakeMcpServer

pytestmark = pytest.mark.django_db(transaction=True)

HEADER_SECRET = "hdr-secret-6d41b0c2"  # noqa: S105 - a test's secret
QUERY_SECRET = "query-secret-a93f7e11"  # noqa: S105 - a test's secret
DOWN_SECRET = "down-secret-0b8c2f55"  # noqa: S105 - a test's secret
USER_SECRET = "user-secret-5e2d9a7b"  # noqa: S105 - a test's secret
SECRETS = (HEADER_SECRET, QUERY_SECRET, DOWN_SECRET, USER_SECRET)


class Everything(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture
def every_log_line():
    """Every record of every logger, at DEBUG, formatted with its traceback."""
    handler = Everything()
    manager = logging.Logger.manager
    loggers = [logging.getLogger(), *(logging.getLogger(n) for n in list(manager.loggerDict))]
    before = [(lg, lg.level, lg.disabled) for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.DEBUG)
        lg.disabled = False
        if lg is logging.getLogger() or not lg.propagate:
            lg.addHandler(handler)
    manager._clear_cache()
    try:
        yield handler.lines
    finally:
        for lg, level, disabled in before:
            lg.setLevel(level)
            lg.disabled = disabled
            lg.removeHandler(handler)
        manager._clear_cache()


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_turn_logs_neither_the_urls_query_nor_a_header_value(
    fake_llm, alice, settings, every_log_line
):
    settings.AGENT_MCP_TIMEOUT = 10
    with FakeMcpServer(token=HEADER_SECRET, echoes=True).start() as server:
        McpServer.objects.create(
            name="tracker",
            url=f"{server.url}?key={QUERY_SECRET}",
            headers={"Authorization": f"Bearer {HEADER_SECRET}"},
        )
        mine = McpServer.objects.create(
            name="mine",
            url=f"{server.url}?key={QUERY_SECRET}",
            headers={"Authorization": f"Bearer {HEADER_SECRET}"},
            user_headers=["X-User-Key"],
        )
        mcp_credentials_set(user=alice, server=mine, headers={"X-User-Key": USER_SECRET})
        McpServer.objects.create(
            name="down",
            url=f"http://127.0.0.1:{closed_port()}/mcp?token={DOWN_SECRET}",
            headers={"Authorization": f"Bearer {DOWN_SECRET}"},
        )
        fake_llm.queue(
            ToolCalls([ToolCall("tracker__whoami", {}), ToolCall("mine__leak", {})]),
            Reply("Done."),
        )
        turn = ask(session_create(owner=alice, name="s"), "who am I?")

    assert turn.status == "done"
    # The server got them (it answers nothing without the header), and the turn listed both.
    assert server.seen_authorization
    assert any(QUERY_SECRET in q for q in server.seen_query)
    text = "\n".join(every_log_line)
    assert "httpx" in text  # the HTTP client's request lines were there to search
    assert "?key=***" in text  # masked, not missing
    for secret in SECRETS:
        leaked = [line[:300] for line in every_log_line if secret in line]
        assert leaked == [], secret


def test_mask_url_hides_query_values_and_the_password_only():
    assert mask_url("https://mcp.example.com/mcp?key=abc&v=2") == (
        "https://mcp.example.com/mcp?key=***&v=***"
    )
    assert mask_url("https://user:pw@mcp.example.com:8443/x") == (
        "https://user:***@mcp.example.com:8443/x"
    )
    assert mask_url("https://mcp.example.com/mcp") == "https://mcp.example.com/mcp"


def test_clean_masks_urls_paths_with_queries_and_credential_headers():
    assert clean('POST http://h/mcp?key=s3cret "HTTP/1.1 200 OK"') == (
        'POST http://h/mcp?key=*** "HTTP/1.1 200 OK"'
    )
    assert clean('"GET /mcp?token=s3cret HTTP/1.1" 200') == '"GET /mcp?token=*** HTTP/1.1" 200'
    assert "s3cret-value" not in clean("Authorization: Bearer s3cret-value")
    assert "s3cret-value" not in clean("[(b'authorization', b'Bearer s3cret-value')]")
    assert "s3cret-value" not in clean("{'X-Api-Key': 's3cret-value'}")
