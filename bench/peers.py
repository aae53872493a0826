"""The peers, each in a process of its own: `python -m bench.peers langgraph|agno|seed VAR_DIR`.

- LangGraph: a one-node graph over `MessagesState` with `SqliteSaver`; a checkpoint is one
  super-step that adds one message (`update_state`), a branch is `update_state` on an earlier
  checkpoint's config (LangGraph's fork), the history is `get_state(...).values["messages"]`.
- agno: `SqliteDb`, one run per exchange (a user message and a reply, as agno stores turns);
  agno has no checkpoint; a branch is `Agent.fork_session`; the history is what a run reads
  (`get_session` and the session's messages).
- seed: the seed's design (/work/shared/seeds/002): each branch row holds its history as one
  JSON array, and each checkpoint row a copy of it; a restore copies it into a new branch row.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import uuid
from pathlib import Path
from typing import Any

from bench.common import check, role, serve, sqlite_bytes, sqlite_disk_bytes, text, timed

# Every SQLite system of the benchmark runs at the same durability: WAL, and the synchronous
# level the coordinator states (Rollback's own setting, NORMAL, unless --synchronous says).
SYNCHRONOUS = os.environ.get("BENCH_SQLITE_SYNCHRONOUS", "NORMAL").upper()


def _durable(conn: Any) -> None:
    """A DB-API SQLite connection at the benchmark's durability."""
    cursor = conn.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA synchronous={SYNCHRONOUS}")
    cursor.close()


class LangGraphPeer:
    def __init__(self, var_dir: Path) -> None:
        from langchain_core.messages import AIMessage, HumanMessage
        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.graph import START, MessagesState, StateGraph

        self.path = var_dir / "langgraph.sqlite3"
        self.conn = sqlite3.connect(self.path, check_same_thread=False)
        _durable(self.conn)
        self.saver = SqliteSaver(self.conn)
        self.saver.setup()
        builder = StateGraph(MessagesState)
        builder.add_node("agent", lambda state: {})
        builder.add_edge(START, "agent")
        self.graph = builder.compile(checkpointer=self.saver)
        self.human, self.ai = HumanMessage, AIMessage
        self.threads: dict[int, dict[str, Any]] = {}

    def _message(self, i: int) -> Any:
        return (self.human if role(i) == "user" else self.ai)(content=text(i), id=str(i))

    def bytes(self) -> int:
        self.conn.commit()
        return sqlite_bytes(self.conn)

    def disk_bytes(self) -> int:
        self.conn.commit()
        return sqlite_disk_bytes(self.conn)

    def prepare(self, size: int) -> None:
        from langchain_core.runnables import RunnableConfig

        config: RunnableConfig = {"configurable": {"thread_id": f"t{size}-{uuid.uuid4().hex}"}}
        base = self.graph.update_state(
            config, {"messages": [self._message(i) for i in range(size)]}, as_node="agent"
        )
        self.threads[size] = {"config": config, "base": base, "next": size}

    def checkpoint(self, size: int) -> dict[str, float]:
        thread = self.threads[size]
        i = thread["next"]
        thread["next"] += 1
        before = self.bytes()
        ms, _ = timed(
            lambda: self.graph.update_state(
                thread["config"], {"messages": [self._message(i)]}, as_node="agent"
            )
        )
        return {"ms": ms, "bytes": self.bytes() - before}

    def restore(self, size: int) -> dict[str, float]:
        base = self.threads[size]["base"]
        before = self.bytes()
        ms, _ = timed(lambda: self.graph.update_state(base, {"messages": []}, as_node="agent"))
        return {"ms": ms, "bytes": self.bytes() - before}

    def read(self, size: int) -> dict[str, float]:
        config = self.threads[size]["config"]
        ms, state = timed(lambda: self.graph.get_state(config))
        check(len(state.values["messages"]) >= size)
        return {"ms": ms}

    def storage(self, turns: int) -> dict[str, float]:
        before, disk = self.bytes(), self.disk_bytes()
        from langchain_core.runnables import RunnableConfig

        config: RunnableConfig = {"configurable": {"thread_id": f"storage-{uuid.uuid4().hex}"}}
        for t in range(turns):
            # One turn: the user's message and the reply, then its checkpoint (the super-step).
            self.graph.update_state(
                config,
                {"messages": [self._message(2 * t), self._message(2 * t + 1)]},
                as_node="agent",
            )
        return {"bytes": self.bytes() - before, "disk_bytes": self.disk_bytes() - disk}


