"""The exports of other chat apps, read into one neutral shape (`Conversation`), without the
database.

- ChatGPT's `conversations.json`: a list of conversations, each a `mapping` of nodes
  `{id, message | null, parent, children}` and the `current_node` the app showed; a message has an
  `author.role` (user, assistant, system, tool) and a `content` of some `content_type` (`text`,
  `multimodal_text` with image pointers among its parts, `code`, `execution_output`, ...).
- Open WebUI's chat export: a list of chats `{id, title, chat: {history: {messages: {id: {id,
  parentId, childrenIds, role, content, timestamp, files?}}, currentId}, messages}, created_at}`.
- LibreChat's conversation export: `{conversationId, title, messages: [{messageId,
  parentMessageId, text, isCreatedByUser, sender, createdAt, content?, files?}]}`, or with
  `recursive: true` a `messagesTree` whose messages hold their replies in `children`.

Only the conversation's text comes in: user and assistant messages. What is left out (system and
hidden messages, tool calls and their output, code and other parts, images and attachments, empty
messages) keeps its place in the tree's shape and is counted by kind (`Conversation.skipped`), for
the import's report.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from core.validation import TIME_FUTURE_SLACK, TIME_MIN
from sessions_app.errors import ImportRejected

Source = Literal["chatgpt", "openwebui", "librechat"]
Role = Literal["user", "assistant"]
SOURCE_NAMES: dict[str, str] = {
    "chatgpt": "ChatGPT",
    "openwebui": "Open WebUI",
    "librechat": "LibreChat",
}
# LibreChat's parent of a conversation's first message.
LIBRECHAT_ROOT = "00000000-0000-0000-0000-000000000000"


@dataclass
class Node:
    """One node of a conversation's tree. `role` None: left out of the import (counted in the
    conversation's `skipped`), its children hang from its nearest kept ancestor."""

    id: str
    parent: str | None
    role: Role | None
    text: str = ""
    created_at: datetime | None = None
    # Its place among its siblings (the export's list of its parent's children), then the
    # document's order.
    rank: int = 0


@dataclass
class Conversation:
    source: Source
    title: str
    created_at: datetime | None
    nodes: list[Node]
    # The node the app showed last (ChatGPT's current_node, Open WebUI's currentId); None: the
    # newest leaf.
    current: str | None = None
    skipped: Counter[str] = field(default_factory=Counter)


# --- Times and texts -----------------------------------------------------------------------------


