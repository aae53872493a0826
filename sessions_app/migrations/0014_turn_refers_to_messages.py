"""A turn refers to its user message and its reply instead of copying their texts.

Each existing turn is pointed at the messages that hold its texts: the user's message (the id
the turn kept in metadata, else the message at its position on its branch), and the reply (the
first assistant message after the user's on its branch with exactly that text). Where no such
message exists any more (a rewind deleted it, its branch was deleted), the text is kept in the
turn's metadata (`message_text`, `reply_text`), so every existing turn answers the API as
before. Then the copies are dropped. Reversible: the texts are copied back."""

from __future__ import annotations

import django.db.models.deletion
from django.db import migrations, models

BATCH = 500


def _user_message(Message, turn):
    meta = turn.metadata if isinstance(turn.metadata, dict) else {}
    candidates = []
    if isinstance(meta.get("user_message_id"), int):
        candidates.append(Message.objects.filter(pk=meta["user_message_id"]))
    if turn.branch_id is not None and turn.user_message_position is not None:
        candidates.append(
            Message.objects.filter(branch_id=turn.branch_id, position=turn.user_message_position)
        )
    for rows in candidates:
        found = rows.filter(role="user", content=turn.message).values_list("pk", flat=True)
        pk = found.first()
        if pk is not None:
            return pk
    return None


def _reply_message(Message, turn):
    if not turn.reply or turn.branch_id is None:
        return None
    after = -1 if turn.user_message_position is None else turn.user_message_position
    return (
        Message.objects.filter(
            branch_id=turn.branch_id, position__gt=after, role="assistant", content=turn.reply
        )
        .order_by("position")
        .values_list("pk", flat=True)
        .first()
    )


def refer(apps, schema_editor):
    Turn = apps.get_model("sessions_app", "Turn")
    Message = apps.get_model("sessions_app", "Message")
    changed = []
    for turn in Turn.objects.order_by("pk").iterator(chunk_size=BATCH):
        meta = dict(turn.metadata) if isinstance(turn.metadata, dict) else {}
        turn.user_message_id = _user_message(Message, turn)
        if turn.user_message_id is None and turn.message:
            meta["message_text"] = turn.message
        turn.reply_message_id = _reply_message(Message, turn)
        if turn.reply_message_id is None and turn.reply:
            meta["reply_text"] = turn.reply
        turn.metadata = meta
        changed.append(turn)
        if len(changed) >= BATCH:
            Turn.objects.bulk_update(changed, ["user_message", "reply_message", "metadata"])
            changed = []
    if changed:
        Turn.objects.bulk_update(changed, ["user_message", "reply_message", "metadata"])


def copy_back(apps, schema_editor):
    Turn = apps.get_model("sessions_app", "Turn")
    Message = apps.get_model("sessions_app", "Message")
    changed = []
    for turn in Turn.objects.order_by("pk").iterator(chunk_size=BATCH):
        meta = dict(turn.metadata) if isinstance(turn.metadata, dict) else {}
        texts = dict(
            Message.objects.filter(
                pk__in=[pk for pk in (turn.user_message_id, turn.reply_message_id) if pk]
            ).values_list("pk", "content")
        )
        turn.message = texts.get(turn.user_message_id) or meta.pop("message_text", "") or ""
        turn.reply = texts.get(turn.reply_message_id) or meta.pop("reply_text", "") or ""
        meta.pop("message_text", None)
        meta.pop("reply_text", None)
        turn.metadata = meta
        changed.append(turn)
        if len(changed) >= BATCH:
            Turn.objects.bulk_update(changed, ["message", "reply", "metadata"])
            changed = []
    if changed:
        Turn.objects.bulk_update(changed, ["message", "reply", "metadata"])


class Migration(migrations.Migration):

    dependencies = [
        ('sessions_app', '0013_turn_dispatched_at'),
    ]

    operations = [
        migrations.AddField(
            model_name='turn',
            name='user_message',
            field=models.ForeignKey(blank=True, db_constraint=False, db_index=False, null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='sessions_app.message'),
        ),
        migrations.AddField(
            model_name='turn',
            name='reply_message',
            field=models.ForeignKey(blank=True, db_constraint=False, db_index=False, null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='sessions_app.message'),
        ),
        migrations.RunPython(refer, copy_back),
        # Blank by default, so that going back re-adds the column to existing rows (then
        # copy_back fills it).
        migrations.AlterField(
            model_name='turn',
            name='message',
            field=models.TextField(blank=True, default=''),
        ),
        migrations.RemoveField(
            model_name='turn',
            name='message',
        ),
        migrations.RemoveField(
            model_name='turn',
            name='reply',
        ),
    ]
