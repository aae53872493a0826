"""Exports of other chat apps, built as their public descriptions have them (no such file is in
the repository): ChatGPT's conversations.json, Open WebUI's chat export, LibreChat's conversation
export. Each holds the same conversation: an edit (a user message in two versions) and a
regeneration (an assistant reply in two versions).

    Q1 ── A1 ─┬─ Q2  ── A2 ─┬─ A2' (regenerated; the current leaf)
              │             └─ (A2 is the older reply: a leaf of its own)
              └─ Q2' ── A3   (the older, edited-away version of the second question)

As branches, the current one first, then the other leaves in the tree's order:
  current: Q1 A1 Q2 A2'  |  Q1 A1 Q2' A3 (forks from it at 2)  |  Q1 A1 Q2 A2 (forks at 3)
"""

from __future__ import annotations

import json
from typing import Any

T0 = 1_700_000_000.0  # 2023-11-14T22:13:20Z

CURRENT = ["Q1", "A1", "Q2", "A2-regenerated"]
OLDER_REPLY = ["Q1", "A1", "Q2", "A2"]
EDITED_AWAY = ["Q1", "A1", "Q2-first-version", "A3"]


# --- ChatGPT ---------------------------------------------------------------------------------


def _gpt_node(node_id, parent, children, role=None, parts=None, t=None, **extra):
    message = None
    if role is not None:
        message = {
            "id": f"msg-{node_id}",
            "author": {"role": role, "name": None, "metadata": {}},
            "create_time": t,
            "update_time": None,
            "content": extra.pop("content", {"content_type": "text", "parts": parts or []}),
            "status": "finished_successfully",
            "end_turn": True,
            "weight": 1.0,
            "metadata": extra.pop("metadata", {}),
            "recipient": extra.pop("recipient", "all"),
        }
    return node_id, {"id": node_id, "message": message, "parent": parent, "children": children}


def chatgpt_conversation(title: str = "Trip to Lisbon", **overrides: Any) -> dict[str, Any]:
    """One conversation of conversations.json: a root, a hidden system message, then the tree
    above; the older question (q2a) comes first in A1's children, as ChatGPT lists them."""
    nodes = dict(
        [
            _gpt_node("root", None, ["sys"]),
            _gpt_node(
                "sys",
                "root",
                ["q1"],
                "system",
                [""],
                None,
                metadata={"is_visually_hidden_from_conversation": True},
            ),
            _gpt_node("q1", "sys", ["a1"], "user", ["Q1"], T0 + 1),
            _gpt_node("a1", "q1", ["q2a", "q2b"], "assistant", ["A1"], T0 + 2),
            _gpt_node("q2a", "a1", ["a3"], "user", ["Q2-first-version"], T0 + 3),
            _gpt_node("a3", "q2a", [], "assistant", ["A3"], T0 + 4),
            _gpt_node("q2b", "a1", ["a2", "a2b"], "user", ["Q2"], T0 + 5),
            _gpt_node("a2", "q2b", [], "assistant", ["A2"], T0 + 6),
            _gpt_node("a2b", "q2b", [], "assistant", ["A2-regenerated"], T0 + 7),
        ]
    )
    conversation = {
        "title": title,
        "create_time": T0,
        "update_time": T0 + 7,
        "mapping": nodes,
        "moderation_results": [],
        "current_node": "a2b",
        "conversation_id": f"conv-{title}",
        "id": f"conv-{title}",
        "default_model_slug": "gpt-4o",
    }
    conversation.update(overrides)
    return conversation


def chatgpt_with_extras() -> dict[str, Any]:
    """A conversation with what is not text: an image beside the question's text, an attachment,
    a code-interpreter call and its output (a tool message), and a browsing quote."""
    nodes = dict(
        [
            _gpt_node("root", None, ["q1"]),
            _gpt_node(
                "q1",
                "root",
                ["code"],
                "user",
                t=T0 + 1,
                content={
                    "content_type": "multimodal_text",
                    "parts": [
                        {
                            "content_type": "image_asset_pointer",
                            "asset_pointer": "file-service://file-abc",
                            "size_bytes": 1234,
                            "width": 10,
                            "height": 10,
                        },
                        "What is in this picture?",
                    ],
                },
                metadata={"attachments": [{"id": "file-abc", "name": "cat.png"}]},
            ),
            _gpt_node(
                "code",
                "q1",
                ["out"],
                "assistant",
                t=T0 + 2,
                content={"content_type": "code", "language": "python", "text": "print(1)"},
                recipient="python",
            ),
            _gpt_node(
                "out",
                "code",
                ["quote"],
                "tool",
                t=T0 + 3,
                content={"content_type": "execution_output", "text": "1"},
            ),
            _gpt_node(
                "quote",
                "out",
                ["a1"],
                "tool",
                t=T0 + 4,
                content={"content_type": "tether_quote", "url": "u", "text": "t"},
            ),
            _gpt_node("a1", "quote", [], "assistant", ["A cat."], T0 + 5),
        ]
    )
    return {"title": "Picture", "create_time": T0, "mapping": nodes, "current_node": "a1"}


