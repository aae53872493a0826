"""Comparing two points of a session (checkpoints.compare): the shared history from the lineage,
what each side has after it, the session states' and workspaces' differences, the refs that do
not parse or are not this session's, and a cost that does not grow with the history or the
workspace."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from checkpoints import compare
from checkpoints.compare import InvalidRef, parse_ref, session_diff
from checkpoints.errors import CheckpointNotFound
from checkpoints.services import checkpoint_create, checkpoint_restore
from sessions_app.errors import BranchNotFound
from sessions_app.models import Branch
from sessions_app.services import branch_fork, branch_set_state, session_create
from tests.conftest import contents, grow, say
from workspace.models import FileVersion, WorkspaceBlob
from workspace.services import file_delete, file_write
from workspace.validation import sha256_of

pytestmark = pytest.mark.django_db


def _b(branch: Branch) -> str:
    return f"branch:{branch.pk}"


def _c(checkpoint) -> str:
    return f"checkpoint:{checkpoint.pk}"


def _fresh(branch: Branch) -> Branch:
    branch.refresh_from_db()
    return branch


# --- refs ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        None,
        "",
        "  ",
        "branch",
        "branch:",
        "branch:abc",
        "branch:0",
        "branch:-1",
        "branch:1x",
        "branch:1.0",
        "branch:١٢",
        "checkpoint:99999999999999999999999",
        "message:3",
        "Branch:3",
        ":3",
        3,
        ["branch:1"],
    ],
)
def test_a_ref_that_does_not_parse_is_invalid_input(raw):
    with pytest.raises(InvalidRef, match=r"branch:<id> or checkpoint:<id>"):
        parse_ref(raw)


def test_a_ref_that_does_not_parse_is_invalid_whatever_the_other_names(session, branch):
    for pair in (("branch:999999", "nonsense"), ("nonsense", f"branch:{branch.pk}")):
        with pytest.raises(InvalidRef):
            session_diff(session, *pair)


def test_refs_parse_to_their_kind_and_id():
    assert parse_ref("branch:12") == ("branch", 12)
    assert parse_ref(" checkpoint:7 ") == ("checkpoint", 7)


def test_a_branch_or_checkpoint_of_another_session_is_not_found(alice, bob, session, branch):
    say(branch, "a", "b")
    other = session_create(owner=alice, name="other")
    other_branch = Branch.objects.get(session=other, is_current=True)
    other_cp = checkpoint_create(branch=other_branch, name="there")
    bobs = session_create(owner=bob, name="bob's")
    bobs_branch = Branch.objects.get(session=bobs, is_current=True)
    bobs_cp = checkpoint_create(branch=bobs_branch, name="bob's")
    for ref in (_b(other_branch), _b(bobs_branch)):
        with pytest.raises(BranchNotFound):
            session_diff(session, _b(branch), ref)
    for ref in (_c(other_cp), _c(bobs_cp)):
        with pytest.raises(CheckpointNotFound):
            session_diff(session, ref, _b(branch))


# --- the shared history and each side ----------------------------------------------------------


def test_a_restored_branch_and_the_branch_it_came_from_part_at_the_checkpoint(session, branch):
    say(branch, "q1", "a1", "q2", "a2")
    cp = checkpoint_create(branch=branch, name="before")
    say(branch, "old question", "old answer")
    new = checkpoint_restore(checkpoint=cp, mode="branch").branch
    say(new, "new question", "new answer", "more")

    diff = session_diff(session, _b(branch), _b(_fresh(new)))

    assert diff.common == 4
    assert contents(diff.from_messages) == ["old question", "old answer"]
    assert contents(diff.to_messages) == ["new question", "new answer", "more"]
    assert (diff.from_count, diff.to_count) == (2, 3)
    assert [m.position for m in diff.to_messages] == [4, 5, 6]


def _three_generations(branch: Branch) -> list[Branch]:
    """root (10 messages); b1 forked from root at 8 (+2); b2 from b1 at 6 (+3); b3 from b2 at 7
    (+1): the lineage b3 -> b2 -> b1 -> root with a fork at each depth."""
    grow(branch, 10)
    b1 = branch_fork(branch=branch, position=8)
    say(b1, "b1 one", "b1 two")
    b2 = branch_fork(branch=_fresh(b1), position=6)
    say(b2, "b2 one", "b2 two", "b2 three")
    b3 = branch_fork(branch=_fresh(b2), position=7)
    say(b3, "b3 one")
    return [_fresh(b) for b in (branch, b1, b2, b3)]


@pytest.mark.parametrize(
    ("a", "b", "common"),
    [(1, 0, 8), (2, 0, 6), (3, 0, 6), (2, 1, 6), (3, 1, 6), (3, 2, 7), (1, 1, 10)],
)
def test_forks_at_several_depths_share_the_history_up_to_the_lowest_fork(
    session, branch, a, b, common
):
    tree = _three_generations(branch)
    diff = session_diff(session, _b(tree[a]), _b(tree[b]))
    assert diff.common == common
    assert diff.from_count == tree[a].message_count - common
    assert diff.to_count == tree[b].message_count - common
    assert [m.position for m in diff.from_messages] == list(range(common, tree[a].message_count))
    assert [m.position for m in diff.to_messages] == list(range(common, tree[b].message_count))


def test_the_deepest_branch_against_the_root_reads_each_side_from_its_own_lineage(session, branch):
    root, _, _, b3 = _three_generations(branch)
    diff = session_diff(session, _b(b3), _b(root))
    assert contents(diff.from_messages) == ["b2 one", "b3 one"]
    assert contents(diff.to_messages) == [f"message {i}" for i in range(6, 10)]


def test_a_branch_against_its_own_checkpoint_shows_only_what_came_after(session, branch):
    say(branch, "q1", "a1")
    branch_set_state(branch=branch, session_state={"topic": "python", "todos": [1]})
    cp = checkpoint_create(branch=branch, name="early")
    say(branch, "q2", "a2")
    branch_set_state(branch=branch, session_state={"topic": "rust", "level": 2})

    diff = session_diff(session, _c(cp), _b(_fresh(branch)))

    assert diff.common == 2
    assert diff.from_messages == []
    assert contents(diff.to_messages) == ["q2", "a2"]
    assert diff.state.added == {"level": 2}
    assert diff.state.removed == {"todos": [1]}
    assert diff.state.changed == {"topic": {"from": "python", "to": "rust"}}
    assert diff.source.kind == "checkpoint"
    assert diff.source.ref == _c(cp)


def test_two_checkpoints_of_different_branches(session, branch):
    say(branch, "q1", "a1", "q2", "a2")
    cp = checkpoint_create(branch=branch, name="fork point")
    say(branch, "main q", "main a")
    on_main = checkpoint_create(branch=branch, name="on main")
    say(branch, "later on main")
    other = checkpoint_restore(checkpoint=cp, mode="branch").branch
    say(other, "side q", "side a", "side q2")
    on_side = checkpoint_create(branch=_fresh(other), name="on side")
    say(other, "later on side")

    diff = session_diff(session, _c(on_main), _c(on_side))

    assert diff.common == 4
    assert contents(diff.from_messages) == ["main q", "main a"]
    assert contents(diff.to_messages) == ["side q", "side a", "side q2"]


def test_a_point_compared_with_itself_is_identical(session, branch):
    say(branch, "q1", "a1")
    cp = checkpoint_create(branch=branch, name="here")
    for a, b in ((_b(branch), _b(branch)), (_c(cp), _b(branch)), (_c(cp), _c(cp))):
        diff = session_diff(session, a, b)
        assert diff.common == 2
        assert (diff.from_messages, diff.to_messages) == ([], [])
        assert diff.identical


def test_a_limit_reads_only_the_first_messages_of_each_side_and_counts_them_all(session, branch):
    say(branch, "q")
    cp = checkpoint_create(branch=branch, name="start")
    grow(branch, 30)
    new = checkpoint_restore(checkpoint=cp, mode="branch").branch
    grow(new, 5)
    diff = session_diff(session, _b(_fresh(branch)), _b(_fresh(new)), limit=10)
    assert (diff.from_count, diff.to_count) == (30, 5)
    assert [m.position for m in diff.from_messages] == list(range(1, 11))
    assert len(diff.to_messages) == 5


# --- files -----------------------------------------------------------------------------------


def test_files_that_differ_come_with_a_unified_diff_of_each(session, branch):
    say(branch, "write", "written")
    file_write(branch=branch, path="notes.md", content="one\ntwo\nthree\n")
    file_write(branch=branch, path="gone.txt", content="bye\n")
    file_write(branch=branch, path="same.txt", content="same\n")
    cp = checkpoint_create(branch=branch, name="files")
    file_write(branch=branch, path="notes.md", content="one\n2\nthree\n")
    file_delete(branch=branch, path="gone.txt")
    file_write(branch=branch, path="src/new.py", content="print('<b>hi</b>')")

    diff = session_diff(session, _c(cp), _b(_fresh(branch)))

    assert [f.path for f in diff.files.changed] == ["notes.md"]
    assert [f.path for f in diff.files.added] == ["src/new.py"]
    assert [f.path for f in diff.files.removed] == ["gone.txt"]
    notes = diff.files.changed[0]
    assert notes.diff.splitlines() == [
        "--- a/notes.md",
        "+++ b/notes.md",
        "@@ -1,3 +1,3 @@",
        " one",
        "-two",
        "+2",
        " three",
    ]
    assert notes.note == ""
    added = diff.files.added[0].diff.splitlines()
    assert added[:2] == ["--- /dev/null", "+++ b/src/new.py"]
    assert "+print('<b>hi</b>')" in added
    assert "\\ No newline at end of file" in added
    assert "-bye" in diff.files.removed[0].diff.splitlines()


def test_only_a_newline_ends_a_line_of_a_diff(session, branch):
    file_write(branch=branch, path="crlf.txt", content="one\r\ntwo\u2028still two\n")
    cp = checkpoint_create(branch=branch, name="crlf")
    file_write(branch=branch, path="crlf.txt", content="one\r\nthree\n")
    diff = session_diff(session, _c(cp), _b(_fresh(branch)))
    (crlf,) = diff.files.changed
    assert crlf.diff.split("\n")[3:6] == [" one\r", "-two\u2028still two", "+three"]
    assert "No newline" not in crlf.diff


def test_a_file_too_long_to_diff_is_named_with_a_note(session, branch):
    long_text = "".join(f"line {i}\n" for i in range(compare.DIFF_MAX_LINES + 5))
    file_write(branch=branch, path="big.txt", content=long_text)
    cp = checkpoint_create(branch=branch, name="big")
    file_write(branch=branch, path="big.txt", content=long_text + "one more\n")
    diff = session_diff(session, _c(cp), _b(_fresh(branch)))
    (big,) = diff.files.changed
    assert big.diff == ""
    assert "Too long to compare line by line" in big.note


def test_a_huge_diff_is_cut_with_a_note(session, branch):
    cp = checkpoint_create(branch=branch, name="empty")
    text = "".join(f"row {i}\n" for i in range(compare.DIFF_OUTPUT_MAX_LINES))
    file_write(branch=branch, path="rows.txt", content=text)
    diff = session_diff(session, _c(cp), _b(_fresh(branch)))
    (rows,) = diff.files.added
    assert len(rows.diff.splitlines()) == compare.DIFF_OUTPUT_MAX_LINES
    assert "cut after" in rows.note


def _bulk_files(branch: Branch, n: int, *, size: int = 6, prefix: str = "src/f") -> None:
    """n files in the branch's workspace, as n writes would leave them (in bulk, for speed)."""
    branch.refresh_from_db()
    texts = [f"file {i}\n".ljust(size, "x") for i in range(n)]
    blobs = WorkspaceBlob.objects.bulk_create(
        [
            WorkspaceBlob(session_id=branch.session_id, sha256=sha256_of(t), content=t, size=len(t))
            for t in texts
        ]
    )
    FileVersion.objects.bulk_create(
        [
            FileVersion(
                branch=branch, position=branch.message_count, path=f"{prefix}{i:04}.txt", blob=b
            )
            for i, b in enumerate(blobs)
        ]
    )


