"""A conversation's tree, checked and planned as branches, without the database.

The path from the root to the current leaf (the node the app showed, else the newest leaf) is the
session's first, current branch. Every other leaf, in the tree's order, is a branch forked from
the branch that holds the deepest node of its path already planned, at the position after that
node: it shares the history below its fork point, as a branch made by an edit does here, and holds
only its own messages. Nodes left out of the import (a system prompt, a tool's output) are not in
any path: their children hang from their nearest kept ancestor.

Everything here is linear in the number of nodes and iterative: a conversation is as deep as it
is long.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from sessions_app.errors import ImportRejected, ImportTooLarge

from .formats import Conversation, Node

_EARLIEST = datetime.min.replace(tzinfo=UTC)


@dataclass
class PlannedBranch:
    parent: int | None  # the index of its parent in the plan
    fork_position: int
    messages: list[Node] = field(default_factory=list)
    is_current: bool = False


def _checked(conversation: Conversation, max_nodes: int, where: str) -> dict[str, Node]:
    """The nodes by id, with no id twice, every parent present and no cycle."""
    if len(conversation.nodes) > max_nodes:
        raise ImportTooLarge(
            f"{where} has {len(conversation.nodes)} messages; the limit is {max_nodes}."
        )
    nodes: dict[str, Node] = {}
    for node in conversation.nodes:
        if node.id in nodes:
            raise ImportRejected(f"{where}: message id {node.id!r} appears twice.")
        nodes[node.id] = node
    for node in conversation.nodes:
        if node.parent is not None and node.parent not in nodes:
            raise ImportRejected(
                f"{where}: message {node.id!r} names parent {node.parent!r}, "
                "which is not in the conversation."
            )
    # Follow each node's parents up to a root, once per node (`done`); meeting a node of the
    # walk in progress again is a cycle.
    done: set[str] = set()
    for node in conversation.nodes:
        walk: list[str] = []
        on_walk: set[str] = set()
        current: str | None = node.id
        while current is not None and current not in done:
            if current in on_walk:
                raise ImportRejected(
                    f"{where}: the messages' parents form a cycle (through {current!r})."
                )
            walk.append(current)
            on_walk.add(current)
            current = nodes[current].parent
        done.update(walk)
    return nodes


def _kept_parents(nodes: dict[str, Node]) -> dict[str, str | None]:
    """Each node's nearest kept ancestor (None: the conversation's start)."""
    kept: dict[str, str | None] = {}
    for start in nodes:
        walk: list[str] = []
        current = nodes[start].parent
        while current is not None and current not in kept and nodes[current].role is None:
            walk.append(current)
            current = nodes[current].parent
        if current is None:
            found: str | None = None
        elif nodes[current].role is not None:
            found = current
        else:
            found = kept[current]
        for skipped in walk:
            kept[skipped] = found
        kept[start] = found
    return kept


def _leaves_in_order(
    nodes: dict[str, Node], kept_parent: dict[str, str | None]
) -> tuple[list[str], dict[str | None, list[str]]]:
    """The kept leaves in the tree's order (depth first, siblings by their rank), and each kept
    node's kept children in that order."""
    order = {node_id: i for i, node_id in enumerate(nodes)}
    children: dict[str | None, list[str]] = {}
    for node_id, node in nodes.items():
        if node.role is not None:
            children.setdefault(kept_parent[node_id], []).append(node_id)
    for siblings in children.values():
        siblings.sort(key=lambda n: (nodes[n].rank, order[n]))
    leaves: list[str] = []
    stack = list(reversed(children.get(None, [])))
    while stack:
        node_id = stack.pop()
        below = children.get(node_id)
        if below:
            stack.extend(reversed(below))
        else:
            leaves.append(node_id)
    return leaves, children


def _current_leaf(
    conversation: Conversation,
    nodes: dict[str, Node],
    kept_parent: dict[str, str | None],
    leaves: list[str],
    children: dict[str | None, list[str]],
) -> str:
    """The leaf the app showed: the current node (or its nearest kept ancestor), followed down
    its newest replies to a leaf; without one, the newest leaf (the last of equals)."""
    current = conversation.current
    if current is not None and current in nodes:
        node: str | None = current if nodes[current].role is not None else kept_parent[current]
        if node is not None:
            while children.get(node):
                node = children[node][-1]
            return node
    newest = max(
        range(len(leaves)),
        key=lambda i: (nodes[leaves[i]].created_at or _EARLIEST, i),
    )
    return leaves[newest]


def plan_branches(conversation: Conversation, *, max_nodes: int, where: str) -> list[PlannedBranch]:
    """The conversation as branches, the current one first (ImportRejected, ImportTooLarge)."""
    nodes = _checked(conversation, max_nodes, where)
    kept_parent = _kept_parents(nodes)
    leaves, children = _leaves_in_order(nodes, kept_parent)
    if not leaves:
        raise ImportRejected(f"{where} has no message to import.")
    current = _current_leaf(conversation, nodes, kept_parent, leaves, children)
    # Where each planned node is: its branch, and its position in that branch's history.
    placed: dict[str, tuple[int, int]] = {}
    plan: list[PlannedBranch] = []
    for leaf in [current, *(leaf for leaf in leaves if leaf != current)]:
        own: list[str] = []
        node: str | None = leaf
        while node is not None and node not in placed:
            own.append(node)
            node = kept_parent[node]
        own.reverse()
        if node is None:  # nothing in common: the first branch, or one forked at its start
            parent, fork = (None, 0) if not plan else (0, 0)
        else:
            parent, position = placed[node]
            fork = position + 1
        index = len(plan)
        plan.append(
            PlannedBranch(
                parent=parent,
                fork_position=fork,
                messages=[nodes[n] for n in own],
                is_current=not plan,
            )
        )
        for i, n in enumerate(own):
            placed[n] = (index, fork + i)
    return plan
