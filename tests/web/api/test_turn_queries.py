"""What a turn costs the database: every statement from the POST that starts it to the answer
that says it finished, counted (a turn ran 57 on SQLite before issue 23's cuts)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memories.services import memory_remember
from sessions_app.turns import turn_start
from tests.fakes.chat_server import Reply
from tests.web.api.conftest import bearer_client
from usage.signals import any_budget

pytestmark = pytest.mark.django_db(transaction=True)

# A turn posted with "wait": true through the API, in process (the embedded mode), answered by
# the fake model server: the statements of the request's thread, the run included (the
# heartbeat's own thread is not counted), BEGIN, COMMIT and savepoints included: the same on
# SQLite and PostgreSQL. Lower it when a statement is saved; never raise it without saying why
# in the commit.
# 44: issue 24's MCP servers: each turn reads the enabled servers (one SELECT) to offer their tools.
# 46: issue 25: each turn reads the owner's custom instructions afresh (one SELECT: a change made
# since the agent was built applies to the next turn), and the automatic title reads the
# session's name as it is now (one SELECT: a session renamed meanwhile is not titled over).
# 45: issue 37: the API key of a request comes from the cache when it was seen just now.
# 29: issue 37: the claim of a turn never run is a read and one conditional update (no
# transaction); the worker's agent takes the session, its owner and the branch the claim read
# (no second read of them, nor of the owner's instructions); the answer's store takes no
# savepoints and leaves an unchanged session state unwritten; the after-work reads neither the
# turn again (turn_finish set what it wrote) nor the name of a session already named when its
# turn was claimed, and reports a turn it finished without reading it back; a submission looks
# for stale turns of the session only when one in progress refuses it.
# 27: issue 37: whether to summarise ahead is judged on the branch as the store left it, with
# the session and owner the claim read (neither is read again).
# 22: issue 37: a writer of messages takes the session's lock by marking it updated (one UPDATE
# in place of a locking read and a later update); the submission reads its branch, the session
# as it is now and whether a turn is in progress in one statement; whether to summarise ahead is
# judged from what the turn's fitting read and its store wrote (no lineage read after the turn).
# 18: issue 37: the request reads no session (the submission's lock is scoped to its owner);
# the store checks that the branch still ends with the turn's message and that the attempt is
# still the worker's in the update of the branch's length (no read of the turn); the claim's
# read looks whether the owner has any memory and any MCP server is enabled, and a turn that
# has neither asks no query for them.
# 19: issue 40: each turn's usage is recorded (one INSERT; its price, and whether any budget
# exists, come from the cache, read by the first turn).
TURN_STATEMENTS = 19


def test_a_turn_reads_the_owners_memories_when_the_claim_found_some(alice, fake_llm, inline_turns):
    memory_remember(user=alice, key="editor", category="Environment", l0_abstract="Uses vim daily")
    api = bearer_client(alice)
    sid = api.post("/api/v1/sessions/", {"name": "s"}, format="json").json()["id"]
    fake_llm.queue(Reply("First."))
    api.post(f"/api/v1/sessions/{sid}/turns/", {"message": "hi", "wait": True}, format="json")
    fake_llm.queue(Reply("Right away."))
    with CaptureQueriesContext(connection) as ctx:
        response = api.post(
            f"/api/v1/sessions/{sid}/turns/", {"message": "my editor?", "wait": True}, format="json"
        )
    assert response.json()["reply"] == "Right away."
    # The memories are read (the most used, then the search: on SQLite its full-text match and
    # its rows), besides the turn's own statements; and the model is told of them.
    statements = [q["sql"] for q in ctx.captured_queries]
    reads = ('SELECT "memories_memory"', 'SELECT rowid FROM "memories_memory_fts"')
    others = [s for s in statements if not s.startswith(reads)]
    assert len(others) == TURN_STATEMENTS, "\n".join(s[:160] for s in statements)
    assert len(statements) > len(others)
    assert "Uses vim daily" in str(fake_llm.requests[-1]["messages"][0]["content"])


def test_a_turn_runs_a_fixed_number_of_statements(alice, fake_llm, inline_turns):
    api = bearer_client(alice)
    sid = api.post("/api/v1/sessions/", {"name": "s"}, format="json").json()["id"]
    fake_llm.queue(Reply("First."))
    body = {"message": "hi", "wait": True}
    first = api.post(f"/api/v1/sessions/{sid}/turns/", body, format="json")
    assert first.json()["status"] == "done"
    fake_llm.queue(Reply("Right away."))
    with CaptureQueriesContext(connection) as ctx:
        response = api.post(
            f"/api/v1/sessions/{sid}/turns/", {"message": "again", "wait": True}, format="json"
        )
    assert response.status_code == 201
    assert response.json()["reply"] == "Right away."
    statements = [q["sql"] for q in ctx.captured_queries]
    assert len(statements) == TURN_STATEMENTS, "\n".join(s[:160] for s in statements)


# What submitting a message writes, between BEGIN and COMMIT: the session marked updated (its
# lock), one read of the branch with the session and whether a turn is in progress, the message,
# the branch's length, the turn (issue 37: at most 5).
SUBMISSION_STATEMENTS = 5


def test_a_submission_takes_five_statements_inside_its_transaction(session):
    any_budget()  # whether any budget exists: read once, then from the cache (usage.signals)
    with CaptureQueriesContext(connection) as ctx:
        turn = turn_start(session=session, message="hi")
    assert turn.status == "queued"
    framing = ("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE SAVEPOINT")
    statements = [q["sql"] for q in ctx.captured_queries if not q["sql"].startswith(framing)]
    assert len(statements) == SUBMISSION_STATEMENTS, "\n".join(s[:160] for s in statements)
