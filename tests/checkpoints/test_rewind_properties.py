"""Property: no rewind, write or coalescing ever changes what a kept checkpoint or another branch
shows, and a rewind deletes exactly what captured anything it deletes.

A stateful Hypothesis test drives one session through random steps (a person's and an agent's
writes, uploads, deletions, messages, checkpoints at the end or earlier in a branch, deleted
checkpoints, restores as a branch, rewinds to a checkpoint and by position) and keeps a plain
Python model beside it: each branch's messages and files, each checkpoint's messages and files
as they were when it was made, and the order of the file writes. After every step, every
checkpoint and branch the model keeps shows exactly what the model says, and the database holds
no other. A rewind's deletions are predicted from the model alone: the checkpoints and branches
that show any message or file version the rewind deletes. Runs on SQLite and on PostgreSQL.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from checkpoints.models import Checkpoint
from checkpoints.services import (
    branch_rewind,
    checkpoint_create,
    checkpoint_delete,
    checkpoint_restore,
)
from sessions_app.models import Branch, Turn
from sessions_app.selectors import branch_history
from sessions_app.services import message_append, session_create
from sessions_app.turns import turn_claim, turn_start
from workspace.errors import FileNotFoundInWorkspace
from workspace.models import WorkspaceBlob
from workspace.selectors import workspace_files
from workspace.services import file_delete, file_write, files_write_all

pytestmark = pytest.mark.django_db

PATHS = ["a.txt", "docs/b.txt", "docs/c.txt"]
CONTENTS = ["one", "two", "three"]
NEVER = 2**62  # a mark past every write


@dataclass
class Version:
    """One write of a branch, in the model: its order among all writes, the branch's message
    count then, and the branch's files after it."""

    seq: int
    position: int
    files: dict[str, str]


@dataclass
class ExpectedBranch:
    parent: int | None
    fork_position: int
    fork_mark: int  # the writes of the parent's lineage it sees: seq <= fork_mark
    messages: list[str]
    files: dict[str, str]
    start: dict[str, str]  # its files when it was made
    versions: list[Version] = field(default_factory=list)  # its own writes, oldest first


@dataclass(frozen=True)
class Snapshot:
    branch: int
    count: int
    mark: int
    messages: tuple[str, ...]
    files: tuple[tuple[str, str], ...]


def shown(branch: Branch, *, end: int | None = None, mark: int | None = None):
    """What the database shows for a branch (as of `end` messages and file `mark`)."""
    history = [m.content for m in branch_history(branch, end=end)]
    found = workspace_files(branch, mark=mark)
    texts = dict(
        WorkspaceBlob.objects.filter(pk__in=[f.blob for f in found]).values_list("pk", "content")
    )
    return history, {f.path: texts[f.blob] for f in found}


