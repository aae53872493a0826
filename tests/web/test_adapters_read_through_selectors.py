"""The adapters read through the domain apps' selectors: no page, API view, socket or the chat
page's context reads the ORM itself (a model's `.objects`, or a query built with `.filter()`,
`.select_related()` and the like), so every lookup starts from the user in one place
(conventions.md, docs/architecture.md). The admin is left out: a ModelAdmin is the ORM's own."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ADAPTERS = [
    *sorted((ROOT / "web" / "pages").rglob("*.py")),
    *sorted((ROOT / "web" / "api").rglob("*.py")),
    *sorted((ROOT / "web" / "ws").rglob("*.py")),
    ROOT / "web" / "chat_state.py",
    ROOT / "web" / "places.py",
    ROOT / "web" / "rendering.py",
    ROOT / "web" / "telegram_webhook.py",
]
# Methods that build or run a query; none of them is a method of a list, a dict or a string.
QUERY_METHODS = {
    "filter",
    "exclude",
    "annotate",
    "aggregate",
    "select_related",
    "prefetch_related",
    "values_list",
    "order_by",
    "only",
    "defer",
    "first",
    "last",
    "exists",
    "in_bulk",
    "raw",
}


def orm_reads(source: str) -> list[tuple[int, str]]:
    """(line, what) for each direct read of the ORM in a module's source."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr == "objects":
            found.append((node.lineno, ".objects"))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in QUERY_METHODS
        ):
            found.append((node.lineno, f".{node.func.attr}()"))
    return found


def test_the_scan_sees_a_direct_read():
    source = "def view(user):\n    return Message.objects.filter(pk=1).first()\n"
    assert {what for _, what in orm_reads(source)} == {".objects", ".filter()", ".first()"}
    assert orm_reads("def view(user):\n    return message_for_user(user, 1)\n") == []


@pytest.mark.parametrize("path", ADAPTERS, ids=lambda p: str(p.relative_to(ROOT)))
def test_an_adapter_reads_through_selectors(path: Path):
    reads = orm_reads(path.read_text(encoding="utf-8"))
    where = ", ".join(f"line {line}: {what}" for line, what in reads)
    assert not reads, f"{path.relative_to(ROOT)} reads the ORM itself ({where}): use a selector"