def when(value: object) -> datetime | None:
    """An export's time (epoch seconds, milliseconds or nanoseconds, or ISO 8601), or None when
    there is none or it lies outside 1970 to tomorrow."""
    moment: datetime | None = None
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        seconds = float(value)
        while seconds > 1e11:  # milliseconds, microseconds or nanoseconds
            seconds /= 1000
        try:
            moment = datetime.fromtimestamp(seconds, UTC)
        except (OverflowError, OSError, ValueError):
            return None
    elif isinstance(value, str) and value.strip():
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            return None
        if moment.tzinfo is None or moment.utcoffset() is None:
            moment = moment.replace(tzinfo=UTC)
    if moment is None or not TIME_MIN <= moment <= datetime.now(UTC) + TIME_FUTURE_SLACK:
        return None
    return moment


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _ident(value: object) -> str | None:
    if isinstance(value, str) and value:
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def _object(value: object, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ImportRejected(f"{what} is not a JSON object.")
    return value


def _ranks(children_of: Mapping[str, object], key: str) -> dict[str, int]:
    """Each node's place in its parent's list of children (`key`)."""
    ranks: dict[str, int] = {}
    for node in children_of.values():
        children = node.get(key) if isinstance(node, dict) else None
        if isinstance(children, list):
            for i, child in enumerate(children):
                if isinstance(child, str):
                    ranks.setdefault(child, i)
    return ranks


def _kept(role: object, text: str, skipped: Counter[str]) -> tuple[Role | None, str]:
    """A message's role and text when it comes in; else None, counted by kind."""
    if role == "system":
        skipped["system"] += 1
    elif role not in ("user", "assistant"):
        skipped["tool"] += 1
    elif not text.strip():
        skipped["empty"] += 1
    else:
        return ("user" if role == "user" else "assistant"), text
    return None, ""


def _join(pieces: list[str]) -> str:
    return "\n\n".join(p for p in pieces if p.strip())


# --- ChatGPT -------------------------------------------------------------------------------------


def _chatgpt_parts(content: dict[str, Any], skipped: Counter[str]) -> str | None:
    """The text of a message's content; None (counted) for a content that is not text."""
    kind = content.get("content_type")
    if kind not in ("text", "multimodal_text"):
        skipped[f"part:{kind if isinstance(kind, str) and kind else 'unknown'}"] += 1
        return None
    pieces = []
    for part in content.get("parts") or []:
        if isinstance(part, str):
            pieces.append(part)
        elif isinstance(part, dict):
            part_kind = part.get("content_type")
            if part_kind == "image_asset_pointer":
                skipped["image"] += 1
            elif isinstance(part.get("text"), str):  # an audio transcription, say
                pieces.append(part["text"])
            else:
                skipped[f"part:{part_kind if isinstance(part_kind, str) else 'unknown'}"] += 1
    return _join(pieces)


def _chatgpt_message(message: object, where: str, skipped: Counter[str]) -> Node:
    """A node's message read into a Node without its place (id, parent, rank)."""
    if message is None:  # the tree's own root: nothing of the conversation's
        return Node("", None, None)
    message = _object(message, f"{where}'s message")
    created = when(message.get("create_time"))
    author = message.get("author")
    role = author.get("role") if isinstance(author, dict) else None
    metadata = message.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    attachments = metadata.get("attachments")
    if isinstance(attachments, list):
        skipped["attachment"] += len(attachments)
    if role in ("user", "assistant") and metadata.get("is_visually_hidden_from_conversation"):
        skipped["hidden"] += 1
        return Node("", None, None, created_at=created)
    if role in ("user", "assistant"):
        content = message.get("content")
        text = _chatgpt_parts(content if isinstance(content, dict) else {}, skipped)
        if text is None:
            return Node("", None, None, created_at=created)
    else:
        text = ""
    kept, text = _kept(role, text, skipped)
    return Node("", None, kept, text, created)


def read_chatgpt(data: dict[str, Any], where: str) -> Conversation:
    mapping = data.get("mapping")
    if not isinstance(mapping, dict):
        raise ImportRejected(f"{where}: its 'mapping' must be an object of message nodes.")
    conversation = Conversation(
        source="chatgpt",
        title=_text(data.get("title")),
        created_at=when(data.get("create_time")),
        nodes=[],
        current=_ident(data.get("current_node")),
    )
    ranks = _ranks(mapping, "children")
    for key, raw in mapping.items():
        at = f"{where}, node {key!r}"
        node = _object(raw, at)
        parent = node.get("parent")
        if parent is not None and _ident(parent) is None:
            raise ImportRejected(f"{at}: its 'parent' must be a node id or null.")
        made = _chatgpt_message(node.get("message"), at, conversation.skipped)
        made.id, made.parent, made.rank = key, _ident(parent), ranks.get(key, 0)
        conversation.nodes.append(made)
    return conversation


# --- Open WebUI ----------------------------------------------------------------------------------


def _count_files(
    message: dict[str, Any], skipped: Counter[str], is_image: Callable[[object], bool]
) -> None:
    """A message's attached files, left out: counted as images (by their `type`) or others."""
    files = message.get("files")
    if isinstance(files, list):
        for f in files:
            kind = f.get("type") if isinstance(f, dict) else None
            skipped["image" if is_image(kind) else "attachment"] += 1


def _openwebui_files(message: dict[str, Any], skipped: Counter[str]) -> None:
    _count_files(message, skipped, lambda kind: kind == "image")


def _openwebui_content(content: object, skipped: Counter[str]) -> str:
    """Open WebUI's content: text, or (from an OpenAI-style message) a list of parts."""
    if isinstance(content, str):
        return content
    pieces = []
    if isinstance(content, list):
        for part in content:
            kind = part.get("type") if isinstance(part, dict) else None
            if isinstance(part, dict) and kind == "text" and isinstance(part.get("text"), str):
                pieces.append(part["text"])
            elif kind == "image_url":
                skipped["image"] += 1
            else:
                skipped[f"part:{kind if isinstance(kind, str) else 'unknown'}"] += 1
    return _join(pieces)


def read_openwebui(data: dict[str, Any], where: str) -> Conversation:
    chat = _object(data.get("chat"), f"{where}: its 'chat'")
    conversation = Conversation(
        source="openwebui",
        title=_text(data.get("title")) or _text(chat.get("title")),
        created_at=when(data.get("created_at")) or when(chat.get("timestamp")),
        nodes=[],
    )
    history = chat.get("history")
    messages = history.get("messages") if isinstance(history, dict) else None
    if isinstance(messages, dict):
        conversation.current = _ident(history.get("currentId")) if history else None
        ranks = _ranks(messages, "childrenIds")
        items = [(key, _object(m, f"{where}, message {key!r}")) for key, m in messages.items()]
        parents = {key: m.get("parentId") for key, m in items}
    elif isinstance(chat.get("messages"), list):  # an older export: the shown line only
        items = [
            (str(i), _object(m, f"{where}, message {i}")) for i, m in enumerate(chat["messages"])
        ]
        ranks = {}
        parents = {key: (str(int(key) - 1) if key != "0" else None) for key, _ in items}
    else:
        raise ImportRejected(f"{where}: its chat has no 'history' of messages.")
    for key, m in items:
        parent = parents[key]
        if parent is not None and _ident(parent) is None:
            raise ImportRejected(f"{where}, message {key!r}: its 'parentId' must be an id or null.")
        _openwebui_files(m, conversation.skipped)
        text = _openwebui_content(m.get("content"), conversation.skipped)
        role, text = _kept(m.get("role"), text, conversation.skipped)
        conversation.nodes.append(
            Node(key, _ident(parent), role, text, when(m.get("timestamp")), ranks.get(key, 0))
        )
    return conversation


# --- LibreChat -----------------------------------------------------------------------------------


def _librechat_text(message: dict[str, Any], skipped: Counter[str]) -> str:
    """A message's `text`, or the text parts of its `content` (an agent's message)."""
    _count_files(message, skipped, lambda kind: isinstance(kind, str) and kind.startswith("image/"))
    text = _text(message.get("text"))
    content = message.get("content")
    if text.strip() or not isinstance(content, list):
        return text
    pieces = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        value = part.get("text") if isinstance(part, dict) else None
        if kind == "text":
            value = value.get("value") if isinstance(value, dict) else value
            pieces.append(_text(value))
        elif kind == "tool_call":
            skipped["tool"] += 1
        elif kind in ("image_file", "image_url"):
            skipped["image"] += 1
        else:
            skipped[f"part:{kind if isinstance(kind, str) else 'unknown'}"] += 1
    return _join(pieces)


def _librechat_flat(data: dict[str, Any], where: str) -> list[tuple[dict[str, Any], object]]:
    """Every message with its parent's id: the `messages` list, or the recursive tree walked
    (without recursion: a long conversation is a deep tree)."""
    tree = data.get("messagesTree")
    listed = tree if isinstance(tree, list) else data.get("messages")
    if not isinstance(listed, list):
        raise ImportRejected(f"{where}: its 'messages' must be a list.")
    recursive = data.get("recursive") is True or isinstance(tree, list)
    out: list[tuple[dict[str, Any], object]] = []
    stack: list[tuple[object, object]] = [(m, None) for m in reversed(listed)]
    while stack:
        raw, tree_parent = stack.pop()
        message = _object(raw, f"{where}, message {len(out)}")
        parent = tree_parent if recursive and tree_parent is not None else None
        out.append((message, parent if parent is not None else message.get("parentMessageId")))
        children = message.get("children")
        if recursive and isinstance(children, list):
            stack.extend((c, message.get("messageId")) for c in reversed(children))
    return out


def read_librechat(data: dict[str, Any], where: str) -> Conversation:
    conversation = Conversation(
        source="librechat",
        title=_text(data.get("title")),
        created_at=when(data.get("createdAt")),
        nodes=[],
    )
    for i, (message, parent) in enumerate(_librechat_flat(data, where)):
        key = _ident(message.get("messageId"))
        if key is None:
            raise ImportRejected(f"{where}, message {i}: it has no 'messageId'.")
        if parent == LIBRECHAT_ROOT or parent == "":
            parent = None
        if parent is not None and _ident(parent) is None:
            raise ImportRejected(f"{where}, message {key!r}: its parent must be an id or null.")
        by_user = message.get("isCreatedByUser")
        if not isinstance(by_user, bool):
            by_user = _text(message.get("sender")).lower() == "user"
        text = _librechat_text(message, conversation.skipped)
        if message.get("error") is True:
            conversation.skipped["error"] += 1
            role, text = None, ""
        else:
            role, text = _kept("user" if by_user else "assistant", text, conversation.skipped)
        created = when(message.get("createdAt"))
        conversation.nodes.append(Node(key, _ident(parent), role, text, created))
        if conversation.created_at is None or (created and created < conversation.created_at):
            conversation.created_at = created
    return conversation


# --- Which export ------------------------------------------------------------------------------

READERS: dict[str, Callable[[dict[str, Any], str], Conversation]] = {
    "chatgpt": read_chatgpt,
    "openwebui": read_openwebui,
    "librechat": read_librechat,
}


def source_of(item: object) -> Source | None:
    """Which app's conversation `item` is, by its shape."""
    if not isinstance(item, dict):
        return None
    if isinstance(item.get("mapping"), dict):
        return "chatgpt"
    if isinstance(item.get("chat"), dict):
        return "openwebui"
    if "conversationId" in item and ("messages" in item or "messagesTree" in item):
        return "librechat"
    return None


@dataclass
class ForeignDoc:
    """An export of another app: its conversations, not yet read (each is read, and may fail,
    on its own)."""

    source: Source
    items: list[Any]


def foreign_doc(data: object) -> ForeignDoc | None:
    """The export when `data` is one (one conversation, or a list of them, told by the first);
    None otherwise."""
    items = data if isinstance(data, list) else [data]
    source = source_of(items[0]) if items else None
    return ForeignDoc(source, items) if source is not None else None


def read_conversation(item: object, index: int) -> Conversation:
    where = f"Conversation {index + 1}"
    source = source_of(item)
    if source is None or not isinstance(item, dict):
        raise ImportRejected(f"{where} is not a ChatGPT, Open WebUI or LibreChat conversation.")
    return READERS[source](item, where)


# --- The report ----------------------------------------------------------------------------------

_LABELS = {
    "system": ("system message", "system messages"),
    "hidden": ("hidden message", "hidden messages"),
    "tool": ("tool call or result", "tool calls and results"),
    "image": ("image", "images"),
    "attachment": ("attachment", "attachments"),
    "empty": ("empty message", "empty messages"),
    "error": ("error message", "error messages"),
}


def skipped_lines(skipped: Mapping[str, int]) -> list[str]:
    """What an import left out, for people: "2 images", "1 part of type code"."""
    lines = []
    for kind, count in sorted(skipped.items(), key=lambda kv: (-kv[1], kv[0])):
        if kind.startswith("part:"):
            noun = "part" if count == 1 else "parts"
            lines.append(f"{count} {noun} of type {kind.removeprefix('part:')}")
        else:
            one, many = _LABELS.get(kind, (kind, kind))
            lines.append(f"{count} {one if count == 1 else many}")
    return lines
