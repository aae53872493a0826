"""Writes racing checkpoints, rewinds and a turn's end, in threads on PostgreSQL (SQLite serialises
every writer anyway): a checkpoint's files are always exactly the writes made before it, in their
order, whatever rewinds and rewrites happen meanwhile, and a failed turn never leaves a write
behind, however its agent's writes interleave."""

from __future__ import annotations

import contextlib
import random
import threading

import pytest
from django.db import connection, transaction

from checkpoints.errors import CheckpointNotFound
from checkpoints.models import Checkpoint
from checkpoints.selectors import checkpoint_files
from checkpoints.services import branch_rewind, checkpoint_create, checkpoint_restore
from sessions_app.errors import RewindOutOfRange
from sessions_app.models import Branch
from sessions_app.selectors import branch_history
from sessions_app.services import message_append, session_create
from sessions_app.turns import turn_claim, turn_fail, turn_start
from workspace.errors import FileNotFoundInWorkspace
from workspace.models import FileVersion, WorkspaceBlob
from workspace.services import TurnNoLongerWrites, file_delete, file_write

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
    branch = Branch.objects.get(session=session)

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
    branch = Branch.objects.get(session=session)
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


def _shows(checkpoint: Checkpoint) -> tuple[list[str], dict[str, str]]:
    """The checkpoint's messages and files (path -> content), as the database shows them."""
    files = checkpoint_files(checkpoint)
    texts = dict(
        WorkspaceBlob.objects.filter(pk__in=[f.blob for f in files]).values_list("pk", "content")
    )
    history = branch_history(checkpoint.branch, end=checkpoint.message_count)
    return [m.content for m in history], {f.path: texts[f.blob] for f in files}


EXPECTED = (FileNotFoundInWorkspace, CheckpointNotFound, RewindOutOfRange, Checkpoint.DoesNotExist)


class Race:
    """The racers on one branch, and what each checkpoint showed when it was made (read in the
    transaction that made it, under the session's lock)."""

    def __init__(self, branch: Branch, base: Checkpoint) -> None:
        self.branch = branch
        self.base = base
        self.floor = base.message_count  # nothing rewinds below the first checkpoint
        self.made = {base.pk: _shows(base)}

    def _count(self) -> int:
        return Branch.objects.get(pk=self.branch.pk).message_count

    def writer(self, seed: int):
        def work() -> None:
            rng = random.Random(seed)  # noqa: S311 - a seeded sequence, not a secret
            for j in range(40):
                path = rng.choice(["a.txt", "b.txt", "docs/c.txt"])
                with contextlib.suppress(*EXPECTED):
                    if rng.random() < 0.2:
                        file_delete(branch=self.branch, path=path)
                    else:
                        file_write(branch=self.branch, path=path, content=f"{seed}-{j}")

        return work

    def talker(self) -> None:
        for j in range(15):
            message_append(branch=self.branch, role="user", content=f"message {j}")

    def checkpointer(self) -> None:
        rng = random.Random(3)  # noqa: S311 - a seeded sequence, not a secret
        for j in range(30):
            back = rng.choice([0, 0, 1])  # some before the end, as the agent's tool places them
            with contextlib.suppress(*EXPECTED), transaction.atomic():
                at = max(self.floor, self._count() - back)  # a rewind may cut below it meanwhile
                made = checkpoint_create(branch=self.branch, name=f"cp {j}", is_auto=True, at=at)
                self.made[made.pk] = _shows(made)

    def rewinder(self) -> None:
        rng = random.Random(4)  # noqa: S311 - a seeded sequence, not a secret
        for _ in range(12):
            with contextlib.suppress(*EXPECTED):
                if rng.random() < 0.5:
                    position = rng.randint(self.floor, self._count())
                    branch_rewind(branch=self.branch, position=position)
                    continue
                others = Checkpoint.objects.filter(branch=self.branch).exclude(pk=self.base.pk)
                ids = list(others.values_list("pk", flat=True))
                if ids:
                    target = Checkpoint.objects.get(pk=rng.choice(ids))
                    checkpoint_restore(checkpoint=target, mode=rng.choice(["rewind", "branch"]))


def test_every_checkpoint_kept_through_racing_rewinds_shows_what_it_held(alice):
    """A person's writes and deletions (rewrites of a few paths, so versions coalesce), messages,
    checkpoints (some placed before the branch's end), restores and rewinds (to a checkpoint and
    by position) race on one session; afterwards every checkpoint still there shows exactly
    what it showed when it was made."""
    session = session_create(owner=alice, name="busy")
    branch = Branch.objects.get(session=session)
    message_append(branch=branch, role="user", content="start")
    file_write(branch=branch, path="base.txt", content="base")
    race = Race(branch, checkpoint_create(branch=branch, name="base"))

    errors = _run_threads(
        race.writer(1), race.writer(2), race.talker, race.checkpointer, race.rewinder
    )

    assert errors == []
    kept = Checkpoint.objects.filter(branch__session=session).select_related("branch")
    assert race.base.pk in {c.pk for c in kept}
    changed = [c.checkpoint_name for c in kept if _shows(c) != race.made[c.pk]]
    assert changed == [], f"{len(changed)} of {len(kept)} checkpoints changed: {changed}"
