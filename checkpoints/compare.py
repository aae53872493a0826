"""Compare two points of one session: two branches, two checkpoints, or one of each.

A point is `branch:<id>` (the branch's whole history, its session state and its files as they
stand) or `checkpoint:<id>` (the history, state and files the checkpoint captured). The shared
history is read from the lineage (`common_length`: the branches' fork positions), never by
comparing texts, so a comparison costs the same number of queries at any length: two lineage
reads, one history read per side (from the first position they do not share, at most `limit`
messages), two workspace listings and, when files differ, one read of their contents.

What differs is bounded whatever the session holds: at most `limit` messages of each side are
read, file contents are read up to `DIFF_BYTES_BUDGET` in all, a file's unified diff is computed
only for texts of at most `DIFF_MAX_LINES` lines (difflib is quadratic on scattered changes) and
cut at `DIFF_OUTPUT_MAX_LINES` lines; each cut is said in the file's `note`.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from core.errors import InvalidInput
from sessions_app.errors import BranchNotFound
from sessions_app.models import Branch, Message, Session
from sessions_app.selectors import branch_history, common_length, parse_pk
from workspace.selectors import WorkspaceFile, blob_contents, files_change, workspace_files

from .errors import CheckpointNotFound
from .models import Checkpoint

REF_KINDS = ("branch", "checkpoint")
REF_HELP = "Give two points to compare as branch:<id> or checkpoint:<id>."

DIFF_BYTES_BUDGET = 2_000_000  # file contents read for one comparison, both sides together
DIFF_MAX_LINES = 2_000  # a side longer than this is not diffed line by line
DIFF_OUTPUT_MAX_LINES = 2_000  # a unified diff is cut after this many lines
DIFF_CONTEXT = 3  # unchanged lines around each change (diff -u)


class InvalidRef(InvalidInput):
    """A comparison's point that does not parse as branch:<id> or checkpoint:<id>."""


@dataclass(frozen=True)
class Point:
    """One side of a comparison: a branch's history below `end`, with its state and files."""

    ref: str  # as given back: "branch:12", "checkpoint:7"
    kind: Literal["branch", "checkpoint"]
    branch: Branch
    end: int  # the point's length: the messages of `branch`'s history below it
    session_state: dict[str, Any]
    checkpoint: Checkpoint | None = None

    @property
    def files_mark(self) -> int | None:
        return None if self.checkpoint is None else self.checkpoint.files_mark


# A top-level key of the session state that both points have, with different values.
ChangedValue = TypedDict("ChangedValue", {"from": Any, "to": Any})


@dataclass(frozen=True)
class StateDiff:
    """The session states' differences by top-level key: a key only `to` has (`added`, with
    its value), only `from` has (`removed`, with its value), or both have with different values
    (`changed`, both values whole: nested values are not compared further)."""

    added: dict[str, Any]
    removed: dict[str, Any]
    changed: dict[str, ChangedValue]

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed)


@dataclass(frozen=True)
class FileDiff:
    """One file that differs, with the unified diff of its text from `from` to `to` (an added
    file against nothing, a removed one to nothing); `note` says why it is cut or missing."""

    path: str
    diff: str
    note: str = ""


@dataclass(frozen=True)
class FilesDiff:
    added: list[FileDiff] = field(default_factory=list)
    removed: list[FileDiff] = field(default_factory=list)
    changed: list[FileDiff] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed)


@dataclass(frozen=True)
class SessionDiff:
    """Two points of one session compared: `common` messages shared from the start, then the
    first `limit` messages each has after them (`from_messages`, `to_messages`) out of
    `from_count` and `to_count`, and the differences of their states and files."""

    source: Point
    target: Point
    common: int
    from_messages: list[Message]
    to_messages: list[Message]
    from_count: int
    to_count: int
    state: StateDiff
    files: FilesDiff

    @property
    def identical(self) -> bool:
        return self.from_count == 0 and self.to_count == 0 and self.state.empty and self.files.empty

    @property
    def same_point(self) -> bool:
        """Both sides name the very same point (the same branch, or the same checkpoint)."""
        return self.source.ref == self.target.ref

    @property
    def parted(self) -> bool:
        """The two histories go on differently after the shared part (either has more)."""
        return self.from_count > 0 or self.to_count > 0


