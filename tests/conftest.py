from __future__ import annotations

import functools
import inspect
import logging
import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from checkpoints.services import checkpoint_create
from core.logs import ContextFilter
from sessions_app.models import Branch, Message
from sessions_app.services import message_append, session_create
from tests import prebuilt

HERE = Path(__file__).parent
# What runs in the PostgreSQL/Redis phase of `make test` (`-m servers`), besides every test marked
# `postgres` or `redis` (which only that phase can run): the served stacks, and the suites whose
# behaviour depends on the database engine. The latter run in the SQLite phase too, since the
# product runs on either: full-text search, migrations that rewrite rows, and every count of SQL
# statements (an ORM query can take one more statement on one engine than on the other).
SERVER_DIRS = ("deploy", "gateway")
SERVER_FILES = frozenset(
    {
        "sessions_app/test_search.py",
        "web/test_search_pages.py",
        "ops/test_erasure.py",  # deletes in batches sized by the engine's parameter limit
        "e2e/test_worker.py",
    }
)
QUERY_COUNTS = frozenset({"django_assert_num_queries", "django_assert_max_num_queries"})
# Under xdist (`--dist loadgroup`) each group runs in one worker, one test after another. Each
# served stack's module is a group: its processes (module fixtures) start once, and it flushes
# the Redis database of the worker running it, which no other worker uses (tests/workers.py), so
# the stacks of two modules run side by side in two workers. The LiteLLM gateway's tests are one
# too: its proxy (a session fixture, seconds of CPU to start) starts in one worker, not in each
# worker that gets one of them. The browser tests are two groups:
# each starts its served app and Chromium (package fixtures) once in its worker, and the two
# halves (balanced by the durations CI lists; a new module joins the first) run side by side.
SECOND_BROWSER_HALF = frozenset(
    {
        "test_compare.py",
        "test_demo.py",
        "test_display.py",
        "test_feedback.py",
        "test_files.py",
        "test_look.py",
        "test_pages.py",
        "test_pending_accounts.py",
        "test_search.py",
        "test_session_settings.py",
        "test_session_tabs.py",
        "test_sessions.py",
        "test_sso.py",
        "test_sso_pending_groups.py",
        "test_share.py",
        "test_signin_drafts_keys.py",
        "test_streaming.py",
        "test_telegram_profile.py",
        "test_usage.py",
    }
)
# The order in which xdist hands the groups out (`--no-loadscope-reorder` keeps the collection's
# order): the longest first, so that none starts last and runs alone at the end. The browser
# halves (the SQLite phase), the three longest stacks (the PostgreSQL phase: the soak stack runs
# apart, `make test-soak`), then the other stacks, then the rest.
FIRST_GROUPS = (
    "browser-1",
    "browser-2",
    "stack-deploy-test_streams",
    "stack-deploy-test_topology",
    "stack-deploy-test_health",
)


def needs_servers(item: pytest.Item) -> bool:
    """Whether the test runs in the PostgreSQL/Redis phase (see SERVER_DIRS)."""
    if item.get_closest_marker("postgres") or item.get_closest_marker("redis"):
        return True
    relative = Path(item.path).relative_to(HERE)
    if relative.parts[0] in SERVER_DIRS or relative.as_posix() in SERVER_FILES:
        return True
    if "migration" in item.name or QUERY_COUNTS & set(getattr(item, "fixturenames", ())):
        return True
    function = getattr(item, "function", None)
    try:
        source = inspect.getsource(function) if function is not None else ""
    except (OSError, TypeError):
        source = ""
    return "CaptureQueriesContext" in source or "connection.vendor" in source


# `make check` (the inner loop) leaves out, besides the browser and deployment tests, the tests
# that start the app as processes of its own (daphne, manage.py, Celery: tests/procs.py) and wait
# for them to serve: a minute of the suite's CPU each, run by `make test` alone.
SERVED_SIGNS = ("tests.procs", "subprocess")


@functools.cache
def _starts_processes(path: Path) -> bool:
    text = path.read_text(encoding="utf-8")
    return any(sign in text for sign in SERVED_SIGNS)