class RewindMachine(RuleBasedStateMachine):
    owner = None  # set by the test

    def __init__(self) -> None:
        super().__init__()
        self.branches: dict[int, ExpectedBranch] = {}
        self.checkpoints: dict[int, Snapshot] = {}
        self.seq = 0
        self.said = 0

    @initialize(agent_turn=st.booleans())
    def start(self, agent_turn: bool) -> None:
        self.session = session_create(owner=self.owner, name="property")
        main = Branch.objects.get(session=self.session)
        self.branches[main.pk] = ExpectedBranch(None, 0, 0, [], {}, {})
        self.turn: Turn | None = None
        if agent_turn:  # a running turn whose agent writes (its message starts the history)
            self.turn = turn_claim(turn_id=turn_start(session=self.session, message="work").pk)
            self.branches[main.pk].messages.append("work")

    # --- choosing ------------------------------------------------------------------------

    def _branch(self, index: int) -> tuple[Branch, ExpectedBranch]:
        """Index 0: the current branch (where a person goes on working); else one by index."""
        if index == 0:
            branch = Branch.objects.get(session=self.session, is_current=True)
        else:
            branch = Branch.objects.get(pk=sorted(self.branches)[index % len(self.branches)])
        return branch, self.branches[branch.pk]

    def _checkpoint(
        self, index: int, *, newest_first: bool = False
    ) -> tuple[Checkpoint, Snapshot] | None:
        """A checkpoint by index, oldest first (a rewind goes back to an early one) or newest
        first (a restore most often takes the one just made)."""
        if not self.checkpoints:
            return None
        order = sorted(self.checkpoints, reverse=newest_first)
        pk = order[index % len(order)]
        return Checkpoint.objects.select_related("branch").get(pk=pk), self.checkpoints[pk]

    def _wrote(self, model: ExpectedBranch, files: dict[str, str]) -> None:
        self.seq += 1
        model.files = files
        model.versions.append(Version(self.seq, len(model.messages), dict(files)))

    # --- steps ---------------------------------------------------------------------------

    @rule(
        b=st.integers(0, 3),
        path=st.sampled_from(PATHS),
        text=st.sampled_from(CONTENTS),
        by_agent=st.booleans(),
    )
    def write(self, b: int, path: str, text: str, by_agent: bool) -> None:
        """A person's write, or the running turn's agent's."""
        branch, model = self._branch(b)
        turn = self.turn if by_agent else None
        file_write(
            branch=branch, path=path, content=text, turn=turn, by="agent" if turn else "user"
        )
        self._wrote(model, {**model.files, path: text})

    @rule(
        b=st.integers(0, 3),
        files=st.dictionaries(st.sampled_from(PATHS), st.sampled_from(CONTENTS), min_size=1),
    )
    def upload(self, b: int, files: dict[str, str]) -> None:
        branch, model = self._branch(b)
        assert files_write_all(branch=branch, files=sorted(files.items())) == len(files)
        for path, text in sorted(files.items()):
            self._wrote(model, {**model.files, path: text})

    @rule(b=st.integers(0, 3), path=st.sampled_from(PATHS))
    def delete(self, b: int, path: str) -> None:
        branch, model = self._branch(b)
        if path not in model.files:
            with pytest.raises(FileNotFoundInWorkspace):
                file_delete(branch=branch, path=path)
            return
        file_delete(branch=branch, path=path)
        self._wrote(model, {p: t for p, t in model.files.items() if p != path})

    @rule(b=st.integers(0, 3))
    def say(self, b: int) -> None:
        branch, model = self._branch(b)
        self.said += 1
        message_append(branch=branch, role="user", content=f"message {self.said}")
        model.messages.append(f"message {self.said}")

    @rule(
        b=st.integers(0, 3),
        back=st.sampled_from([0, 0, 0, 1, 2]),
        edits=st.lists(st.tuples(st.sampled_from(PATHS), st.sampled_from(CONTENTS)), max_size=2),
    )
    def checkpoint(self, b: int, back: int, edits: list[tuple[str, str]]) -> None:
        """A few file edits (maybe none), then a checkpoint at the branch's end, or (as the
        agent's checkpoint tool during a turn) a few messages before it, holding the files as
        they are now."""
        branch, model = self._branch(b)
        for path, text in edits:
            file_write(branch=branch, path=path, content=text)
            self._wrote(model, {**model.files, path: text})
        at = max(model.fork_position, len(model.messages) - back)
        made = checkpoint_create(branch=branch, name="cp", at=at)
        self.checkpoints[made.pk] = Snapshot(
            branch.pk,
            at,
            self.seq,
            tuple(model.messages[:at]),
            tuple(sorted(model.files.items())),
        )

    def _forget(self, checkpoint: Checkpoint) -> None:
        checkpoint_delete(checkpoint=checkpoint)
        del self.checkpoints[checkpoint.pk]

    @precondition(lambda self: bool(self.checkpoints))
    @rule(c=st.integers(0, 5), forget=st.booleans())
    def restore_as_branch(self, c: int, forget: bool) -> None:
        """Restore as a new branch, and maybe delete the checkpoint then: the new branch alone
        holds what it shows of its parent's files."""
        chosen = self._checkpoint(c, newest_first=True)
        if chosen is None:
            return
        checkpoint, snap = chosen
        new = checkpoint_restore(checkpoint=checkpoint).branch
        files = dict(snap.files)
        self.branches[new.pk] = ExpectedBranch(
            snap.branch, snap.count, snap.mark, list(snap.messages), files, dict(files)
        )
        if forget:
            self._forget(checkpoint)

    @precondition(lambda self: bool(self.checkpoints))
    @rule(c=st.integers(0, 5), forget=st.booleans())
    def rewind_to_checkpoint(self, c: int, forget: bool) -> None:
        chosen = self._checkpoint(c)
        if chosen is None:
            return
        checkpoint, snap = chosen
        expected = self._rewound(snap.branch, snap.count, snap.mark)
        result = checkpoint_restore(checkpoint=checkpoint, mode="rewind")
        assert {d.id for d in result.deleted_checkpoints} == expected
        event(f"a rewind to a checkpoint deleted {min(len(expected), 2)}+ checkpoints")
        assert self.branches[snap.branch].files == dict(snap.files)
        if forget:
            self._forget(checkpoint)

    @rule(b=st.integers(0, 3), back=st.sampled_from([0, 0, 1, 2, 3]))
    def rewind_by_position(self, b: int, back: int) -> None:
        branch, model = self._branch(b)
        position = max(model.fork_position, len(model.messages) - back)
        later = [v.seq for v in model.versions if v.position > position]
        expected = self._rewound(branch.pk, position, min(later) - 1 if later else NEVER)
        deleted = branch_rewind(branch=branch, position=position)
        assert {d.id for d in deleted} == expected
        event(f"a rewind by position deleted {min(len(expected), 2)}+ checkpoints")

    # --- the model of a rewind -----------------------------------------------------------

    def _rewound(self, pk: int, position: int, mark: int) -> set[int]:
        """Cut the model's branch `pk` back to `position` messages and the writes up to `mark`;
        drop every checkpoint and branch that shows any message or write that goes. Returns
        the checkpoints dropped."""
        model = self.branches[pk]
        gone = [v.seq for v in model.versions if v.seq > mark]

        def captured(count: int, sees_up_to: int) -> bool:
            return count > position or any(seq <= sees_up_to for seq in gone)

        doomed = {
            child
            for child, b in self.branches.items()
            if b.parent == pk and captured(b.fork_position, b.fork_mark)
        }
        while True:
            more = {c for c, b in self.branches.items() if b.parent in doomed} - doomed
            if not more:
                break
            doomed |= more
        dropped = {
            cp
            for cp, snap in self.checkpoints.items()
            if snap.branch in doomed or (snap.branch == pk and captured(snap.count, snap.mark))
        }
        for cp in dropped:
            del self.checkpoints[cp]
        for child in doomed:
            del self.branches[child]
        kept = [v for v in model.versions if v.seq <= mark]
        model.versions = kept
        model.messages = model.messages[:position]
        model.files = dict(kept[-1].files) if kept else dict(model.start)
        return dropped

    # --- what must hold after every step -------------------------------------------------

    @invariant()
    def everything_kept_shows_what_it_showed(self) -> None:
        if not self.branches:
            return  # before `start`
        in_db = Branch.objects.filter(session=self.session)
        assert sorted(in_db.values_list("pk", flat=True)) == sorted(self.branches)
        for branch in in_db:
            model = self.branches[branch.pk]
            assert shown(branch) == (model.messages, model.files), f"branch {branch.pk}"
        checkpoints = Checkpoint.objects.filter(branch__session=self.session)
        assert sorted(checkpoints.values_list("pk", flat=True)) == sorted(self.checkpoints)
        for checkpoint in checkpoints.select_related("branch"):
            snap = self.checkpoints[checkpoint.pk]
            seen = shown(
                checkpoint.branch, end=checkpoint.message_count, mark=checkpoint.files_mark
            )
            assert seen == (list(snap.messages), dict(snap.files)), f"checkpoint {checkpoint.pk}"


def test_no_step_changes_what_a_kept_checkpoint_or_branch_shows(alice):
    RewindMachine.owner = alice
    run_state_machine_as_test(
        RewindMachine,
        settings=settings(
            max_examples=50,
            stateful_step_count=30,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
