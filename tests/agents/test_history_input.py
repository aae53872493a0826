"""The stored history as agno gets it for a run: at each run's end agno serialises the whole
input (RunInput.input_content_string), and our messages make it the same text without agno's
deep copy of each message's metrics."""

from __future__ import annotations

from dataclasses import asdict

import agno.metrics
from agno.metrics import MessageMetrics
from agno.run.agent import RunInput

from agents.history import to_agno
from sessions_app.models import Message


def history() -> list[Message]:
    call = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
    return [
        Message(role="user", content="Read the notes."),
        Message(role="assistant", content="", tool_calls=[call]),
        Message(role="tool", content="the notes", tool_call_id="c1", tool_name="read_file"),
        Message(role="assistant", content="They say hello."),
        Message(role="user", content="Thanks."),
    ]


def test_the_run_input_reads_as_it_would_with_agnos_own_metrics():
    ours = to_agno(history())
    theirs = [m.model_copy(update={"metrics": MessageMetrics()}) for m in to_agno(history())]
    for mine, other in zip(ours, theirs, strict=True):
        other.id = mine.id

    assert RunInput(input_content=ours).input_content_string() == (
        RunInput(input_content=theirs).input_content_string()
    )


def test_the_run_input_is_read_without_deep_copying_each_messages_metrics(monkeypatch):
    copied = []

    def deep_copy(value, *args, **kwargs):
        copied.append(value)
        return asdict(value, *args, **kwargs)

    monkeypatch.setattr(agno.metrics, "asdict", deep_copy)
    RunInput(input_content=to_agno(history())).input_content_string()
    assert copied == []
    MessageMetrics().to_dict()
    assert len(copied) == 1  # agno's own metrics would have been
