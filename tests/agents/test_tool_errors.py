"""A tool that raises: the model and the page get its exception's type and a bounded, scrubbed
message; the server's log gets the full text (issue 36)."""

from __future__ import annotations

import logging

import pytest

from agents.tool_errors import TOOL_ERROR_CHARS, failure_text, scrubbed
from sessions_app.selectors import branch_history, current_branch
from tests.conftest import ask
from tests.fakes.chat_server import Reply, ToolCall, ToolCalls

SECRETS = ("hunter2", "sk-live-4f9a8b7c6d5e4f3a2b1c")


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("GET https://bob:s3cret@example.com/x", "GET https://[hidden]@example.com/x"),
        ("bad api_key=abc123 given", "bad api_key=[hidden] given"),
        ('password: "two words"', "password: [hidden]"),
        ("https://h/x?token=abc&page=2", "https://h/x?token=[hidden]&page=2"),
        ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.x", "Authorization: Bearer [hidden]"),
        ("key ghp_0123456789abcdefABCDEF leaked", "key [hidden] leaked"),
        ("hash " + "a1" * 20, "hash [hidden]"),
        ("no such file: notes.md\n  on line 2", "no such file: notes.md on line 2"),
    ],
)
def test_what_looks_like_a_secret_is_hidden(text, shown):
    assert scrubbed(text) == shown


def test_a_long_message_is_cut_and_a_bare_exception_shows_its_type():
    assert len(scrubbed("word " * 500)) == TOOL_ERROR_CHARS
    assert failure_text(KeyError()) == "✗ KeyError"
    assert failure_text(ValueError("bad value")) == "✗ ValueError: bad value"


@pytest.mark.django_db(transaction=True)
def test_a_custom_tool_that_raises_tells_the_model_and_the_page_nothing_secret(
    fake_llm, session, settings, caplog
):
    settings.AGENT_TOOLS = ["tests.agents.custom_tools.log_in"]
    fake_llm.queue(
        ToolCalls([ToolCall("log_in", {"service": "billing"}, id="call_l")]),
        Reply("It failed."),
    )
    with caplog.at_level(logging.ERROR, logger="agents.tools"):
        turn = ask(session, "log in to billing")
    assert turn.status == "done"
    assert turn.tools_used == []  # it raised: no tool ran to an end
    (tool,) = [m for m in branch_history(current_branch(session)) if m.role == "tool"]
    assert tool.metadata == {"error": True}
    assert tool.tool_result == (
        "✗ RuntimeError: could not log in to billing at postgres://[hidden]@db.internal/prod "
        "with api_key=[hidden]"
    )
    sent = fake_llm.messages(-1)[-1]
    assert (sent["role"], sent["tool_call_id"]) == ("tool", "call_l")
    for secret in SECRETS:
        assert secret not in sent["content"]
        assert secret not in tool.content
        assert secret not in turn.reply
    # The operator's log keeps the whole text, with its traceback.
    logged = [r for r in caplog.records if r.name == "agents.tools"]
    assert any(r.exc_info and "hunter2" in str(r.exc_info[1]) for r in logged)