def test_file_contents_are_read_within_a_budget_and_the_rest_named_with_a_note(session, branch):
    cp = checkpoint_create(branch=branch, name="empty")
    size = 250_000
    count = compare.DIFF_BYTES_BUDGET // size + 2
    _bulk_files(branch, count, size=size)
    diff = session_diff(session, _c(cp), _b(_fresh(branch)))
    assert len(diff.files.added) == count
    read = [f for f in diff.files.added if f.diff]
    skipped = [f for f in diff.files.added if not f.diff]
    assert len(read) == compare.DIFF_BYTES_BUDGET // size
    assert all("at most 2 MB" in f.note for f in skipped)
    assert len(skipped) == 2


# --- cost ------------------------------------------------------------------------------------


def _queries(action) -> int:
    with CaptureQueriesContext(connection) as captured:
        action()
    return len(captured.captured_queries)


def _diverged(owner, *, messages: int, files: int) -> tuple:
    """A session whose main branch and a restored branch each have `messages` messages after
    their checkpoint, and whose workspaces differ by `files` files."""
    s = session_create(owner=owner, name=f"{messages} messages, {files} files")
    main = Branch.objects.get(session=s, is_current=True)
    say(main, "start", "started")
    file_write(branch=main, path="shared.txt", content="before\n")
    cp = checkpoint_create(branch=main, name="fork")
    grow(main, messages)
    _bulk_files(main, files, prefix="main/f")
    file_write(branch=main, path="shared.txt", content="after on main\n")
    new = checkpoint_restore(checkpoint=cp, mode="branch").branch
    grow(new, messages)
    return s, _fresh(main), _fresh(new), cp


