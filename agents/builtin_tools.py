"""The declarations of the built-in tools (agents.registry): `REGISTRY`, in the order the agent
offers them. The checkpoint and memory tools are methods of RollbackAgent
(agents.checkpoint_tools, agents.memory_tools), the workspace and plan tools too
(agents.file_tools); `calculate` is a function (agents.calculator).

Each tool's intents are the requests the offline demo model understands, tried by rank over all
the offered tools: the anchored ones whose free text may say anything (remember, write a file)
first, so that a fact or a file's content that says "restore ..." is not taken for a rollback.
"""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings

from sandbox.availability import availability
from sandbox.network import network_mode

from .calculator import calculate
from .registry import BuiltinTool, Effect, Group, Intent, ToolRegistry
from .shell_replies import shell_reply

INTRO = "You are Rollback's assistant. Answer clearly; use Markdown where it helps."

CHECKPOINTS = Group(
    "checkpoints",
    10,
    "The user can save checkpoints of this conversation and roll back to them. When they ask "
    "you to checkpoint, list, inspect, delete, clean up or roll back, use the checkpoint tools.",
)
ARITHMETIC = Group(
    "arithmetic", 20, "Use the {names} tool for arithmetic instead of working it out yourself."
)
# The memory tools change no conversation state: memories belong to the user, not the branch,
# so a checkpoint after them would mark nothing a restore could undo; but a memory outlives
# every restore, so `remember` is external.
MEMORY = Group(
    "memory",
    30,
    "You remember facts about the user across conversations: save a lasting fact with the "
    "remember tool, look one up with the recall tool. Memories belong to the user, not to this "
    "conversation: a rollback does not erase them.",
)
FILES = Group(
    "files",
    40,
    "This conversation has a workspace of files: use {names} when the user asks you to "
    "create, change or look at files. A checkpoint keeps the files as they are, and a restore "
    "brings them back.",
)
PLAN = Group("plan", 50, "Keep a plan for longer tasks with {names}.")
SHELL = Group(
    "shell",
    45,
    "You can run commands over the workspace's files with {names}: in a sandbox with no "
    "network unless the operator allows some, where what a command changes in the files is "
    "kept as new versions (a restore undoes it). Use them to run code, scripts and tests the "
    "user asks for.",
)

# The demo's patterns: a name (of a checkpoint), a file's path (with an extension: notes.md,
# docs/plan.txt), quoted or not; a polite start; the words for a todo.
_NAME = r"[\"'“”‘’]?(?P<name>[^\"'“”‘’]+?)[\"'“”‘’]?"
_PATH = r"[\"'`“”‘’]?(?P<path>[^\s\"'`“”‘’]+\.[A-Za-z0-9]+)[\"'`“”‘’]?"
_PLEASE = r"^\s*(?:please\s+)?(?:can you\s+|could you\s+)?"
_TODO = r"(?:todo|to-do|task)"
_CATEGORIES = ("System", "Environment", "Skill", "Project", "Comm", "Security")


def _category_of(key: str) -> str:
    first = re.split(r"[._-]", key, maxsplit=1)[0].lower()
    return next((c for c in _CATEGORIES if c.lower() == first), "Project")


def _unquoted(text: str) -> str:
    """`text` without one pair of quotes around it."""
    text = text.strip()
    pairs = {'"': '"', "'": "'", "“": "”", "‘": "’", "`": "`"}
    if len(text) >= 2 and pairs.get(text[0]) == text[-1]:
        return text[1:-1]
    return text


def _remember_args(groups: dict[str, Any]) -> dict[str, Any]:
    """The fact under the key given (category Project, unless the key starts with another
    category's name, as in "comm.tone: be brief")."""
    key = groups["key"]
    return {"key": key, "category": _category_of(key), "l0": groups["fact"]}


def _sandboxed() -> bool:
    return availability().ok


def _shell_settled() -> tuple[Effect, bool]:
    """The shell tools' effect and approval: with no network a restore undoes all a command
    did (`workspace`, no approval); with one it may have acted outside (`external`, the ledger
    keeps it), and it waits for approval unless SANDBOX_NETWORK_APPROVAL is off."""
    if network_mode() == "none":
        return "workspace", False
    return "external", bool(settings.SANDBOX_NETWORK_APPROVAL)


def _calculated(result: str) -> str | None:
    return None if result.startswith("Error") else f"The result is **{result}**."


