"""Every figure README.md and docs/architecture.md quote from a test equals what that test holds.

Each entry names the sentence (a pattern whose groups are the figures, written as digits or as
words) and, for each figure, the test module's constant that holds it (read from the module's
source: a top-level `NAME = value`, or `A, B = x, y`). A reworded sentence fails here too: the
entry moves with it. A new figure quoted from a test gets an entry, and its test a constant."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WORDS = {
    "no": 0,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "fifty": 50,
}


@dataclass(frozen=True)
class Quoted:
    doc: str  # the file that quotes, from the repository's root
    sentence: str  # a pattern; whitespace matches any run of it (the files are wrapped)
    test: str  # the test module that holds the figures
    constants: tuple[str, ...]  # one per group of `sentence`, in order

    def __str__(self) -> str:
        return f"{self.doc}: {self.sentence[:40]}"


QUOTED = [
    Quoted(
        "README.md",
        r"A turn runs (\d+) SQL statements from the POST that starts it to its end",
        "tests/web/api/test_turn_queries.py",
        ("TURN_STATEMENTS",),
    ),
    Quoted(
        "README.md",
        r"a burst of (\d+) requests uses a handful \(`tests/deploy/test_connections.py` holds one "
        r"to (\d+) through (\w+) bursts of (\d+)\)",
        "tests/deploy/test_connections.py",
        ("BURST", "POOL_SIZE", "BURSTS", "BURST"),
    ),
    Quoted(
        "README.md",
        r"bursts of (\d+) requests\),",
        "tests/deploy/test_connections.py",
        ("BURST",),
    ),
    Quoted(
        "README.md",
        r"sockets left idle or open for (\w+) minutes",
        "tests/deploy/test_soak.py",
        ("OPEN_MINUTES",),
    ),
    Quoted(
        "docs/architecture.md",
        r"a page of history is a position range: (\w+) query, whatever the branch's depth or "
        r"length",
        "tests/sessions_app/test_history.py",
        ("HISTORY_QUERIES",),
    ),
    Quoted(
        "docs/architecture.md",
        r"`tests/workspace/test_query_counts.py` counts the same statements with (\d+) and with "
        r"(\d+) files",
        "tests/workspace/test_query_counts.py",
        ("FEW_FILES", "MANY_FILES"),
    ),
    Quoted(
        "docs/architecture.md",
        r"Cost is constant \(the tests count the queries at ([\d,]+) and ([\d,]+) messages\)",
        "tests/checkpoints/test_services.py",
        ("FEW_MESSAGES", "MANY_MESSAGES"),
    ),
    Quoted(
        "docs/architecture.md",
        r"\(tested at ([\d,]+) and ([\d,]+) messages, (\d+) and (\d+) files, on SQLite and "
        r"PostgreSQL\)",
        "tests/checkpoints/test_compare.py",
        ("FEW_MESSAGES", "MANY_MESSAGES", "FEW_FILES", "MANY_FILES"),
    ),
    Quoted(
        "docs/architecture.md",
        r"A socket costs (\w+) query per event \(its access check\)",
        "tests/web/test_stream_store.py",
        ("SOCKET_QUERIES_PER_EVENT",),
    ),
    Quoted(
        "docs/architecture.md",
        r"The send view answers with the composer alone \((\w+) query for its state\)",
        "tests/web/test_stream_store.py",
        ("COMPOSER_QUERIES",),
    ),
]


def figure(text: str) -> int:
    text = text.lower().replace(",", "")
    return WORDS[text] if text in WORDS else int(text)


def constants(test: str) -> dict[str, object]:
    """The module's top-level names bound to literals (`NAME = 4`, `A, B = 1, 500`)."""
    pairs: list[tuple[ast.expr, ast.expr]] = []
    for node in ast.parse((ROOT / test).read_text()).body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                    pairs += zip(target.elts, node.value.elts, strict=True)
                else:
                    pairs.append((target, node.value))
    found: dict[str, object] = {}
    for name, value in pairs:
        if isinstance(name, ast.Name) and isinstance(value, ast.Constant):
            found[name.id] = value.value
    return found


@pytest.mark.parametrize("quoted", QUOTED, ids=str)
def test_the_figure_is_the_tests(quoted):
    pattern = r"\s+".join(quoted.sentence.split(" "))
    text = (ROOT / quoted.doc).read_text()
    found = re.search(pattern, text)
    assert found, f"{quoted.doc} no longer says: {quoted.sentence}"
    held = constants(quoted.test)
    said = [figure(value) for value in found.groups()]
    expected = [held[name] for name in quoted.constants]
    assert said == expected, f"{quoted.doc} says {said}, {quoted.test} holds {expected}"


def test_a_figure_in_words_or_digits_reads_the_same():
    assert [figure(t) for t in ("one", "Two", "46", "10,000", "fifty")] == [1, 2, 46, 10_000, 50]