def pytest_itemcollected(item):
    """The xdist groups, set as each test is collected: before any
    pytest_collection_modifyitems, xdist's included (it reads them there)."""
    parts = Path(item.path).relative_to(HERE).parts
    if parts[0] in ("deploy", "gateway") or parts == ("e2e", "test_worker.py"):
        item.add_marker(pytest.mark.xdist_group("stack-" + "-".join(parts).removesuffix(".py")))
    elif parts[0] == "e2e":
        half = 2 if parts[-1] in SECOND_BROWSER_HALF else 1
        item.add_marker(pytest.mark.xdist_group(f"browser-{half}"))


def _group_rank(item: pytest.Item) -> int:
    marker = item.get_closest_marker("xdist_group")
    group = marker.args[0] if marker and marker.args else ""
    if group in FIRST_GROUPS:
        return FIRST_GROUPS.index(group)
    return len(FIRST_GROUPS) + (0 if group else 1)


def pytest_addoption(parser):
    parser.addoption(
        "--collected-list",
        metavar="PATH",
        help="write every collected test id to PATH, before -m or -k deselects any"
        " (what `make test-count` holds the phases' reports against)",
    )
    parser.addoption(
        "--servers-files",
        metavar="PATH",
        help="write the files that hold tests of the PostgreSQL/Redis phase (needs_servers) to"
        " PATH, one a line: what `make test` has that phase collect, instead of the whole suite",
    )


def _write_collected(config, items) -> None:
    """`--collected-list`: the whole collection, written by the phase that collects it anyway
    (one worker under xdist: each collects the same), instead of a collection of its own;
    `--servers-files`: the files of the tests that need a server."""
    if os.environ.get("PYTEST_XDIST_WORKER", "gw0") != "gw0":
        return
    path = config.getoption("collected_list")
    if path:
        Path(path).write_text("".join(f"{item.nodeid}\n" for item in items))
    path = config.getoption("servers_files")
    if path:
        files = dict.fromkeys(item.nodeid.split("::")[0] for item in items if needs_servers(item))
        Path(path).write_text("".join(f"{name}\n" for name in files))


