"""The full-text index over message text that sessions_app/search.py reads: a GIN expression index
on PostgreSQL, an FTS5 table kept in step by triggers on SQLite. Each engine gets only its own;
the statements must stay in step with search.py (the indexed expression, the table's name).

Beware on SQLite: a later migration that makes Django rebuild the message table (most AlterField
and RemoveField operations do) drops these triggers with the old table; such a migration must
create them again (tests/sessions_app/test_search.py finds a new message only while they exist)."""

from django.db import migrations

FTS = "sessions_app_message_fts"
MESSAGES = "sessions_app_message"
INDEXED_CHARS = 100_000  # search.SEARCH_INDEXED_CHARS when this was written

SQLITE_UP = [
    f"CREATE VIRTUAL TABLE {FTS} USING fts5(content, content='{MESSAGES}', content_rowid='id', "
    "tokenize='unicode61 remove_diacritics 2')",
    # Messages are written once and never updated by the app; the update trigger is there so
    # that a hand-made change (a script, a test) cannot leave the index out of step, which in
    # an external-content table would make a later delete corrupt it.
    f"CREATE TRIGGER {FTS}_insert AFTER INSERT ON {MESSAGES} BEGIN "
    f"INSERT INTO {FTS}(rowid, content) VALUES (new.id, new.content); END",
    f"CREATE TRIGGER {FTS}_delete AFTER DELETE ON {MESSAGES} BEGIN "
    f"INSERT INTO {FTS}({FTS}, rowid, content) VALUES ('delete', old.id, old.content); END",
    f"CREATE TRIGGER {FTS}_update AFTER UPDATE OF content ON {MESSAGES} BEGIN "
    f"INSERT INTO {FTS}({FTS}, rowid, content) VALUES ('delete', old.id, old.content); "
    f"INSERT INTO {FTS}(rowid, content) VALUES (new.id, new.content); END",
    f"INSERT INTO {FTS}({FTS}) VALUES ('rebuild')",
]
SQLITE_DOWN = [
    f"DROP TRIGGER IF EXISTS {FTS}_insert",
    f"DROP TRIGGER IF EXISTS {FTS}_delete",
    f"DROP TRIGGER IF EXISTS {FTS}_update",
    f"DROP TABLE IF EXISTS {FTS}",
]
POSTGRES_UP = [
    f"CREATE INDEX IF NOT EXISTS message_content_search ON {MESSAGES} "
    f"USING GIN (to_tsvector('simple', left(content, {INDEXED_CHARS})))",
]
POSTGRES_DOWN = ["DROP INDEX IF EXISTS message_content_search"]


def _run(statements: dict):
    def run(apps, schema_editor):
        for sql in statements.get(schema_editor.connection.vendor, []):
            schema_editor.execute(sql)

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0009_branch_name"),
    ]

    operations = [
        migrations.RunPython(
            _run({"sqlite": SQLITE_UP, "postgresql": POSTGRES_UP}),
            _run({"sqlite": SQLITE_DOWN, "postgresql": POSTGRES_DOWN}),
        ),
    ]
