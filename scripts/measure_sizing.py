"""How much room a message takes: the sizing numbers of docs/operations.md, measured.

    .venv/bin/python scripts/measure_sizing.py                    # SQLite, in a temporary file
    .venv/bin/python scripts/measure_sizing.py postgres://postgres@127.0.0.1:5432/postgres

(the second makes a database of its own on that server, and drops it at the end).

Real turns through the app's own code (turn_start, then a worker's run_turn, which stores the
reply, the turn and the session's title) against a local Chat Completions server
(tests/fakes/chat_server.py), in conversations of 10 exchanges. The user's messages are about
200 characters and the replies about 600, cut from the project's own documentation (real English
for the search index: the FTS5 table on SQLite, the GIN index on PostgreSQL). Reports how much
the database grew per message (two per exchange; the turn rows, sessions and branches counted in),
and how large a backup (`manage.py backup`) is per message.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import sys
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def corpus() -> list[str]:
    words: list[str] = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        words += re.sub(r"[`|#*<>\[\]()]", " ", doc.read_text()).split()
    return words


def text(rng: random.Random, words: list[str], chars: int) -> str:
    """About `chars` characters of consecutive words from a random place in the corpus."""
    start = rng.randrange(len(words) - 400)
    out: list[str] = []
    size = 0
    for word in words[start:]:
        if size >= chars:
            break
        out.append(word)
        size += len(word) + 1
    return " ".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("server", nargs="?", help="a PostgreSQL server's URL (default: SQLite)")
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--exchanges", type=int, default=10, help="turns per session")
    parser.add_argument("--warmup", type=int, default=10, help="sessions before measuring")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="rollback-sizing-"))
    created = ""
    if args.server:
        import psycopg

        created = f"rollback_sizing_{uuid.uuid4().hex[:8]}"
        server = urlsplit(args.server)
        admin = urlunsplit(server._replace(path="/postgres"))
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{created}"')
        os.environ["DATABASE_URL"] = urlunsplit(server._replace(path=f"/{created}"))
    else:
        os.environ.pop("DATABASE_URL", None)
    try:
        return measure(args, tmp)
    finally:
        if created:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{created}" WITH (FORCE)')


def measure(args: argparse.Namespace, tmp: Path) -> int:
    from tests.fakes.chat_server import FakeChatServer, Reply

    rng = random.Random(42)  # noqa: S311 - reproducible sample text, not a secret
    words = corpus()
    replies: list[str] = []

    def answer(body: dict) -> Reply:
        from agents.demo_model import TITLE_MARKER

        if TITLE_MARKER in str((body.get("messages") or [{}])[0].get("content") or ""):
            return Reply("A short title for this conversation")
        replies.append(text(rng, words, 600))
        return Reply(replies[-1], chunk_size=20)

    with FakeChatServer() as model:
        model.default = answer
        os.environ.pop("REDIS_URL", None)
        os.environ.update(
            ROLLBACK_VAR_DIR=str(tmp / "var"),
            OPENAI_BASE_URL=model.base_url,
            OPENAI_API_KEY="sizing",
            AGENT_MODEL="fake-model",
            AGENT_MAX_RETRIES="0",
        )
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rollback_site.settings")
        os.environ["LOG_LEVEL"] = "WARNING"  # not a line per request
        import django

        django.setup()
        from django.core.management import call_command
        from django.db import connection

        from accounts.models import User
        from agents.worker import run_turn
        from ops.backup import backup_create
        from sessions_app.models import Message
        from sessions_app.services import session_create
        from sessions_app.turns import turn_start

        call_command("migrate", verbosity=0)
        owner = User.objects.create_user(f"sizing-{uuid.uuid4().hex[:6]}")

        def conversations(count: int) -> None:
            for s in range(count):
                session = session_create(owner=owner, name=f"Conversation {s}")
                for _ in range(args.exchanges):
                    turn = turn_start(session=session, message=text(rng, words, 200))
                    run_turn(turn.pk)

        # A first few conversations before measuring: every table and index has its first
        # pages, which would otherwise weigh on a small run.
        conversations(args.warmup)
        first = Message.objects.order_by("-id").values_list("id", flat=True).first() or 0
        before, tables_before = database_bytes(connection), table_bytes(connection)
        started = time.monotonic()
        conversations(args.sessions)
        seconds = time.monotonic() - started
        grown = database_bytes(connection) - before
        tables = table_bytes(connection)
        measured = Message.objects.filter(id__gt=first)
        count = measured.count()
        chars = sum(len(c) for c in measured.values_list("content", flat=True))
        backup = backup_create(path=tmp / "backup")
        total = Message.objects.count()
        connection.close()

    vendor = connection.vendor
    per_message = grown / count
    print(f"{vendor}: {count} messages ({args.sessions} sessions of {args.exchanges} exchanges)")
    print(f"  average text: {chars / count:.0f} characters per message")
    print(f"  turns: {seconds:.1f} s ({args.sessions * args.exchanges / seconds:.1f} per second)")
    print(f"  database grew {grown / 2**20:.1f} MiB: {per_message:.0f} bytes per message,")
    print(f"    {2**30 / per_message:,.0f} messages per GiB; of which, per message:")
    growth = {name: tables[name] - tables_before.get(name, 0) for name in tables}
    for name, size in sorted(growth.items(), key=lambda item: -item[1])[:4]:
        print(f"    {name}: {size / count:.0f} bytes")
    print(
        f"  backup ({backup.engine}, {total} messages): {backup.size / 2**20:.1f} MiB in "
        f"{backup.seconds:.1f} s, {backup.size / total:.0f} bytes per message"
    )
    return 0


def table_bytes(connection) -> dict[str, int]:
    """Bytes per table, its indexes (and on SQLite the search index's tables) included."""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute(
                "SELECT s.tbl_name, sum(d.pgsize) FROM dbstat d "
                "JOIN sqlite_schema s ON s.name = d.name GROUP BY s.tbl_name"
            )
        else:
            cursor.execute(
                "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE c.relkind = 'r' AND n.nspname = 'public'"
            )
        sizes: dict[str, int] = {}
        for name, size in cursor.fetchall():
            # The FTS5 table's shadow tables count with the messages.
            key = "sessions_app_message" if name.startswith("sessions_app_message") else name
            sizes[key] = sizes.get(key, 0) + int(size)
        return sizes


def database_bytes(connection) -> int:
    """The database's size, as it would be after the next checkpoint (SQLite: pages in use;
    PostgreSQL: after a VACUUM, which also moves the GIN index's pending entries into it)."""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            cursor.execute("PRAGMA page_count")
            pages = cursor.fetchone()[0]
            cursor.execute("PRAGMA freelist_count")
            pages -= cursor.fetchone()[0]
            cursor.execute("PRAGMA page_size")
            return pages * cursor.fetchone()[0]
        connection.ensure_connection()
        autocommit = connection.get_autocommit()
        connection.set_autocommit(True)
        cursor.execute("VACUUM")
        connection.set_autocommit(autocommit)
        cursor.execute("SELECT pg_database_size(current_database())")
        return int(cursor.fetchone()[0])


if __name__ == "__main__":
    sys.exit(main())
