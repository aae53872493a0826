"""A checkpoint's time lies between 1970 and 2099 (UTC), so Python can always read it back: a
CHECK constraint. Rows already outside the range (imported before this check) are first moved
inside it: a time too early to 1970-01-01, one too late to now."""

import datetime

from django.db import migrations, models
from django.utils import timezone

TIME_MIN = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
TIME_MAX = datetime.datetime(2100, 1, 1, tzinfo=datetime.timezone.utc)


def move_times_into_range(apps, schema_editor):
    # In SQL only: a time out of Python's range cannot even be read into Python.
    checkpoints = apps.get_model("checkpoints", "checkpoint").objects
    checkpoints.filter(created_at__lt=TIME_MIN).update(created_at=TIME_MIN)
    checkpoints.filter(created_at__gte=TIME_MAX).update(created_at=timezone.now())


class Migration(migrations.Migration):

    dependencies = [
        ("checkpoints", "0002_initial"),
    ]

    operations = [
        migrations.RunPython(move_times_into_range, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="checkpoint",
            constraint=models.CheckConstraint(
                condition=models.Q(created_at__gte=TIME_MIN, created_at__lt=TIME_MAX),
                name="checkpoint_created_at_in_range",
                violation_error_message=(
                    "The time in created_at must lie between 1970-01-01 and 2099-12-31 (UTC)."
                ),
            ),
        ),
    ]
