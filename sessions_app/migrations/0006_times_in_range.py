"""Every time a user can influence lies between 1970 and 2099 (UTC), so Python can always read
it back: a CHECK constraint per column. Rows already outside the range (imported before this
check) are first moved inside it: a time too early to 1970-01-01, one too late to now."""

import datetime

from django.db import migrations, models
from django.utils import timezone

TIME_MIN = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
TIME_MAX = datetime.datetime(2100, 1, 1, tzinfo=datetime.timezone.utc)

# (model, column, constraint name, may be NULL)
COLUMNS = [
    ("externalsession", "created_at", "session_created_at_in_range", False),
    ("externalsession", "updated_at", "session_updated_at_in_range", False),
    ("externalsession", "archived_at", "session_archived_at_in_range", True),
    ("internalsession", "created_at", "branch_created_at_in_range", False),
    ("message", "created_at", "message_created_at_in_range", False),
    ("turn", "created_at", "turn_created_at_in_range", False),
    ("turn", "started_at", "turn_started_at_in_range", True),
    ("turn", "heartbeat_at", "turn_heartbeat_at_in_range", True),
    ("turn", "finished_at", "turn_finished_at_in_range", True),
]


def move_times_into_range(apps, schema_editor):
    # In SQL only: a time out of Python's range cannot even be read into Python.
    now = timezone.now()
    for model_name, field, _, _ in COLUMNS:
        rows = apps.get_model("sessions_app", model_name).objects
        rows.filter(**{f"{field}__lt": TIME_MIN}).update(**{field: TIME_MIN})
        rows.filter(**{f"{field}__gte": TIME_MAX}).update(**{field: now})


def time_in_range(field, name, null):
    """As core.validation.time_in_range made it when this migration was written."""
    condition = models.Q(**{f"{field}__gte": TIME_MIN, f"{field}__lt": TIME_MAX})
    if null:
        condition |= models.Q(**{f"{field}__isnull": True})
    return models.CheckConstraint(
        condition=condition,
        name=name,
        violation_error_message=(
            f"The time in {field} must lie between 1970-01-01 and 2099-12-31 (UTC)."
        ),
    )


class Migration(migrations.Migration):

    dependencies = [
        ("sessions_app", "0005_turn_attempts"),
    ]

    operations = [
        migrations.RunPython(move_times_into_range, migrations.RunPython.noop),
        *(
            migrations.AddConstraint(
                model_name=model_name, constraint=time_in_range(field, name, null)
            )
            for model_name, field, name, null in COLUMNS
        ),
    ]
