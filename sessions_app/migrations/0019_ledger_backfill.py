"""The effects ledger for the external calls stored before it existed: one entry per tool message
of effect `external` that has none (its turn unknown: a message names none). Restores read the
ledger (checkpoints.selectors.irreversible_effects), so a call made before the upgrade is still
listed by the next restore that leaves it behind. (The calls of a session imported before the
upgrade get entries too: nothing tells them apart, and a restore listing a call it need not is
the safe side.) Idempotent; nothing to undo."""

from __future__ import annotations

import json

from django.db import migrations

# sessions_app.models.ledger.LEDGER_TEXT_LIMIT, as it was when this migration was written.
LIMIT = 4000
BATCH = 500


def _bounded_args(value):
    text = json.dumps(value, ensure_ascii=False, default=str)
    return value if len(text) <= LIMIT else text[:LIMIT] + "…"


def backfill(apps, schema_editor):
    Message = apps.get_model("sessions_app", "Message")
    LedgerEntry = apps.get_model("sessions_app", "LedgerEntry")
    recorded = set(
        LedgerEntry.objects.exclude(message_ref=None).values_list("message_ref", flat=True)
    )
    calls = (
        Message.objects.filter(role="tool", effect="external")
        .select_related("branch__session")
        .order_by("id")
    )
    batch = []
    for m in calls.iterator(chunk_size=BATCH):
        if m.pk in recorded:
            continue
        failed = isinstance(m.metadata, dict) and bool(m.metadata.get("error"))
        batch.append(
            LedgerEntry(
                session_id=m.branch.session_id,
                user_id=m.branch.session.owner_id,
                branch_ref=m.branch_id,
                turn_ref=None,
                message_ref=m.pk,
                position=m.position,
                tool_name=m.tool_name[:200],
                tool_args=_bounded_args(m.tool_args),
                tool_result=(m.tool_result or "")[:LIMIT],
                status="failed" if failed else "ran",
                created_at=m.created_at,
            )
        )
        if len(batch) >= BATCH:
            LedgerEntry.objects.bulk_create(batch)
            batch = []
    if batch:
        LedgerEntry.objects.bulk_create(batch)


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0018_ledgerentry")]

    operations = [migrations.RunPython(backfill, migrations.RunPython.noop)]
