"""An MCP server's own credentials never come back out of it: a real MCP server (tests.fakes.
mcp_server, streamable HTTP) that echoes its Authorization header, its bare token and its URL's
query in a result (`whoami`) and in an error (`leak`). The stored messages, the events, the
page, the export and the model's requests hold none of them; `[redacted]` stands in their place."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest
from django.urls import reverse

from agents.mcp.scrub import MARKER, MIN_SECRET, Scrubber, secrets_of
from agents.models import McpServer
from checkpoints.transfer import session_export
from sessions_app.models import Message
from tests.conftest import ask
from tests.fakes.chat_server import Reply, ToolCall, ToolCalls
from tests.fakes.mcp_server import FakeMcpServer

pytestmark = pytest.mark.django_db

HEADER_TOKEN = "hdr-s3cret-4f9a2c"  # noqa: S105 - a test's secret, looked for everywhere
URL_TOKEN = "url/s3cret+7b1e"  # noqa: S105 - sent percent-encoded: url%2Fs3cret%2B7b1e
SECRETS = [HEADER_TOKEN, URL_TOKEN, quote(URL_TOKEN, safe=""), quote(URL_TOKEN, safe="").lower()]


@pytest.fixture(scope="module")
def echo_server():
    with FakeMcpServer(token=HEADER_TOKEN, echoes=True).start() as server:
        yield server


@pytest.fixture
def echo(echo_server, settings):
    echo_server.reset()
    settings.AGENT_MCP_TIMEOUT = 10
    return McpServer.objects.create(
        name="echo",
        url=f"{echo_server.url}?key={quote(URL_TOKEN, safe='')}&v=2",
        headers={"Authorization": f"Bearer {HEADER_TOKEN}"},
    )


def leaked(text: str) -> list[str]:
    return [s for s in SECRETS if s in text]


def test_a_servers_credentials_echoed_in_a_result_and_an_error_are_redacted_everywhere(
    fake_llm, session, echo, echo_server, client, alice, log_records
):
    fake_llm.queue(
        ToolCalls([ToolCall("echo__whoami", {})]),
        ToolCalls([ToolCall("echo__leak", {})]),
        Reply("Done."),
    )
    events: list[dict] = []

    turn = ask(session, "Who am I?", events)

    assert turn.status == "done"
    # The server really echoed them: its requests carried both.
    assert f"Bearer {HEADER_TOKEN}" in echo_server.seen_authorization
    assert f"key={quote(URL_TOKEN, safe='')}&v=2" in echo_server.seen_query
    whoami, leak = Message.objects.filter(branch_id=turn.branch_id, role="tool").order_by(
        "position"
    )
    # Every form is gone; the short `v=2` (under MIN_SECRET) is left as it was.
    assert whoami.tool_result == (
        f"you sent authorization {MARKER}; token {MARKER}; query key={MARKER}&v=2; "
        f"{{'key': '{MARKER}', 'v': '2'}}"
    )
    assert leak.metadata.get("error") is True
    assert leak.tool_result.startswith("✗ echo__leak failed: ")
    assert f"refused authorization {MARKER}; token {MARKER}" in leak.tool_result

    stored = list(
        Message.objects.filter(branch_id=turn.branch_id).values(
            "content", "tool_result", "tool_args", "metadata"
        )
    )
    assert leaked(json.dumps(stored, default=str)) == []
    assert leaked(json.dumps(turn.metadata, default=str)) == []
    assert leaked(json.dumps(events, default=str)) == []  # what the sockets stream
    # The model's next requests carried the results: scrubbed.
    tool_replies = [m for r in fake_llm.requests for m in r["messages"] if m["role"] == "tool"]
    assert len(tool_replies) >= 2
    assert leaked(json.dumps(fake_llm.requests)) == []
    assert leaked(json.dumps(session_export(session=session), default=str)) == []
    # The app's own log lines (the HTTP client's request line, which names the URL, is not ours).
    ours = [r for r in log_records if r.name.split(".")[0] in ("agents", "agno", "rollback")]
    assert any("echo__leak failed" in r.getMessage() for r in ours)
    assert not [r for r in ours if leaked(r.getMessage())]
    client.force_login(alice)
    html = client.get(reverse("chat:session", args=[session.pk])).content.decode()
    assert "you sent authorization" in html
    assert leaked(html) == []


# --- what counts as a secret, and its variants ---------------------------------------------------


def test_the_secrets_of_a_server_are_its_header_values_query_values_and_password():
    found = secrets_of(
        "https://bob:pa55word-x@mcp.example/api?token=tok-abcdef&v=2&lang=en",
        {"Authorization": "Basic Ym9iOmJhc2ljLXB3ZA==", "X-Team": "team-42-alpha"},
    )
    assert "Basic Ym9iOmJhc2ljLXB3ZA==" in found
    assert "Ym9iOmJhc2ljLXB3ZA==" in found
    assert "bob:basic-pwd" in found  # Basic, decoded
    assert "basic-pwd" in found
    assert "team-42-alpha" in found
    assert "tok-abcdef" in found
    assert "pa55word-x" in found
    assert "bob:pa55word-x" in found
    # Shorter than MIN_SECRET: ordinary words and numbers, not scrubbed.
    assert MIN_SECRET == 6
    assert "2" not in found
    assert "en" not in found


def test_every_occurrence_and_its_encoded_forms_are_redacted():
    scrub = Scrubber(["a b/c+d=e", "json"])
    text = 'a b/c+d=e, a%20b%2Fc%2Bd%3De, a+b%2Fc%2Bd%3De, a%20b%2fc%2bd%3de, "a b/c+d=e" json'
    assert scrub(text) == f'{MARKER}, {MARKER}, {MARKER}, {MARKER}, "{MARKER}" json'


def test_a_server_without_credentials_changes_nothing():
    scrub = Scrubber(secrets_of("http://mcp.example/api", {}))
    assert scrub("anything at all") == "anything at all"
