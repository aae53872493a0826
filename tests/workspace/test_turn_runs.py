"""Real turns, run as a worker runs them against the local fake model server: what the agent wrote
while its turn ran is kept when the turn ends done, and gone when the model fails it. (Until the
agent's own file tools arrive, the write is made the moment the turn starts, naming the running
turn, as the agent's tool will.)"""

from __future__ import annotations

import pytest

from core.events import listen
from sessions_app.models import Turn
from sessions_app.selectors import current_branch
from tests.conftest import ask
from tests.fakes.chat_server import Error, Reply
from workspace.models import WorkspaceBlob
from workspace.selectors import workspace_files
from workspace.services import file_write

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def agent_writes(session):
    """Once each turn of the session starts, its agent writes notes.md (as its tool would)."""

    def on_event(event: dict) -> None:
        if event["type"] == "turn.started":
            turn = Turn.objects.get(pk=event["turn"])
            branch = current_branch(session)
            file_write(
                branch=branch, path="notes.md", content="by the agent", turn=turn, by="agent"
            )

    stop = listen(session.pk, on_event)
    yield
    stop()


def test_a_turn_that_ends_done_keeps_its_agents_writes(fake_llm, session, agent_writes):
    fake_llm.queue(Reply("I wrote notes.md."))

    turn = ask(session, "write notes")

    assert turn.status == "done"
    assert [f.path for f in workspace_files(current_branch(session))] == ["notes.md"]


def test_a_turn_the_model_fails_loses_its_agents_writes(fake_llm, session, agent_writes):
    fake_llm.queue(Error(500), Error(500), Error(500))
    events: list[dict] = []

    turn = ask(session, "write notes", events)

    assert turn.status == "failed"
    assert workspace_files(current_branch(session)) == []
    assert not WorkspaceBlob.objects.exists()
    changed = [e for e in events if e["type"] == "workspace.changed"]
    assert [e["paths"] for e in changed] == [["notes.md"], ["notes.md"]]  # written, then dropped
