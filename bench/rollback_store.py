"""Rollback's store as the benchmark drives it (a process of its own, on SQLite or PostgreSQL):
`python -m bench.rollback_store sqlite|postgres VAR_DIR`."""

from __future__ import annotations

import os
import sys
from typing import Any

from bench.common import check, role, row_bytes, serve, text, timed


def bench_database(part: str) -> str:
    """The name of the benchmark's PostgreSQL database for `part`: BENCH_DATABASE_PREFIX
    (`rollback_bench` unless set: two checkouts sharing a server set it apart), `_`, `part`."""
    return f"{os.environ.get('BENCH_DATABASE_PREFIX') or 'rollback_bench'}_{part}"


PG_DATABASE = bench_database("store")


def pg_url(name: str) -> str:
    """BENCH_DATABASE_URL's server, with the database `name` (the benchmark's own)."""
    base = os.environ.get("BENCH_DATABASE_URL") or "postgres://postgres@127.0.0.1:5432/rollback"
    return base.rsplit("/", 1)[0] + "/" + name


def _configure(engine: str, var_dir: str) -> None:
    os.environ["ROLLBACK_VAR_DIR"] = var_dir
    os.environ["AGNO_TELEMETRY"] = "false"
    os.environ.pop("REDIS_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rollback_site.settings")
    if engine == "postgres":
        import psycopg

        with psycopg.connect(pg_url("postgres"), autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {PG_DATABASE} WITH (FORCE)")
            conn.execute(f"CREATE DATABASE {PG_DATABASE}")
        os.environ["DATABASE_URL"] = pg_url(PG_DATABASE)
    else:
        os.environ.pop("DATABASE_URL", None)  # the SQLite file under ROLLBACK_VAR_DIR
    import django

    from bench.hooks import install_from_env

    install_from_env()  # SQLite at the benchmark's stated durability
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


class Store:
    def __init__(self) -> None:
        from accounts.models import User

        self.user = User.objects.create_user("bench")
        self.convs: dict[int, dict[str, Any]] = {}

    # --- the data ----------------------------------------------------------------------------

    def _session(self, name: str) -> Any:
        from sessions_app.selectors import current_branch
        from sessions_app.services import session_create

        return current_branch(session_create(owner=self.user, name=name))

    @staticmethod
    def _grow(branch: Any, n: int) -> None:
        from sessions_app.models import Branch, Message

        branch.refresh_from_db()
        start = branch.message_count
        Message.objects.bulk_create(
            [
                Message(
                    branch=branch, position=start + i, role=role(start + i), content=text(start + i)
                )
                for i in range(n)
            ],
            batch_size=2000,
        )
        Branch.objects.filter(pk=branch.pk).update(message_count=start + n)
        branch.refresh_from_db()

    @staticmethod
    def _files(branch: Any, n: int) -> None:
        """A workspace of n files on the branch, the rows n writes leave (in bulk: the
        preparation is not what is measured)."""
        from workspace.models import FileVersion, WorkspaceBlob
        from workspace.validation import sha256_of

        branch.refresh_from_db()
        contents = [f"# module {i}\n" + text(i) for i in range(n)]
        blobs = WorkspaceBlob.objects.bulk_create(
            [
                WorkspaceBlob(
                    session_id=branch.session_id,
                    sha256=sha256_of(c),
                    content=c,
                    size=len(c.encode("utf-8")),
                )
                for c in contents
            ],
            batch_size=500,
        )
        FileVersion.objects.bulk_create(
            [
                FileVersion(
                    branch=branch,
                    position=branch.message_count,
                    path=f"src/pkg{i // 50}/module_{i:04}.py",
                    blob=blob,
                    metadata={"by": "agent"},
                )
                for i, blob in enumerate(blobs)
            ],
            batch_size=500,
        )

    def bytes(self) -> int:
        from django.db import connection

        with connection.cursor() as cursor:
            if connection.vendor == "sqlite":
                tables = [
                    row[0]
                    for row in cursor.execute(
                        "SELECT name FROM sqlite_master WHERE type = 'table' "
                        "AND name NOT LIKE 'sqlite_%'"
                    ).fetchall()
                ]
                total = 0
                for table in tables:
                    columns = [r[1] for r in cursor.execute(f'PRAGMA table_info("{table}")')]
                    cursor.execute(f'SELECT COALESCE(SUM({row_bytes(columns)}), 0) FROM "{table}"')  # noqa: S608
                    total += int(cursor.fetchone()[0])
                return total
            cursor.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
            total = 0
            for (table,) in cursor.fetchall():
                cursor.execute(f'SELECT COALESCE(SUM(pg_column_size(t.*)), 0) FROM "{table}" t')  # noqa: S608
                total += int(cursor.fetchone()[0])
            return total

    def prepare(self, size: int, depth: int = 50, window: int = 200) -> None:
        from checkpoints.services import checkpoint_create
        from sessions_app.models import Message, Summary
        from sessions_app.services import branch_fork

        branch = self._session(f"{size}")
        self._grow(branch, size)
        self._files(branch, 10)
        base = checkpoint_create(branch=branch, name="base")
        # The same conversation with a 500-file workspace.
        wide = self._session(f"{size}, 500 files")
        self._grow(wide, size)
        self._files(wide, 500)
        wide_base = checkpoint_create(branch=wide, name="base")
        # The context window: a summary of everything but the newest `window` messages, as the
        # turn before would have left it.
        cut = max(0, size - window)
        if cut:
            Summary.objects.create(
                last_message=Message.objects.get(branch=branch, position=cut - 1),
                end_position=cut,
                content="The conversation so far, summarised. " * 20,
                model="bench",
            )
        # The same length as a chain of `depth` branches, each forked at its parent's end.
        deep = self._session(f"{size} deep")
        per = max(1, size // depth)
        for level in range(depth):
            self._grow(deep, per if level < depth - 1 else max(0, size - per * (depth - 1)))
            if level < depth - 1:
                deep = branch_fork(branch=deep, position=deep.message_count)
        deep.refresh_from_db()
        if cut:
            from sessions_app.selectors import branch_history

            Summary.objects.create(
                last_message=branch_history(deep, start=cut - 1, end=cut)[0],
                end_position=cut,
                content="The conversation so far, summarised. " * 20,
                model="bench",
            )
        self.convs[size] = {
            "branch": branch,
            "base": base,
            "deep": deep,
            "wide": wide,
            "wide_base": wide_base,
        }

    # --- what is measured --------------------------------------------------------------------

    def checkpoint(self, size: int, wide: bool = False) -> dict[str, float]:
        """A checkpoint of the conversation with its 10-file workspace (`wide`: 500 files)."""
        from checkpoints.services import checkpoint_create

        branch = self.convs[size]["wide" if wide else "branch"]
        before = self.bytes()
        ms, _ = timed(lambda: checkpoint_create(branch=branch, name="bench"))
        return {"ms": ms, "bytes": self.bytes() - before}

    def restore(self, size: int, wide: bool = False) -> dict[str, float]:
        """A restore as a branch of the conversation with its 10-file workspace (`wide`: 500)."""
        from checkpoints.services import checkpoint_restore
        from workspace.selectors import workspace_files

        base = self.convs[size]["wide_base" if wide else "base"]
        before = self.bytes()
        ms, restored = timed(lambda: checkpoint_restore(checkpoint=base, mode="branch"))
        added = self.bytes() - before
        check(len(workspace_files(restored.branch)) == (500 if wide else 10))
        return {"ms": ms, "bytes": added}

    def checkpoint_500(self, size: int) -> dict[str, float]:
        return self.checkpoint(size, wide=True)

    def restore_500(self, size: int) -> dict[str, float]:
        return self.restore(size, wide=True)

    def read(self, size: int) -> dict[str, float]:
        from sessions_app.selectors import branch_history

        branch = self.convs[size]["branch"]
        ms, rows = timed(lambda: branch_history(branch))
        check(len(rows) == size)
        return {"ms": ms}

    def read_orm(self, size: int) -> dict[str, float]:
        """The history read as it was before the fast reader: Message.objects.raw."""
        from django.db import connection

        from sessions_app.models import Message
        from sessions_app.selectors.lineage import lineage_cte

        table = connection.ops.quote_name(Message._meta.db_table)
        sql = lineage_cte() + (  # noqa: S608
            f"SELECT m.* FROM {table} m JOIN lineage l ON m.branch_id = l.id "  # noqa: S608
            "WHERE m.position < l.upper AND m.position >= %s ORDER BY m.position"
        )
        branch = self.convs[size]["branch"]
        ms, rows = timed(
            lambda: list(Message.objects.raw(sql, [branch.message_count, branch.pk, 0]))
        )
        check(len(rows) == size)
        return {"ms": ms}

    def window(self, size: int, deep: bool = False) -> dict[str, float]:
        """What a turn reads before it calls the model: agents.context.fit_turn (the newest
        summary on the lineage, then the history after it), without a model call."""
        from django.conf import settings

        from agents.context import fit_turn

        branch = self.convs[size]["deep" if deep else "branch"]
        ms, fit = timed(
            lambda: fit_turn(
                session=branch.session,
                branch=branch,
                end=branch.message_count,
                message="and next?",
                model=settings.AGENT_MODEL,
            )
        )
        return {"ms": ms, "messages": len(fit.history)}

    def deep_window(self, size: int) -> dict[str, float]:
        return self.window(size, deep=True)

    def deep_read(self, size: int) -> dict[str, float]:
        from sessions_app.selectors import branch_history

        branch = self.convs[size]["deep"]
        ms, rows = timed(lambda: branch_history(branch))
        check(len(rows) == branch.message_count)
        return {"ms": ms}

    def page(self, size: int) -> dict[str, float]:
        """The chat page's load: the last 100 messages."""
        from sessions_app.selectors import branch_history

        branch = self.convs[size]["branch"]
        ms, _ = timed(lambda: branch_history(branch, start=max(0, size - 100)))
        return {"ms": ms}

    def export(self, size: int) -> dict[str, float]:
        from checkpoints.transfer import session_export

        session = self.convs[size]["branch"].session
        ms, _ = timed(lambda: session_export(session=session))
        return {"ms": ms}


def main() -> None:
    engine, var_dir = sys.argv[1], sys.argv[2]
    _configure(engine, var_dir)
    store = Store()
    serve(
        {
            "prepare": store.prepare,
            "checkpoint": store.checkpoint,
            "restore": store.restore,
            "checkpoint_500": store.checkpoint_500,
            "restore_500": store.restore_500,
            "read": store.read,
            "read_orm": store.read_orm,
            "window": store.window,
            "deep_read": store.deep_read,
            "deep_window": store.deep_window,
            "page": store.page,
            "export": store.export,
            "quit": lambda: None,
        }
    )


if __name__ == "__main__":
    main()
