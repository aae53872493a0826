"""Migration 0019 records, in the effects ledger, the external calls stored before it existed, so
the first restore after an upgrade still lists them; it records a call once, however often it
runs."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("sessions_app", "0018_ledgerentry")]
AFTER = [("sessions_app", "0019_ledger_backfill")]


@pytest.fixture
def latest_after():
    """Every migration applied again after the test, which moves the schema back and forth."""
    yield
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


def _migrated(target):
    """The models as they are at `target`, once the schema is there."""
    executor = MigrationExecutor(connection)
    executor.migrate(target)
    return executor.loader.project_state(target).apps


@pytest.mark.django_db(transaction=True)  # SQLite's schema editor needs autocommit
@pytest.mark.usefixtures("latest_after")
def test_the_backfill_migration_records_each_earlier_external_call_once(django_user_model):
    alice = django_user_model.objects.create_user(username="alice")
    apps = _migrated(BEFORE)
    Message = apps.get_model("sessions_app", "Message")
    LedgerEntry = apps.get_model("sessions_app", "LedgerEntry")
    Session = apps.get_model("sessions_app", "Session")
    Branch = apps.get_model("sessions_app", "Branch")
    session = Session.objects.create(owner_id=alice.pk, session_name="s")
    branch = Branch.objects.create(session=session, name="main", is_current=True)

    def tool(position, name, effect, **metadata):
        return Message.objects.create(
            branch=branch,
            position=position,
            role="tool",
            tool_name=name,
            tool_args={"text": "x" * 5000},
            tool_result="sent",
            effect=effect,
            metadata=metadata,
        )

    sent = tool(0, "send_message", "external")
    failed = tool(1, "post", "external", error=True)
    tool(2, "read_file", "none")
    recorded = tool(3, "already", "external")
    LedgerEntry.objects.create(
        session=session,
        user_id=alice.pk,
        branch_ref=branch.pk,
        message_ref=recorded.pk,
        position=3,
        tool_name="already",
        status="ran",
    )

    LedgerEntry = _migrated(AFTER).get_model("sessions_app", "LedgerEntry")
    rows = LedgerEntry.objects.order_by("message_ref")
    assert [(e.message_ref, e.tool_name, e.status) for e in rows] == [
        (sent.pk, "send_message", "ran"),
        (failed.pk, "post", "failed"),
        (recorded.pk, "already", "ran"),
    ]
    first = rows[0]
    assert (first.session_id, first.user_id, first.branch_ref, first.position) == (
        session.pk,
        alice.pk,
        branch.pk,
        0,
    )
    assert first.turn_ref is None
    assert len(first.tool_args) <= 4001  # bounded: the arguments as JSON text, cut
