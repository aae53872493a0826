"""The retention rules' default schedules, nightly. They live in the database (django-celery-beat)
so an operator edits them in the admin ("Periodic tasks") and the edit stays: schedules written in
the settings would be written over at every start of beat."""

from django.db import migrations

SCHEDULES = [
    ("Delete old automatic checkpoints", "ops.prune_auto_checkpoints", "0"),
    ("Archive idle sessions", "ops.archive_idle_sessions", "30"),
]


def add_schedules(apps, schema_editor):
    CrontabSchedule = apps.get_model("django_celery_beat", "CrontabSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    for name, task, minute in SCHEDULES:
        crontab, _ = CrontabSchedule.objects.get_or_create(
            minute=minute,
            hour="3",
            day_of_week="*",
            day_of_month="*",
            month_of_year="*",
            timezone="UTC",
        )
        PeriodicTask.objects.get_or_create(
            name=name,
            defaults={
                "task": task,
                "crontab": crontab,
                "description": "A retention rule (ops.retention); the RETENTION_* settings apply "
                "unless the keyword arguments here name days or keep_latest.",
            },
        )


def remove_schedules(apps, schema_editor):
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTask.objects.filter(name__in=[name for name, _, _ in SCHEDULES]).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("ops", "0001_initial"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(add_schedules, remove_schedules)]
