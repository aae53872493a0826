"""What a turn's agent wrote to the workspace goes with the turn's tool messages: kept when the
turn ends done or is stopped (a stopped turn keeps the tool messages of its calls that ran),
deleted when it fails, or runs again from its start after a take-over.
(The agent's file tools arrive separately: here the tests write as the agent would, naming the
running turn, through workspace.services.file_write.)"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.utils import timezone

from core.events import listen
from sessions_app.models import Turn
from sessions_app.turns import (
    NewMessage,
    turn_cancel,
    turn_claim,
    turn_fail,
    turn_finish,
    turn_keep_stopped,
    turn_recover_stale,
    turn_start,
    turn_store_messages,
)
from workspace.models import FileVersion, WorkspaceBlob
from workspace.selectors import workspace_files
from workspace.services import TurnNoLongerWrites, file_write

pytestmark = pytest.mark.django_db


def paths(branch) -> list[str]:
    return [f.path for f in workspace_files(branch)]


def _claimed(session) -> Turn:
    turn = turn_start(session=session, message="write some files")
    claimed = turn_claim(turn_id=turn.pk)
    assert claimed is not None
    return claimed


def _dead(turn: Turn, settings) -> None:
    stale = timezone.now() - timedelta(seconds=settings.AGENT_TURN_STALE_SECONDS + 1)
    Turn.objects.filter(pk=turn.pk).update(heartbeat_at=stale)


@pytest.fixture
def changes(session) -> Iterator[list[dict]]:
    """The session's events (sent after commit: run them with
    django_capture_on_commit_callbacks)."""
    seen: list[dict] = []
    stop = listen(session.pk, seen.append)
    yield seen
    stop()


def _changed(events: list[dict]) -> list[list[str]]:
    return [e["paths"] for e in events if e["type"] == "workspace.changed"]


def test_a_done_turn_keeps_what_its_agent_wrote(session, branch):
    turn = _claimed(session)
    file_write(branch=branch, path="notes/plan.md", content="step one", turn=turn, by="agent")
    turn_store_messages(turn=turn, messages=[NewMessage(role="assistant", content="written")])
    assert turn_finish(turn=turn, reply="written", tools_used=["write_file"])
    assert paths(branch) == ["notes/plan.md"]


def test_a_failed_turn_loses_its_writes_and_the_contents_only_they_used(
    session, branch, changes, django_capture_on_commit_callbacks
):
    file_write(branch=branch, path="kept.txt", content="shared text")
    turn = _claimed(session)
    file_write(branch=branch, path="a.txt", content="only the turn's", turn=turn, by="agent")
    file_write(branch=branch, path="b.txt", content="shared text", turn=turn, by="agent")
    file_write(branch=branch, path="kept.txt", content="changed by the agent", turn=turn)
    with django_capture_on_commit_callbacks(execute=True):
        assert turn_fail(turn=turn, error="the model went away")

    assert paths(branch) == ["kept.txt"]
    assert {f.sha256 for f in workspace_files(branch)} == set(
        WorkspaceBlob.objects.filter(content="shared text").values_list("sha256", flat=True)
    )
    assert not FileVersion.objects.filter(turn=turn).exists()
    assert sorted(WorkspaceBlob.objects.values_list("content", flat=True)) == ["shared text"]
    assert _changed(changes) == [["a.txt", "b.txt", "kept.txt"]]


def test_a_stopped_turn_keeps_the_writes_that_ran_and_its_late_writes_are_refused(session, branch):
    """Issue 36: a write that ran before the Stop is a real write of the turn, kept with its
    tool message (sessions_app.turns.stopped); a write after the Stop is refused."""
    turn = _claimed(session)
    file_write(branch=branch, path="draft.md", content="half done", turn=turn, by="agent")

    turn_cancel(turn=turn)

    assert paths(branch) == ["draft.md"]
    with pytest.raises(TurnNoLongerWrites):  # the worker has not noticed the stop yet
        file_write(branch=branch, path="draft.md", content="more", turn=turn, by="agent")
    assert turn_keep_stopped(turn=turn, reply="I was writing")
    assert paths(branch) == ["draft.md"]
    assert FileVersion.objects.filter(turn=turn).count() == 1


def test_a_turn_taken_over_runs_again_without_its_first_attempts_writes(
    session, branch, settings, changes, django_capture_on_commit_callbacks
):
    settings.AGENT_TURN_ATTEMPTS = 2
    first = _claimed(session)
    file_write(branch=branch, path="first.txt", content="attempt one", turn=first, by="agent")
    _dead(first, settings)
    assert turn_recover_stale().requeued

    with django_capture_on_commit_callbacks(execute=True):
        second = turn_claim(turn_id=first.pk)

    assert second is not None
    assert second.attempts == 2
    assert paths(branch) == []
    assert ["first.txt"] in _changed(changes)
    with pytest.raises(TurnNoLongerWrites):  # the first worker wakes up late
        file_write(branch=branch, path="late.txt", content="late", turn=first, by="agent")
    file_write(branch=branch, path="second.txt", content="attempt two", turn=second, by="agent")
    turn_store_messages(turn=second, messages=[NewMessage(role="assistant", content="done")])
    assert turn_finish(turn=second, reply="done", tools_used=["write_file"])
    assert paths(branch) == ["second.txt"]


def test_a_turn_out_of_attempts_loses_its_writes(session, branch, settings):
    settings.AGENT_TURN_ATTEMPTS = 1
    turn = _claimed(session)
    file_write(branch=branch, path="x.txt", content="x", turn=turn, by="agent")
    _dead(turn, settings)

    assert [t.pk for t in turn_recover_stale().failed] == [turn.pk]

    assert paths(branch) == []
    assert not WorkspaceBlob.objects.exists()


def test_a_requeued_turn_no_worker_picks_up_again_loses_its_writes(session, branch, settings):
    settings.AGENT_TURN_ATTEMPTS = 2
    settings.TURN_QUEUE_TIMEOUT = 600
    turn = _claimed(session)
    file_write(branch=branch, path="x.txt", content="x", turn=turn, by="agent")
    _dead(turn, settings)
    assert turn_recover_stale().requeued
    long_ago = timezone.now() - timedelta(seconds=601)
    Turn.objects.filter(pk=turn.pk).update(heartbeat_at=long_ago)

    assert [t.pk for t in turn_recover_stale().failed] == [turn.pk]

    assert paths(branch) == []


def test_dropping_a_turns_writes_leaves_other_turns_and_people_alone(session, branch):
    earlier = _claimed(session)
    file_write(branch=branch, path="earlier.txt", content="kept", turn=earlier, by="agent")
    turn_store_messages(turn=earlier, messages=[NewMessage(role="assistant", content="ok")])
    assert turn_finish(turn=earlier, reply="ok", tools_used=["write_file"])
    later = _claimed(session)
    file_write(branch=branch, path="mine.txt", content="by a person")
    file_write(branch=branch, path="later.txt", content="dropped", turn=later, by="agent")

    assert turn_fail(turn=later, error="boom")

    assert paths(branch) == ["earlier.txt", "mine.txt"]