class AgnoPeer:
    def __init__(self, var_dir: Path) -> None:
        os.environ["AGNO_TELEMETRY"] = "false"
        from agno.agent import Agent
        from agno.db.sqlite import SqliteDb
        from agno.models.openai import OpenAIChat
        from sqlalchemy import create_engine, event

        self.path = var_dir / "agno.sqlite3"
        engine = create_engine(f"sqlite:///{self.path}")
        event.listen(engine, "connect", lambda conn, record: _durable(conn))
        self.db = SqliteDb(db_engine=engine)
        # fork_session reads and writes through the agent's db; the model is never called.
        self.agent = Agent(
            db=self.db, id="bench", user_id="bench", model=OpenAIChat(id="none", api_key="none")
        )
        self.sessions: dict[int, str] = {}
        self.conn = sqlite3.connect(self.path)

    def bytes(self) -> int:
        return sqlite_bytes(self.conn)

    def disk_bytes(self) -> int:
        return sqlite_disk_bytes(self.conn)

    def _run(self, session_id: str, i: int) -> Any:
        from agno.models.message import Message
        from agno.run.agent import RunOutput
        from agno.run.base import RunStatus

        return RunOutput(
            run_id=uuid.uuid4().hex,
            agent_id="bench",
            session_id=session_id,
            user_id="bench",
            status=RunStatus.completed,
            content=text(i + 1),
            messages=[
                Message(role="user", content=text(i)),
                Message(role="assistant", content=text(i + 1)),
            ],
        )

    def _session(self, exchanges: int) -> str:
        from agno.session.agent import AgentSession

        session_id = uuid.uuid4().hex
        self.db.upsert_session(
            AgentSession(session_id=session_id, agent_id="bench", user_id="bench", runs=[])
        )
        for t in range(exchanges):
            self.db.upsert_run(
                self._run(session_id, 2 * t), session_id=session_id, user_id="bench", run_index=t
            )
        return session_id

    def prepare(self, size: int) -> None:
        self.sessions[size] = self._session(size // 2)

    def restore(self, size: int) -> dict[str, float]:
        before = self.bytes()
        source = self.sessions[size]
        ms, _ = timed(lambda: self.agent.fork_session(source_session_id=source, user_id="bench"))
        return {"ms": ms, "bytes": self.bytes() - before}

    def read(self, size: int) -> dict[str, float]:
        from agno.db.base import SessionType
        from agno.session.agent import AgentSession

        source = self.sessions[size]

        def load() -> list[Any]:
            session = self.db.get_session(source, SessionType.AGENT, user_id="bench")
            check(isinstance(session, AgentSession))
            assert isinstance(session, AgentSession)
            return list(session.get_messages())

        ms, messages = timed(load)
        check(len(messages) == size, f"{len(messages)} messages")
        return {"ms": ms}

    def storage(self, turns: int) -> dict[str, float]:
        """agno has no checkpoint: the nearest is a fork after each turn."""
        before, disk = self.bytes(), self.disk_bytes()
        session_id = self._session(0)
        for t in range(turns):
            self.db.upsert_run(
                self._run(session_id, 2 * t), session_id=session_id, user_id="bench", run_index=t
            )
            self.agent.fork_session(source_session_id=session_id, user_id="bench")
        return {"bytes": self.bytes() - before, "disk_bytes": self.disk_bytes() - disk}


SEED_SCHEMA = """
CREATE TABLE internal_sessions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    external_session_id INTEGER NOT NULL,
    agno_session_id TEXT UNIQUE NOT NULL,
    session_state JSON DEFAULT '{}',
    conversation_history JSON DEFAULT '[]',
    is_current BOOLEAN DEFAULT FALSE,
    checkpoint_count INTEGER DEFAULT 0,
    created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    metadata JSON DEFAULT '{}'
);
CREATE INDEX idx_internal_sessions_external_id ON internal_sessions(external_session_id);
CREATE TABLE checkpoints (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    internal_session_id INTEGER NOT NULL,
    checkpoint_name TEXT,
    session_state JSON DEFAULT '{}',
    conversation_history JSON DEFAULT '[]',
    is_auto BOOLEAN DEFAULT FALSE,
    created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    metadata JSON DEFAULT '{}',
    FOREIGN KEY (internal_session_id) REFERENCES internal_sessions(id) ON DELETE CASCADE
);
CREATE INDEX idx_checkpoints_internal_session ON checkpoints(internal_session_id);
"""


class SeedPeer:
    """The seed's design, written plainly on sqlite3 (WAL, as Rollback's SQLite runs)."""

    def __init__(self, var_dir: Path) -> None:
        self.conn = sqlite3.connect(var_dir / "seed.sqlite3", isolation_level=None)
        _durable(self.conn)
        self.conn.executescript(SEED_SCHEMA)
        self.branches: dict[int, dict[str, int]] = {}

    def bytes(self) -> int:
        return sqlite_bytes(self.conn)

    def disk_bytes(self) -> int:
        return sqlite_disk_bytes(self.conn)

    @staticmethod
    def _entry(i: int) -> dict[str, Any]:
        return {"role": role(i), "content": text(i), "timestamp": "2026-01-01T00:00:00Z"}

    def _branch(self, history: list[dict[str, Any]], state: str = "{}") -> int:
        cursor = self.conn.execute(
            "INSERT INTO internal_sessions (external_session_id, agno_session_id, session_state,"
            " conversation_history, is_current) VALUES (1, ?, ?, ?, 1)",
            (uuid.uuid4().hex, state, json.dumps(history)),
        )
        return int(cursor.lastrowid or 0)

    def _checkpoint(self, branch: int, name: str) -> int:
        # The seed's checkpoint: the branch's state and a copy of its whole history.
        with self.conn:
            self.conn.execute("BEGIN IMMEDIATE")
            state, history = self.conn.execute(
                "SELECT session_state, conversation_history FROM internal_sessions WHERE id = ?",
                (branch,),
            ).fetchone()
            cursor = self.conn.execute(
                "INSERT INTO checkpoints (internal_session_id, checkpoint_name, session_state,"
                " conversation_history, metadata) VALUES (?, ?, ?, ?, ?)",
                (
                    branch,
                    name,
                    state,
                    history,
                    json.dumps({"message_count": len(json.loads(history))}),
                ),
            )
            self.conn.execute(
                "UPDATE internal_sessions SET checkpoint_count = checkpoint_count + 1 WHERE id = ?",
                (branch,),
            )
            return int(cursor.lastrowid or 0)

    def _append(self, branch: int, entries: list[dict[str, Any]]) -> None:
        with self.conn:
            self.conn.execute("BEGIN IMMEDIATE")
            (history,) = self.conn.execute(
                "SELECT conversation_history FROM internal_sessions WHERE id = ?", (branch,)
            ).fetchone()
            messages = json.loads(history)
            messages.extend(entries)
            self.conn.execute(
                "UPDATE internal_sessions SET conversation_history = ? WHERE id = ?",
                (json.dumps(messages), branch),
            )

    def prepare(self, size: int) -> None:
        branch = self._branch([self._entry(i) for i in range(size)])
        self.branches[size] = {"branch": branch, "base": self._checkpoint(branch, "base")}

    def checkpoint(self, size: int) -> dict[str, float]:
        branch = self.branches[size]["branch"]
        before = self.bytes()
        ms, _ = timed(lambda: self._checkpoint(branch, "bench"))
        return {"ms": ms, "bytes": self.bytes() - before}

    def _restore(self, checkpoint: int) -> int:
        with self.conn:
            self.conn.execute("BEGIN IMMEDIATE")
            state, history = self.conn.execute(
                "SELECT session_state, conversation_history FROM checkpoints WHERE id = ?",
                (checkpoint,),
            ).fetchone()
            self.conn.execute("UPDATE internal_sessions SET is_current = 0")
            cursor = self.conn.execute(
                "INSERT INTO internal_sessions (external_session_id, agno_session_id,"
                " session_state, conversation_history, is_current) VALUES (1, ?, ?, ?, 1)",
                (uuid.uuid4().hex, state, history),
            )
            return int(cursor.lastrowid or 0)

    def restore(self, size: int) -> dict[str, float]:
        base = self.branches[size]["base"]
        before = self.bytes()
        ms, _ = timed(lambda: self._restore(base))
        return {"ms": ms, "bytes": self.bytes() - before}

    def read(self, size: int) -> dict[str, float]:
        branch = self.branches[size]["branch"]

        def load() -> list[Any]:
            (history,) = self.conn.execute(
                "SELECT conversation_history FROM internal_sessions WHERE id = ?", (branch,)
            ).fetchone()
            rows: list[Any] = json.loads(history)
            return rows

        ms, rows = timed(load)
        check(len(rows) == size)
        return {"ms": ms}

    def storage(self, turns: int) -> dict[str, float]:
        before, disk = self.bytes(), self.disk_bytes()
        branch = self._branch([])
        for t in range(turns):
            self._append(branch, [self._entry(2 * t), self._entry(2 * t + 1)])
            self._checkpoint(branch, f"turn {t}")
        return {"bytes": self.bytes() - before, "disk_bytes": self.disk_bytes() - disk}


PEERS = {"langgraph": LangGraphPeer, "agno": AgnoPeer, "seed": SeedPeer}


def main() -> None:
    name, var_dir = sys.argv[1], Path(sys.argv[2])
    var_dir.mkdir(parents=True, exist_ok=True)
    peer = PEERS[name](var_dir)
    handlers = {
        op: getattr(peer, op)
        for op in ("prepare", "checkpoint", "restore", "read", "storage")
        if hasattr(peer, op)
    }
    handlers["quit"] = lambda: None
    serve(handlers)


if __name__ == "__main__":
    main()