def chatgpt_export(*conversations: dict[str, Any]) -> bytes:
    return json.dumps(list(conversations)).encode()


# --- Open WebUI ------------------------------------------------------------------------------


def _owui(mid, parent, children, role, content, t, **extra):
    message = {
        "id": mid,
        "parentId": parent,
        "childrenIds": children,
        "role": role,
        "content": content,
        "timestamp": int(t),
    }
    if role == "assistant":
        message["model"] = "llama3:8b"
    message.update(extra)
    return mid, message


def openwebui_chat(title: str = "Trip to Lisbon") -> dict[str, Any]:
    messages = dict(
        [
            _owui("q1", None, ["a1"], "user", "Q1", T0 + 1),
            _owui("a1", "q1", ["q2a", "q2b"], "assistant", "A1", T0 + 2),
            _owui("q2a", "a1", ["a3"], "user", "Q2-first-version", T0 + 3),
            _owui("a3", "q2a", [], "assistant", "A3", T0 + 4),
            _owui(
                "q2b",
                "a1",
                ["a2", "a2b"],
                "user",
                "Q2",
                T0 + 5,
                files=[{"type": "file", "name": "notes.pdf"}, {"type": "image", "url": "x"}],
            ),
            _owui("a2", "q2b", [], "assistant", "A2", T0 + 6),
            _owui("a2b", "q2b", [], "assistant", "A2-regenerated", T0 + 7),
        ]
    )
    return {
        "id": f"chat-{title}",
        "user_id": "u-1",
        "title": title,
        "chat": {
            "id": "",
            "title": title,
            "models": ["llama3:8b"],
            "history": {"messages": messages, "currentId": "a2b"},
            "messages": [messages[k] for k in ("q1", "a1", "q2b", "a2b")],
            "timestamp": int(T0 * 1000),
        },
        "updated_at": int(T0 + 7),
        "created_at": int(T0),
        "share_id": None,
        "archived": False,
    }


# --- LibreChat -------------------------------------------------------------------------------

ROOT = "00000000-0000-0000-0000-000000000000"


def _lc(mid, parent, by_user, text, t, **extra):
    return {
        "messageId": mid,
        "parentMessageId": parent,
        "conversationId": "c-1",
        "sender": "User" if by_user else "GPT-4",
        "isCreatedByUser": by_user,
        "text": text,
        "createdAt": f"2023-11-14T22:{13 + t:02d}:20.000Z",
        "updatedAt": f"2023-11-14T22:{13 + t:02d}:20.000Z",
        "error": False,
        "unfinished": False,
        **extra,
    }


def librechat_messages() -> list[dict[str, Any]]:
    """Flat, as LibreChat's "messages" export has them. Without a current node, the newest leaf
    (A2-regenerated) is the current branch."""
    return [
        _lc("q1", ROOT, True, "Q1", 1),
        _lc("a1", "q1", False, "A1", 2),
        _lc("q2a", "a1", True, "Q2-first-version", 3),
        _lc("a3", "q2a", False, "A3", 4),
        _lc("q2b", "a1", True, "Q2", 5),
        _lc("a2", "q2b", False, "A2", 6),
        _lc("a2b", "q2b", False, "A2-regenerated", 7),
    ]


def librechat_export(title: str = "Trip to Lisbon", recursive: bool = False) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "conversationId": "c-1",
        "title": title,
        "endpoint": "openAI",
        "options": {"model": "gpt-4", "endpoint": "openAI"},
        "exportAt": "2023-11-15T10:00:00",
        "branches": True,
        "recursive": recursive,
    }
    messages = librechat_messages()
    if not recursive:
        doc["messages"] = messages
        return doc
    by_id = {m["messageId"]: {**m, "children": []} for m in messages}
    roots = []
    for m in messages:
        node = by_id[m["messageId"]]
        (roots if m["parentMessageId"] == ROOT else by_id[m["parentMessageId"]]["children"]).append(
            node
        )
    doc["messagesTree"] = roots
    return doc
