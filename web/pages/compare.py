"""The compare view (HTML): two points of a session side by side from where they part, with the
session state's differences and the files that differ (a unified diff of each).

`GET /chat/<id>/compare/?from=REF&to=REF` (REF: `branch:<id>` or `checkpoint:<id>`, as the API's
diff). Without refs it is the picker alone. A ref that does not parse is answered on the page
itself with status 400 (the picker stays, to choose again); a point of another session or user
is a 404. The panel's picker (`compare/points/`) is fetched when the reader opens it, so its
lists are never stale and the chat page costs nothing more.

Each side shows at most SIDE_SHOWN messages (the first ones after the shared part), with a
note saying how many there are: a comparison of 10,000 messages never loads them into the page.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from checkpoints.compare import FileDiff, InvalidRef, Point, SessionDiff, session_diff
from checkpoints.models import Checkpoint
from checkpoints.selectors import session_checkpoints
from core.http import HtmxHttpRequest, domain_errors
from sessions_app.labels import branch_labels
from sessions_app.models import Branch, Message, Session
from sessions_app.selectors import get_session_for_user, session_branches_with_forks

SIDE_SHOWN = 200  # messages of each side shown on the page
PICKER_CHECKPOINTS = 200  # the newest checkpoints the picker offers


@dataclass(frozen=True)
class Option:
    value: str  # a ref
    label: str


@dataclass(frozen=True)
class Picker:
    """The two lists of points (branches, then the newest checkpoints) and what is chosen."""

    branches: list[Option]
    checkpoints: list[Option]
    source: str
    target: str
    more_checkpoints: bool


def _checkpoint_label(cp: Checkpoint, labels: dict[int, str]) -> str:
    on = labels.get(cp.branch_id, "")
    return f"“{cp.checkpoint_name}” · {on} · {cp.message_count} msg"


def default_source(current: Branch, checkpoints: list[Checkpoint]) -> str:
    """The point the current branch is compared with when the reader chose none: the branch it
    was made from (they part at the fork); for a branch made from none, the newest checkpoint
    (`checkpoints`, newest first), one of its own first; the branch itself only when the session
    has no other point at all."""
    if current.parent_id is not None:
        return f"branch:{current.parent_id}"
    own = next((cp for cp in checkpoints if cp.branch_id == current.pk), None)
    newest = own or next(iter(checkpoints), None)
    if newest is not None:
        return f"checkpoint:{newest.pk}"
    return f"branch:{current.pk}"


def picker(
    session: Session,
    *,
    source: str = "",
    target: str = "",
    chosen: tuple[Point, ...] = (),
) -> Picker:
    """The points of the session to choose from; without a choice, the current branch (to)
    and another point to compare it with (from: see `default_source`). Two queries. A `chosen`
    checkpoint older than the newest PICKER_CHECKPOINTS is offered too, so the form shows what
    it compared."""
    branches = session_branches_with_forks(session)
    labels = branch_labels(branches)
    current = next((b for b in branches if b.is_current), branches[0] if branches else None)
    checkpoints = list(session_checkpoints(session)[: PICKER_CHECKPOINTS + 1])
    more = len(checkpoints) > PICKER_CHECKPOINTS
    checkpoints = checkpoints[:PICKER_CHECKPOINTS]
    if current is not None and not target:
        target = f"branch:{current.pk}"
    if current is not None and not source:
        source = default_source(current, checkpoints)
    listed = {cp.pk for cp in checkpoints}
    for point in chosen:
        if point.checkpoint is not None and point.checkpoint.pk not in listed:
            checkpoints.append(point.checkpoint)
            listed.add(point.checkpoint.pk)
    return Picker(
        branches=[
            Option(f"branch:{b.pk}", f"{labels[b.pk]} · {b.message_count} msg") for b in branches
        ],
        checkpoints=[
            Option(f"checkpoint:{cp.pk}", _checkpoint_label(cp, labels)) for cp in checkpoints
        ],
        source=source,
        target=target,
        more_checkpoints=more,
    )


# --- What the page shows ------------------------------------------------------------------------


@dataclass(frozen=True)
class DiffLine:
    kind: str  # add, del, hunk, head, same, note
    text: str


def diff_lines(text: str) -> list[DiffLine]:
    """A unified diff's lines, each with its kind (for its colour; the +/- stays in the text)."""
    out = []
    lines = text.split("\n")  # only "\n" ends a line of a unified diff (checkpoints.compare)
    if lines[-1] == "":
        lines.pop()
    for line in lines:
        if line.startswith(("--- ", "+++ ")):
            kind = "head"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        elif line.startswith("\\"):
            kind = "note"
        else:
            kind = "same"
        out.append(DiffLine(kind, line))
    return out