def pytest_collection_modifyitems(config, items):
    """Marks the tests of the PostgreSQL/Redis phase `servers` (needs_servers), and skips the
    tests that need a server that is not configured. The PostgreSQL phase
    sets ROLLBACK_REQUIRE_POSTGRES=1, and then a missing server fails the run instead. Runs
    before the `-m` deselection (a conftest's hook before the mark plugin's)."""
    _write_collected(config, items)
    on_postgres = os.environ.get("DATABASE_URL", "").startswith(("postgres", "postgresql"))
    on_redis = os.environ.get("REDIS_URL", "").startswith("redis")
    if os.environ.get("ROLLBACK_REQUIRE_POSTGRES") == "1" and not (on_postgres and on_redis):
        raise pytest.UsageError(
            "ROLLBACK_REQUIRE_POSTGRES=1 needs DATABASE_URL (PostgreSQL) and REDIS_URL set"
        )
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=_group_rank)  # stable: the collection's order within each rank
    for item in items:
        if needs_servers(item):
            item.add_marker(pytest.mark.servers)
        if _starts_processes(Path(item.path)):
            item.add_marker(pytest.mark.served)
    for marker, present in (("postgres", on_postgres), ("redis", on_redis)):
        if present:
            continue
        skip = pytest.mark.skip(reason=f"needs {marker} (runs in the second phase of make test)")
        for item in items:
            if marker in item.keywords:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix):
    """On SQLite the test database is a file (in memory where /dev/shm is), as the product's own
    is, not Django's shared in-memory database. That one locks whole tables between connections
    and answers "database table is locked" at once, without the busy timeout: a request answering
    a turn while the turn's thread writes its heartbeat failed that way under load. A file takes
    the product's own locking (WAL, IMMEDIATE transactions, a 20 s busy timeout)."""
    from django.conf import settings

    db = settings.DATABASES["default"]
    if db["ENGINE"] != "django.db.backends.sqlite3":
        yield
        return
    shm = Path("/dev/shm")  # noqa: S108 - a private directory is made in it below
    parent = shm if shm.is_dir() and os.access(shm, os.W_OK) else None
    directory = Path(tempfile.mkdtemp(prefix="rollback-tests-", dir=parent))
    db.setdefault("TEST", {})["NAME"] = str(directory / "test.sqlite3")
    yield
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(autouse=True)
def _fresh_cache():
    """Tests do not share throttle counts or anything else through the cache."""
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    """Test users' passwords need no protection: a fast hasher keeps each of the hundreds of
    users the suite makes from costing a PBKDF2 run."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _no_background_recovery(settings):
    """The recovery job of the embedded mode runs on a thread of the served process; in the
    test process the tests call it themselves."""
    settings.ROLLBACK_IN_PROCESS_RECOVERY = False


@pytest.fixture(autouse=True)
def _no_mcp_server_outlives_its_test():
    """The stdio MCP servers a test started are kept by the process (agents.mcp.kept) for the
    next turns: closed after each test, once its turns on the embedded pool have ended (set up
    before `_no_turn_outlives_its_test`, it is torn down after it), so none leaks into the next
    test or outlives the run."""
    yield
    from agents.mcp import kept

    kept.close_all()


@pytest.fixture(autouse=True)
def _no_turn_outlives_its_test():
    """A turn submitted without `inline_turns` runs on the embedded mode's thread pool: wait
    for it before the database is emptied (SQLite answers "table is locked" otherwise)."""
    yield
    from agents.dispatch import drain

    drain()


@pytest.fixture(autouse=True)
def _one_loop_channel_layer(request, settings):
    """Sockets driven in this process (WebsocketCommunicator) run each test in an event loop of
    its own, and channels_redis keeps its receiving state across loops (a receiver left by one
    test's loop hangs the next one's shutdown): such tests use the in-memory layer. Redis carries
    the events for real in the tests marked `redis` and between the processes of tests/deploy and
    tests/e2e/test_worker.py."""
    if request.node.get_closest_marker("redis") is None:
        settings.CHANNEL_LAYERS = {
            "default": {"BACKEND": "core.channel_layers.InMemoryChannelLayer"}
        }


@pytest.fixture(autouse=True)
def _plain_static_files(settings):
    """Served pages use hashed static names from `collectstatic`; tests render templates without
    running it."""
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }


@pytest.fixture(scope="session", autouse=True)
def _prebuilt_directory(tmp_path_factory) -> None:
    """Where tests.prebuilt keeps what the served stacks share (a migrated database, the
    collected static files), built once per run for all its workers."""
    prebuilt.configure(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="session")
def model_server():
    """A real local Chat Completions server (tests/fakes/chat_server.py), for the whole run."""
    from tests.fakes.chat_server import FakeChatServer

    with FakeChatServer(aside=answer_titles) as server:
        yield server


def answer_titles(body: dict) -> Any:
    """The side answer of the model server: a session's automatic title (agents.titles), so the
    titling request after a first turn never takes an answer a test queued for its turns. A test
    of titles sets `llm.aside = None` to script them."""
    from agents.demo_model import TITLE_MARKER
    from tests.fakes.chat_server import Reply

    first = (body.get("messages") or [{}])[0].get("content")
    return Reply("Fake title") if TITLE_MARKER in str(first or "") else None


@pytest.fixture
def llm(model_server):
    """The model server, with no queued answers and no recorded requests."""
    model_server.reset()
    yield model_server
    model_server.reset()


@pytest.fixture
def fake_llm(llm, settings):
    """The model server, and the app in this process configured to use it."""
    settings.OPENAI_BASE_URL = llm.base_url
    settings.OPENAI_API_KEY = "test-key"
    settings.AGENT_MODEL = "fake-model"
    settings.AGENT_MAX_RETRIES = 2
    settings.AGENT_TIMEOUT = 5
    return llm


@pytest.fixture
def celery_eager():
    """Run Celery tasks in process, as the embedded defaults do, even when REDIS_URL is set."""
    from rollback_site.celery import app

    keys = ("task_always_eager", "task_eager_propagates")
    before = {key: app.conf[key] for key in keys}
    app.conf.update(task_always_eager=True, task_eager_propagates=True)
    yield
    app.conf.update(before)


@pytest.fixture
def inline_turns(settings, celery_eager):
    """Run a submitted turn in the calling thread when its transaction commits."""
    settings.ROLLBACK_RUN_TURNS_INLINE = True


class Records(logging.Handler):
    """Keeps every record that reaches the root logger, its ids filled in as settings.LOGGING's
    handler fills them (core.logs.ContextFilter)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self.addFilter(ContextFilter())

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def log_records():
    """The records logged during the test, down to DEBUG, with their ids (a list)."""
    handler = Records()
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler.records
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="alice-password-1")  # noqa: S106 - a test user's password


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user("bob", password="bob-password-1")  # noqa: S106 - a test user's password


