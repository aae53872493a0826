"""Writes racing checkpoints and a turn's end, in threads on PostgreSQL (SQLite serialises every
writer anyway): a checkpoint's files are always exactly the writes made before it, in their
order, and a failed turn never leaves a write behind, however its agent's writes interleave."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from checkpoints.models import Checkpoint
from checkpoints.services import checkpoint_create
from sessions_app.models import FileVersion, InternalSession
from sessions_app.services import session_create
from sessions_app.turns import turn_claim, turn_fail, turn_start
from workspace.selectors import checkpoint_files
from workspace.services import TurnNoLongerWrites, file_write

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _run_threads(*works) -> list[BaseException]:
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(works))

    def runner(work) -> None:
        try:
            barrier.wait()
            work()
        except BaseException as exc:  # reported by the test
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=runner, args=(w,)) for w in works]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return errors


def test_a_checkpoint_racing_writes_holds_exactly_the_writes_before_it(alice):
    session = session_create(owner=alice, name="busy")
    branch = InternalSession.objects.get(session=session)

    def writer(name: str):
        def work() -> None:
            for j in range(20):
                file_write(branch=branch, path=f"{name}/{j:02}.txt", content=f"{name} {j}")

        return work

    def checkpointer() -> None:
        for j in range(20):
            checkpoint_create(branch=branch, name=f"cp {j}", is_auto=True)

    assert _run_threads(writer("a"), writer("b"), checkpointer) == []

    written = list(
        FileVersion.objects.filter(branch=branch).order_by("id").values_list("path", flat=True)
    )
    assert len(written) == 40
    covered = []
    for checkpoint in (
        Checkpoint.objects.filter(branch=branch).select_related("branch").order_by("id")
    ):
        seen = {f.path for f in checkpoint_files(checkpoint)}
        n = len(seen)
        assert seen == set(written[:n]), (
            f"{checkpoint.checkpoint_name} is not a prefix of the writes"
        )
        covered.append(n)
    assert covered == sorted(covered)


def test_a_turn_failing_while_its_agent_writes_leaves_no_write(alice):
    session = session_create(owner=alice, name="busy")
    branch = InternalSession.objects.get(session=session)
    turn = turn_claim(turn_id=turn_start(session=session, message="write a lot").pk)
    assert turn is not None
    refused = threading.Event()

    def agent() -> None:
        for j in range(2000):
            try:
                file_write(
                    branch=branch, path=f"out/{j:04}.txt", content=str(j), turn=turn, by="agent"
                )
            except TurnNoLongerWrites:
                refused.set()
                return

    def failer() -> None:
        for _ in range(100_000):  # until the agent has written a few files (bounded)
            if FileVersion.objects.filter(branch=branch).count() >= 5:
                break
        assert turn_fail(turn=turn, error="the model went away")

    assert _run_threads(agent, failer) == []

    assert refused.is_set()
    assert not FileVersion.objects.filter(branch=branch).exists()