def parse_ref(raw: object) -> tuple[str, int]:
    """`branch:<id>` or `checkpoint:<id>` as (kind, id); anything else is InvalidRef."""
    if not isinstance(raw, str) or not raw.strip():
        raise InvalidRef(REF_HELP)
    kind, sep, rest = raw.strip().partition(":")
    key = parse_pk(rest) if sep and rest.isascii() and rest.isdigit() else None
    if kind not in REF_KINDS or key is None:
        shown = raw.strip()[:80]
        raise InvalidRef(f"“{shown}” is not a point of a session. {REF_HELP}")
    return kind, key


def _state(value: object) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {}


def resolve_point(session: Session, ref: tuple[str, int]) -> Point:
    """The point a parsed ref names in `session` (the caller's own, from get_session_for_user):
    a branch or checkpoint of another session, or of another user, is not found (404)."""
    kind, key = ref
    if kind == "branch":
        branch = Branch.objects.filter(session=session, pk=key).first()
        if branch is None:
            raise BranchNotFound(f"There is no branch {key} in this session.")
        return Point(
            ref=f"branch:{key}",
            kind="branch",
            branch=branch,
            end=branch.message_count,
            session_state=_state(branch.session_state),
        )
    checkpoint = (
        Checkpoint.objects.filter(branch__session=session, pk=key).select_related("branch").first()
    )
    if checkpoint is None:
        raise CheckpointNotFound(f"There is no checkpoint {key} in this session.")
    return Point(
        ref=f"checkpoint:{key}",
        kind="checkpoint",
        branch=checkpoint.branch,
        end=min(checkpoint.message_count, checkpoint.branch.message_count),
        session_state=_state(checkpoint.session_state),
        checkpoint=checkpoint,
    )


def state_diff(before: dict[str, Any], after: dict[str, Any]) -> StateDiff:
    return StateDiff(
        added={k: after[k] for k in sorted(after.keys() - before.keys())},
        removed={k: before[k] for k in sorted(before.keys() - after.keys())},
        changed={
            k: {"from": before[k], "to": after[k]}
            for k in sorted(before.keys() & after.keys())
            if before[k] != after[k]
        },
    )


_LINE = re.compile(r"[^\n]*\n|[^\n]+\Z")


def _lines(text: str) -> list[str]:
    """The text's lines with their "\n" (only "\n" ends a line, as in `diff`: a "\r" or a
    Unicode line separator stays inside its line)."""
    return _LINE.findall(text)


def unified_diff(path: str, before: str | None, after: str | None) -> tuple[str, str]:
    """The unified diff (diff -u) of a file's text from `before` to `after` (None: the file
    does not exist on that side), cut at DIFF_OUTPUT_MAX_LINES lines; and a note when cut or
    not computed (texts over DIFF_MAX_LINES lines)."""
    old, new = _lines(before or ""), _lines(after or "")
    if before is not None and after is not None and max(len(old), len(new)) > DIFF_MAX_LINES:
        return "", (
            f"Too long to compare line by line here ({len(old):,} and {len(new):,} lines); "
            f"the comparison covers files of at most {DIFF_MAX_LINES:,} lines."
        )
    lines = difflib.unified_diff(
        old,
        new,
        fromfile="/dev/null" if before is None else f"a/{path}",
        tofile="/dev/null" if after is None else f"b/{path}",
        n=DIFF_CONTEXT,
    )
    out: list[str] = []
    for count, line in enumerate(lines):
        if count >= DIFF_OUTPUT_MAX_LINES:
            return "".join(out), f"The diff is cut after {DIFF_OUTPUT_MAX_LINES:,} lines."
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out), ""


def _size(n: int) -> str:
    """A file's size as a person reads it: "820 bytes", "12 kB", "3.4 MB"."""
    if n < 1000:
        return f"{n:,} byte{'' if n == 1 else 's'}"
    for unit, scale in (("kB", 1000), ("MB", 1000**2), ("GB", 1000**3)):
        value = n / scale
        if value < 1000 or unit == "GB":
            return f"{value:.1f} {unit}" if value < 10 else f"{value:.0f} {unit}"
    return f"{n:,} bytes"