# The sizes compared (docs/architecture.md quotes them).
FEW_MESSAGES, MANY_MESSAGES = 10, 10_000
FEW_FILES, MANY_FILES = 1, 500


def test_a_diff_costs_the_same_queries_at_10_and_10_000_messages(alice):
    costs = []
    for n in (FEW_MESSAGES, MANY_MESSAGES):
        s, main, new, _ = _diverged(alice, messages=n, files=1)
        diff = None

        def run(s=s, main=main, new=new):
            nonlocal diff
            diff = session_diff(s, _b(main), _b(new), limit=200)

        costs.append(_queries(run))
        assert diff is not None
        assert (diff.common, diff.from_count, diff.to_count) == (2, n, n)
        assert len(diff.from_messages) == min(n, 200)
    assert costs[0] == costs[1]


def test_a_diff_costs_the_same_queries_with_1_and_500_files(alice):
    costs = []
    for files in (FEW_FILES, MANY_FILES):
        s, main, _, cp = _diverged(alice, messages=4, files=files)
        costs.append(_queries(lambda s=s, main=main, cp=cp: session_diff(s, _c(cp), _b(main))))
    assert costs[0] == costs[1]


@pytest.mark.postgres
def test_on_postgresql_a_diff_costs_the_same_at_10_and_10_000_messages_and_500_files(alice):
    assert connection.vendor == "postgresql"
    small, big = (
        _diverged(alice, messages=FEW_MESSAGES, files=FEW_FILES),
        _diverged(alice, messages=MANY_MESSAGES, files=MANY_FILES),
    )
    costs = [
        _queries(lambda s=s, main=main, new=new: session_diff(s, _b(main), _b(new)))
        for s, main, new, _ in (small, big)
    ]
    assert costs[0] == costs[1]