@pytest.fixture
def admin_user(django_user_model):
    return django_user_model.objects.create_superuser("admin", password="admin-password-1")  # noqa: S106 - a test user's password


@pytest.fixture
def session(alice):
    return session_create(owner=alice, name="Python basics")


@pytest.fixture
def branch(session):
    return Branch.objects.get(session=session, is_current=True)


def say(branch: Branch, *texts: str) -> None:
    """Append alternating user/assistant messages."""
    for i, text in enumerate(texts):
        message_append(branch=branch, role="user" if i % 2 == 0 else "assistant", content=text)


def external_call(branch: Branch, tool_name: str, result: str = "done", **args: object):
    """A call of effect `external` stored as a turn stores one (outside a turn): its tool
    message, and its entry in the session's effects ledger."""
    from sessions_app.turns import ledger_record

    tool = message_append(
        branch=branch, role="tool", tool_name=tool_name, tool_args=args, tool_result=result
    )
    Message.objects.filter(pk=tool.pk).update(effect="external")
    tool.refresh_from_db()
    ledger_record(
        session_id=branch.session_id,
        turn_id=None,
        owner_id=branch.session.owner_id,
        messages=[tool],
    )
    return tool


def grow(branch: Branch, n: int, size: int = 0) -> None:
    """Add n messages to a branch in bulk (for size tests), keeping its count right; with
    `size`, each is about that many characters long."""
    filler = "lorem ipsum dolor sit amet " * (size // 27)
    branch.refresh_from_db()
    start = branch.message_count
    Message.objects.bulk_create(
        [
            Message(
                branch=branch,
                position=start + i,
                role="user" if i % 2 == 0 else "assistant",
                content=f"message {start + i}: {filler}" if size else f"message {start + i}",
            )
            for i in range(n)
        ],
        batch_size=2000,
    )
    Branch.objects.filter(pk=branch.pk).update(message_count=start + n)
    branch.refresh_from_db()


def run_hearing(turn, on_event) -> None:
    """Run a started turn as a worker would (agents.worker.run_turn), with `on_event` hearing
    its session's events meanwhile (as another tab would: it may Stop or approve); the turn's
    row refreshed."""
    from agents.worker import run_turn
    from core.events import listen

    stop = listen(turn.session_id, on_event)
    try:
        run_turn(turn.pk)
    finally:
        stop()
    turn.refresh_from_db()


def ask(session, text: str, events: list | None = None):
    """Start a turn and run it as a worker would, collecting the session's events in `events`;
    the turn, finished."""
    from sessions_app.turns import turn_start

    turn = turn_start(session=session, message=text)
    run_hearing(turn, (events if events is not None else []).append)
    return turn


def contents(messages) -> list[str]:
    return [m.content for m in messages]


@pytest.fixture
def checkpoint_at():
    def make(branch, name, **kwargs):
        return checkpoint_create(branch=branch, name=name, **kwargs)

    return make


@pytest.fixture
def vendor():
    return connection.vendor


@pytest.fixture
def silent_port() -> Iterator[int]:
    """The port of a server that takes connections and never answers: a hung PostgreSQL or
    Redis."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(64)
        yield server.getsockname()[1]