def binary_note(a: WorkspaceFile | None, b: WorkspaceFile | None) -> str:
    """What a binary file's change is, without a line diff: "changed (12 kB → 14 kB)"."""
    if a is None and b is not None:
        return f"binary file added ({_size(b.size)})"
    if b is None and a is not None:
        return f"binary file removed ({_size(a.size)})"
    if a is not None and b is not None:
        kind = "binary file" if a.binary and b.binary else "changed between text and binary"
        return f"{kind} changed ({_size(a.size)} → {_size(b.size)})"
    return ""


NOT_READ = (
    f"Not compared here: a comparison reads at most {DIFF_BYTES_BUDGET // 1_000_000} MB "
    "of files' text, and the files before this one took it."
)


def files_diff(before: list[WorkspaceFile], after: list[WorkspaceFile]) -> FilesDiff:
    """The files that differ between two workspaces (added, removed, changed: by their hash),
    each with its unified diff. One query for the contents, within DIFF_BYTES_BUDGET."""
    change = files_change(before, after)
    if change.empty:
        return FilesDiff()
    old = {f.path: f for f in before}
    new = {f.path: f for f in after}
    # The budget goes to the files in the order shown: added, removed, changed, each by path.
    order = (
        [(p, None, new[p]) for p in change.added]
        + [(p, old[p], None) for p in change.removed]
        + [(p, old[p], new[p]) for p in change.changed]
    )
    left = DIFF_BYTES_BUDGET
    fits: set[str] = set()
    blobs: list[int] = []
    for path, a, b in order:
        sides = [f for f in (a, b) if f is not None]
        if any(f.binary for f in sides):
            continue  # no line diff: binary_note says what changed
        need = sum(f.size for f in sides)
        if need <= left:
            left -= need
            fits.add(path)
            blobs += [f.blob for f in sides]
    texts = {pk: content.text or "" for pk, content in blob_contents(blobs).items()}

    def entry(path: str, a: WorkspaceFile | None, b: WorkspaceFile | None) -> FileDiff:
        if (a is not None and a.binary) or (b is not None and b.binary):
            return FileDiff(path=path, diff="", note=binary_note(a, b))
        if path not in fits:
            return FileDiff(path=path, diff="", note=NOT_READ)
        text_a = None if a is None else texts.get(a.blob, "")
        text_b = None if b is None else texts.get(b.blob, "")
        diff, why = unified_diff(path, text_a, text_b)
        return FileDiff(path=path, diff=diff, note=why)

    return FilesDiff(
        added=[entry(p, None, new[p]) for p in change.added],
        removed=[entry(p, old[p], None) for p in change.removed],
        changed=[entry(p, old[p], new[p]) for p in change.changed],
    )


def _side(point: Point, common: int, limit: int) -> list[Message]:
    """The first `limit` messages of the point's history after the shared `common`."""
    return branch_history(point.branch, start=common, end=min(point.end, common + limit))


def points_diff(source: Point, target: Point, *, limit: int) -> SessionDiff:
    """Compare two resolved points (see session_diff)."""
    common = common_length(source.branch, target.branch, a_end=source.end, b_end=target.end)
    common = min(common, source.end, target.end)
    limit = max(0, limit)
    return SessionDiff(
        source=source,
        target=target,
        common=common,
        from_messages=_side(source, common, limit),
        to_messages=_side(target, common, limit),
        from_count=source.end - common,
        to_count=target.end - common,
        state=state_diff(source.session_state, target.session_state),
        files=files_diff(
            workspace_files(source.branch, mark=source.files_mark),
            workspace_files(target.branch, mark=target.files_mark),
        ),
    )


def session_diff(
    session: Session, from_ref: object, to_ref: object, *, limit: int = 1_000
) -> SessionDiff:
    """Two points of `session` (the caller's own) compared: refs that do not parse are
    InvalidRef (400), a point of another session or user is not found (404)."""
    # Both refs are parsed before either is looked up: one that does not parse is a 400
    # whatever the other names.
    source_ref, target_ref = parse_ref(from_ref), parse_ref(to_ref)
    source = resolve_point(session, source_ref)
    target = resolve_point(session, target_ref)
    return points_diff(source, target, limit=limit)