@dataclass(frozen=True)
class FileShown:
    path: str
    status: str  # added, removed, changed
    lines: list[DiffLine]
    note: str


@dataclass(frozen=True)
class Side:
    which: str  # "from" or "to"
    title: str
    point: Point
    messages: list[Message]
    count: int  # after the shared part


def _point_title(point: Point, labels: dict[int, str]) -> str:
    branch = labels.get(point.branch.pk, "")
    if point.checkpoint is None:
        return f"Branch {branch}"
    return f"Checkpoint “{point.checkpoint.checkpoint_name}” on {branch}"


def compare_context(session: Session, diff: SessionDiff) -> dict[str, Any]:
    labels = branch_labels(session_branches_with_forks(session))
    files: list[FileShown] = []
    for status, group in (
        ("added", diff.files.added),
        ("removed", diff.files.removed),
        ("changed", diff.files.changed),
    ):
        files += [_file_shown(f, status) for f in group]
    return {
        "diff": diff,
        "sides": [
            Side(
                "from",
                _point_title(diff.source, labels),
                diff.source,
                diff.from_messages,
                diff.from_count,
            ),
            Side(
                "to",
                _point_title(diff.target, labels),
                diff.target,
                diff.to_messages,
                diff.to_count,
            ),
        ],
        "files": files,
        "state_rows": _state_rows(diff),
        "side_shown": SIDE_SHOWN,
    }


def _file_shown(f: FileDiff, status: str) -> FileShown:
    return FileShown(path=f.path, status=status, lines=diff_lines(f.diff), note=f.note)


@dataclass(frozen=True)
class StateRow:
    """A top-level key of the session state that differs, with its value on each side as
    indented JSON ("" where the key is absent)."""

    key: str
    status: str  # added, removed, changed
    source: str
    target: str


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


def _state_rows(diff: SessionDiff) -> list[StateRow]:
    state = diff.state
    rows = [StateRow(k, "added", "", _json(v)) for k, v in state.added.items()]
    rows += [StateRow(k, "removed", _json(v), "") for k, v in state.removed.items()]
    rows += [
        StateRow(k, "changed", _json(c["from"]), _json(c["to"])) for k, c in state.changed.items()
    ]
    return sorted(rows, key=lambda row: row.key)


# --- Views ---------------------------------------------------------------------------------------


@login_required
@require_GET
@domain_errors
def compare(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session = get_session_for_user(request.user, pk)
    source = request.GET.get("from", "")
    target = request.GET.get("to", "")
    context: dict[str, Any] = {"session": session}
    status = 200
    chosen: tuple[Point, ...] = ()
    if source or target:
        try:
            diff = session_diff(session, source, target, limit=SIDE_SHOWN)
        except InvalidRef as exc:
            context["error"] = exc.people
            status = 400
        else:
            context.update(compare_context(session, diff))
            source, target = diff.source.ref, diff.target.ref
            chosen = (diff.source, diff.target)
    context["picker"] = picker(session, source=source, target=target, chosen=chosen)
    return render(request, "checkpoints/compare.html", context, status=status)


@login_required
@require_GET
@domain_errors
def compare_points(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """The panel's picker: the two lists of points, fetched when the reader opens it."""
    session = get_session_for_user(request.user, pk)
    context = {"session": session, "picker": picker(session), "in_panel": True}
    return render(request, "checkpoints/_compare_form.html", context)