REGISTRY = ToolRegistry(
    [
        BuiltinTool(
            "calculate",
            "none",
            ARITHMETIC,
            function=calculate,
            intents=(
                Intent(
                    160,
                    re.compile(
                        r"\b(?:calculate|compute|evaluate|what is|what's)\s+"
                        r"(?P<expr>[-+*/%().\d\s^×÷]+?)\s*[?.!]*$",
                        re.I,
                    ),
                    lambda g: {"expression": g["expr"].strip()},
                ),
            ),
            # No asked_as: "calculate" is an ordinary word too, left alone in a result.
            reply=_calculated,
        ),
        BuiltinTool(
            "create_checkpoint",
            "none",
            CHECKPOINTS,
            checkpoint=True,
            intents=(
                # Anchored at the start, and tried after delete/info/clean-up, so "delete
                # checkpoint 4" or "please describe checkpoint 4" never create one named "4".
                Intent(
                    150,
                    re.compile(
                        r"^\s*(?:please\s+)?(?:(?:save|create|make|take)(?: a)?\s+)?checkpoint"
                        rf"(?:\s+(?:as|named|called))?\s+{_NAME}\s*[.!?]*$",
                        re.I,
                    ),
                    lambda g: {"name": g["name"].strip()},
                ),
            ),
            asked_as="checkpoint as …",
        ),
        BuiltinTool(
            "list_checkpoints_tool",
            "none",
            CHECKPOINTS,
            checkpoint=True,
            intents=(
                Intent(110, re.compile(r"\b(?:list|show)(?: all| my| the)? checkpoints\b", re.I)),
            ),
            asked_as="list the checkpoints",
            rewrites=(
                (
                    r"Use list_checkpoints_tool to see the checkpoints\.",
                    "Ask me to “list the checkpoints” to see them.",
                ),
                (r"\(see list_checkpoints_tool\)", "(ask me to “list the checkpoints”)"),
            ),
        ),
        BuiltinTool(
            "rollback_to_checkpoint_tool",
            "none",
            CHECKPOINTS,
            checkpoint=True,
            intents=(
                Intent(
                    100,
                    re.compile(
                        r"\b(?:roll ?back|rewind|restore|go back)\s+(?:to\s+)?(?:checkpoint\s+)?"
                        rf"{_NAME}\s*[.!?]*$",
                        re.I,
                    ),
                    lambda g: {"checkpoint_id_or_name": g["name"].strip()},
                ),
            ),
            asked_as="roll back to …",
        ),
        BuiltinTool(
            "delete_checkpoint_tool",
            "none",
            CHECKPOINTS,
            checkpoint=True,
            intents=(
                Intent(
                    120,
                    re.compile(r"\bdelete checkpoint\s+#?(?P<id>\d+)\b", re.I),
                    lambda g: {"checkpoint_id": int(g["id"])},
                ),
            ),
            asked_as="delete checkpoint …",
        ),
        BuiltinTool(
            "get_checkpoint_info_tool",
            "none",
            CHECKPOINTS,
            checkpoint=True,
            intents=(
                Intent(
                    130,
                    re.compile(
                        r"\b(?:info|details|describe)(?: (?:on|about|for|of))? checkpoint\s+"
                        r"#?(?P<id>\d+)\b",
                        re.I,
                    ),
                    lambda g: {"checkpoint_id": int(g["id"])},
                ),
            ),
            asked_as="describe checkpoint …",
        ),
        BuiltinTool(
            "cleanup_auto_checkpoints_tool",
            "none",
            CHECKPOINTS,
            checkpoint=True,
            intents=(
                Intent(
                    140,
                    re.compile(
                        r"\bclean ?up\b.*\bcheckpoints\b(?:.*\bkeep(?:ing)?\s+(?P<keep>\d+))?",
                        re.I,
                    ),
                    lambda g: {"keep_latest": int(g["keep"]) if g.get("keep") else 5},
                ),
            ),
            asked_as="clean up the checkpoints",
        ),
        BuiltinTool(
            "remember",
            "external",
            MEMORY,
            intents=(
                # "remember KEY: FACT", anchored at the start and tried first.
                Intent(
                    10,
                    re.compile(
                        r"^\s*(?:please\s+)?remember\s+(?:that\s+)?(?P<key>[^\W_][\w.-]*)\s*:\s*"
                        r"(?P<fact>\S.*?)\s*$",
                        re.I | re.S,
                    ),
                    _remember_args,
                ),
            ),
        ),
        BuiltinTool(
            "recall",
            "none",
            MEMORY,
            intents=(
                Intent(
                    20,
                    re.compile(
                        r"^\s*(?:please\s+)?recall\s+(?P<query>\S.*?)\s*[?.!]*$", re.I | re.S
                    ),
                    lambda g: {"query": g["query"]},
                ),
            ),
            rewrites=(
                (
                    r"Call recall with key=\.\.\. to read one in full\.",
                    "Ask me to “recall” one by its key to read it in full.",
                ),
            ),
        ),
        BuiltinTool(
            "list_dir",
            "none",
            FILES,
            intents=(
                Intent(
                    60,
                    re.compile(
                        r"\b(?:list|show)(?: me)?(?: all| my| the)? files\b"
                        r"(?:\s+(?:in|under)\s+(?:the\s+)?(?:folder\s+)?(?P<folder>[^\s?.!]+))?",
                        re.I,
                    ),
                    lambda g: {"path": g["folder"] or ""},
                ),
            ),
            asked_as="list the files",
            rewrites=(
                (r"Use list_dir to see the files\.", "Ask me to “list the files” to see them."),
            ),
        ),
        BuiltinTool(
            "read_file",
            "none",
            FILES,
            intents=(
                Intent(
                    40,
                    re.compile(
                        rf"{_PLEASE}(?:read|open|show me|show|cat)\s+(?:me\s+)?(?:the\s+)?"
                        rf"(?:file\s+)?{_PATH}\s*[.!?]*$",
                        re.I,
                    ),
                    lambda g: {"path": g["path"]},
                ),
            ),
            asked_as="read …",
            rewrites=((r"use read_file to read it\.", "ask me to “read” it."),),
            empty_reply="The file is empty.",
        ),
        BuiltinTool(
            "write_file",
            "workspace",
            FILES,
            intents=(
                # "write a file notes.md saying hello", "create notes.md with: ...": anchored at
                # the start, so the content may say anything (even "roll back to start").
                Intent(
                    30,
                    re.compile(
                        rf"{_PLEASE}(?:write|create|make|save)\s+(?:(?:a|an|the|new)\s+)*"
                        rf"(?:file\s+)?(?:called\s+|named\s+)?{_PATH}\s*(?:,\s*)?"
                        r"(?:saying|with(?: the content)?|containing|that says|:)\s*:?\s*"
                        r"(?P<content>.*?)\s*$",
                        re.I | re.S,
                    ),
                    lambda g: {"path": g["path"], "content": _unquoted(g["content"])},
                ),
            ),
            asked_as="write … saying …",
        ),
        BuiltinTool(
            "delete_file",
            "workspace",
            FILES,
            intents=(
                Intent(
                    50,
                    re.compile(
                        rf"{_PLEASE}(?:delete|remove)\s+(?:the\s+)?(?:file\s+)?{_PATH}\s*[.!?]*$",
                        re.I,
                    ),
                    lambda g: {"path": g["path"]},
                ),
            ),
            asked_as="delete …",
        ),
        BuiltinTool(
            "create_todo",
            "workspace",
            PLAN,
            intents=(
                Intent(
                    70,
                    re.compile(
                        rf"{_PLEASE}(?:add|create|new)\s+(?:a\s+)?{_TODO}(?:\s+item)?\s*:?\s+"
                        r"(?P<title>\S.*?)\s*[.!]*$",
                        re.I | re.S,
                    ),
                    lambda g: {"title": _unquoted(g["title"])},
                ),
            ),
            asked_as="add a todo: …",
        ),
        BuiltinTool(
            "get_todo",
            "none",
            PLAN,
            intents=(
                Intent(
                    90,
                    re.compile(
                        rf"\b(?:show|list|see|what(?:'s| is) on)(?: me)?(?: all| my| the)?\s+"
                        rf"(?:{_TODO}s?(?: list)?|plan)\b",
                        re.I,
                    ),
                ),
            ),
            asked_as="show the todos",
            rewrites=(
                (r", as get_todo shows it\.", ", as “show the todos” lists it."),
                (r"Use get_todo to see the todos\.", "Ask me to “show the todos” to see them."),
            ),
        ),
        BuiltinTool(
            "mark_todo_done",
            "workspace",
            PLAN,
            intents=(
                Intent(
                    80,
                    re.compile(
                        rf"\b(?:mark|tick(?: off)?|check off|complete|finish)\s+(?:the\s+)?"
                        rf"{_TODO}\s+#?(?P<id>\d+)\b",
                        re.I,
                    ),
                    lambda g: {"todo_id": int(g["id"])},
                ),
            ),
            asked_as="mark todo … done",
        ),
        BuiltinTool(
            "run_shell",
            "workspace",
            SHELL,
            offered=_sandboxed,
            settled=_shell_settled,
            intents=(
                # "run ls", "run `python3 main.py`": anchored, tried after "run the tests".
                Intent(
                    26,
                    re.compile(rf"{_PLEASE}run\s+(?P<command>\S.*?)\s*$", re.I | re.S),
                    lambda g: {"command": _unquoted(g["command"])},
                ),
            ),
            asked_as="run …",
            reply=shell_reply,
        ),
        BuiltinTool(
            "run_tests",
            "workspace",
            SHELL,
            offered=_sandboxed,
            settled=_shell_settled,
            intents=(Intent(25, re.compile(rf"{_PLEASE}run (?:the |my )?tests\s*[.!?]*$", re.I)),),
            asked_as="run the tests",
            reply=shell_reply,
        ),
    ]
)
