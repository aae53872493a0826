"""The full-text index over memories that memories/search.py reads: a GIN index on the weighted
search vector on PostgreSQL, an FTS5 table kept in step by triggers on SQLite. The statements
must stay in step with search.py (the indexed expression, the table's name and columns).

Beware on SQLite: a later migration that makes Django rebuild the memory table (most AlterField
and RemoveField operations do) drops these triggers with the old table; such a migration must
create them again (tests/memories/test_search.py finds a new memory only while they exist)."""

from django.db import migrations

FTS = "memories_memory_fts"
TABLE = "memories_memory"
COLUMNS = "key, l0_abstract, l1_overview, l2_details"
INDEXED_CHARS = 100_000  # search.SEARCH_INDEXED_CHARS when this was written


def _values(row: str) -> str:
    return ", ".join(f"{row}.{c.strip()}" for c in COLUMNS.split(","))


SQLITE_UP = [
    f"CREATE VIRTUAL TABLE {FTS} USING fts5({COLUMNS}, content='{TABLE}', content_rowid='id', "
    "tokenize='unicode61 remove_diacritics 2')",
    f"CREATE TRIGGER {FTS}_insert AFTER INSERT ON {TABLE} BEGIN "
    f"INSERT INTO {FTS}(rowid, {COLUMNS}) VALUES (new.id, {_values('new')}); END",
    f"CREATE TRIGGER {FTS}_delete AFTER DELETE ON {TABLE} BEGIN "
    f"INSERT INTO {FTS}({FTS}, rowid, {COLUMNS}) VALUES ('delete', old.id, {_values('old')}); END",
    # Only a change of the indexed text reindexes (a recall's access count does not).
    f"CREATE TRIGGER {FTS}_update AFTER UPDATE OF {COLUMNS} ON {TABLE} BEGIN "
    f"INSERT INTO {FTS}({FTS}, rowid, {COLUMNS}) VALUES ('delete', old.id, {_values('old')}); "
    f"INSERT INTO {FTS}(rowid, {COLUMNS}) VALUES (new.id, {_values('new')}); END",
    f"INSERT INTO {FTS}({FTS}) VALUES ('rebuild')",
]
SQLITE_DOWN = [
    f"DROP TRIGGER IF EXISTS {FTS}_insert",
    f"DROP TRIGGER IF EXISTS {FTS}_delete",
    f"DROP TRIGGER IF EXISTS {FTS}_update",
    f"DROP TABLE IF EXISTS {FTS}",
]
POSTGRES_UP = [
    f"CREATE INDEX IF NOT EXISTS memory_search ON {TABLE} USING GIN (("
    "setweight(to_tsvector('simple', key || ' ' || l0_abstract), 'A') || "
    "setweight(to_tsvector('simple', l1_overview), 'B') || "
    f"setweight(to_tsvector('simple', left(l2_details, {INDEXED_CHARS})), 'C')))",
]
POSTGRES_DOWN = ["DROP INDEX IF EXISTS memory_search"]


def _run(statements: dict):
    def run(apps, schema_editor):
        for sql in statements.get(schema_editor.connection.vendor, []):
            schema_editor.execute(sql)

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0001_initial"),
    ]

    operations = [
        migrations.RunPython(
            _run({"sqlite": SQLITE_UP, "postgresql": POSTGRES_UP}),
            _run({"sqlite": SQLITE_DOWN, "postgresql": POSTGRES_DOWN}),
        ),
    ]
