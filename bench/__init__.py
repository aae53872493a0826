"""`make bench`: Rollback's store, turns and streams measured side by side with its peers
(LangGraph's SQLite checkpointer, agno's SqliteDb, the seed's JSON-copy design), in one run,
on the same data and machine. Not a test: `python -m bench --help`."""
