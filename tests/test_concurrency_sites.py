"""One bridge from sync to async code, and every thread named (docs/architecture.md, "Threads and
event loops"; ../shared/conventions.md, "Concurrency and waiting").

These read the app's code (the packages of the import contract) for every call that starts a
thread, an executor or an event loop, or runs async code from sync code:
- only `core.bridge` runs async code from sync code (anyio's blocking portal), and only the
  in-memory channel layer hands a coroutine to another loop; nothing else makes a loop;
- every thread and executor is given a name, and each name is in the architecture's list (and
  each name in the list is started somewhere), so a new thread cannot come in unnamed or
  undocumented.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PACKAGES: list[str] = PYPROJECT["tool"]["importlinter"]["root_packages"]
ARCHITECTURE = ROOT / "docs" / "architecture.md"
SECTION = "### Threads and event loops"

# Calls that make a loop or run async code from sync code (or hand it to another loop), by the
# name called; `run` only as asyncio's or anyio's.
BRIDGING = {
    "new_event_loop",
    "get_event_loop",
    "run_until_complete",
    "run_forever",
    "run_coroutine_threadsafe",
    "async_to_sync",
    "start_blocking_portal",
    "BlockingPortal",
    "to_thread",
    "run_in_executor",
}
RUNNERS = {"asyncio", "anyio"}  # `asyncio.run(...)`, `anyio.run(...)`
# Calls that start a thread or a pool of them, and the keyword that names it.
THREADS = {
    "Thread": "name",
    "Timer": "name",
    "ThreadPoolExecutor": "thread_name_prefix",
    "start_blocking_portal": "name",
}
# The only places allowed to bridge, and how.
ALLOWED_BRIDGING = {
    ("core/bridge.py", "anyio.run"),  # the bridge's loop
    ("core/bridge.py", "BlockingPortal"),  # ... and its portal
    ("core/channel_layers.py", "run_coroutine_threadsafe"),  # in-memory group_send to its loop
}


def app_files(root: Path, packages: list[str]) -> list[Path]:
    return sorted(p for package in packages for p in (root / package).rglob("*.py"))


def called_name(call: ast.Call) -> tuple[str, str | None]:
    """The name called and, for `x.name(...)`, the name of `x` (when it is a plain name)."""
    func = call.func
    if isinstance(func, ast.Name):
        return func.id, None
    if isinstance(func, ast.Attribute):
        owner = func.value.id if isinstance(func.value, ast.Name) else None
        return func.attr, owner
    return "", None


def constants(tree: ast.Module) -> dict[str, str]:
    """The module's string constants (`THREAD_NAME = "..."`)."""
    found = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            found[node.targets[0].id] = node.value.value
    return found


def thread_name(value: ast.expr, known: dict[str, str]) -> str | None:
    """A thread's name as the architecture writes it: an f-string's values as `<...>`."""
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return value.value
    if isinstance(value, ast.Name):
        return known.get(value.id)
    if isinstance(value, ast.JoinedStr):
        parts = [part.value if isinstance(part, ast.Constant) else "<>" for part in value.values]
        return "".join(str(p) for p in parts)
    return None


def sites(
    root: Path = ROOT, packages: list[str] = PACKAGES
) -> tuple[set[tuple[str, str]], dict[str, str], list[str]]:
    """(where bridging happens, the thread names started and where, the unnamed threads)."""
    bridging: set[tuple[str, str]] = set()
    named: dict[str, str] = {}
    unnamed: list[str] = []
    for path in app_files(root, packages):
        tree = ast.parse(path.read_text(), str(path))
        known = constants(tree)
        where = path.relative_to(root).as_posix()
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name, owner = called_name(node)
            if name in BRIDGING or (name == "run" and owner in RUNNERS):
                bridging.add((where, name if name != "run" else f"{owner}.run"))
            if name in THREADS:
                keyword = next((k for k in node.keywords if k.arg == THREADS[name]), None)
                given = thread_name(keyword.value, known) if keyword is not None else None
                if given is None:
                    unnamed.append(f"{where}:{node.lineno}")
                else:
                    named[given] = where
    return bridging, named, unnamed


def documented_names() -> list[str]:
    """The thread names that open the items of the architecture's list."""
    text = ARCHITECTURE.read_text()
    assert SECTION in text
    section = text.split(SECTION, 1)[1].split("\n#", 1)[0]
    return re.findall(r"^- `([^`]+)`", section, flags=re.MULTILINE)


def as_written(name: str) -> str:
    """`turn-<id>-heartbeat` in the text is `turn-<>-heartbeat` in the code."""
    return re.sub(r"<[^>]*>", "<>", name)


def test_only_the_bridge_runs_async_code_from_sync_code_and_nothing_else_makes_a_loop():
    bridging, _, _ = sites()
    assert bridging == ALLOWED_BRIDGING


def test_every_thread_and_executor_is_named():
    _, _, unnamed = sites()
    assert unnamed == []


def test_every_thread_is_in_the_architectures_list_and_every_listed_one_is_started():
    _, named, _ = sites()
    documented = documented_names()
    assert len(documented) == len(set(documented))
    assert {as_written(name) for name in documented} == set(named)


def test_the_rule_finds_a_new_loop_and_an_unnamed_thread(tmp_path):
    # The reading itself: a module that starts a loop and a thread of its own is caught.
    package = tmp_path / "core"
    package.mkdir()
    (package / "extra.py").write_text(
        "import asyncio, threading\n"
        "def go(coro):\n"
        "    threading.Thread(target=print).start()\n"
        "    return asyncio.run(coro)\n"
    )
    bridging, named, unnamed = sites(tmp_path, ["core"])
    assert bridging == {("core/extra.py", "asyncio.run")}
    assert named == {}
    assert unnamed == ["core/extra.py:3"]
