"""What a branch is called, the same everywhere (the tree, the header, checkpoint details, the API,
the agent's tools): the name its owner gave it, else a default label made from where it starts.

A default label never shows a database id. The first line of a session is "main"; a fork says what
made it ("edit of message 3", "new reply to message 3", "from “start”", "from message 4"), and
forks made at the same point of the same branch with the same origin are numbered in the order
they were made ("edit of message 3 (2)"). Forks at one point share their fate (a rewind deletes
them all or none), so the labels stay the same as the tree grows and shrinks.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from .models import Branch, Session


def _origin(branch: Branch, root_number: int) -> str:
    if branch.parent_id is None:
        return "main" if root_number == 1 else f"new start {root_number}"
    metadata = branch.metadata if isinstance(branch.metadata, dict) else {}
    shown = branch.fork_position + 1  # positions count from 0, people from 1
    if "edited_message" in metadata:
        return f"edit of message {shown}"
    if "regenerated" in metadata:
        return f"new reply to message {shown}"
    checkpoint = branch.forked_from if branch.forked_from_id is not None else None
    if checkpoint is not None:
        return f"from “{checkpoint.checkpoint_name}”"
    return f"from message {branch.fork_position}"


def default_labels(branches: Iterable[Branch]) -> dict[int, str]:
    """The default label of each of a session's branches (all of them: a label depends on its
    siblings). Load them with `select_related("forked_from")` to spare a query per fork."""
    ordered = sorted(branches, key=lambda b: (b.created_at, b.pk))
    labels: dict[int, str] = {}
    seen: dict[tuple[int | None, int, str], int] = defaultdict(int)
    roots = 0
    for branch in ordered:
        if branch.parent_id is None:
            roots += 1
        origin = _origin(branch, roots)
        key = (branch.parent_id, branch.fork_position, origin)
        seen[key] += 1
        number = seen[key]
        numbered = number > 1 and branch.parent_id is not None
        labels[branch.pk] = f"{origin} ({number})" if numbered else origin
    return labels


def branch_labels(branches: Iterable[Branch]) -> dict[int, str]:
    """Each branch's name, or its default label when it has none."""
    branches = list(branches)
    defaults = default_labels(branches)
    return {b.pk: b.name or defaults[b.pk] for b in branches}


def session_branch_labels(session: Session | int) -> dict[int, str]:
    """The labels of every branch of a session: one query."""
    session_id = session if isinstance(session, int) else session.pk
    branches = Branch.objects.filter(session_id=session_id).select_related("forked_from")
    return branch_labels(branches)


def branch_label(branch: Branch) -> str:
    """What to call one branch: one query (its session's branches)."""
    if branch.name:
        return branch.name
    return session_branch_labels(branch.session_id).get(branch.pk, "a deleted branch")
