import datetime

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('sessions_app', '0017_rename_session_branch'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='LedgerEntry',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('branch_ref', models.PositiveBigIntegerField(help_text="The branch's id, kept.")),
                ('turn_ref', models.PositiveBigIntegerField(blank=True, help_text="The turn's id.", null=True)),
                ('message_ref', models.PositiveBigIntegerField(blank=True, help_text="The tool message's id, kept.", null=True)),
                ('position', models.PositiveIntegerField()),
                ('tool_name', models.CharField(max_length=200)),
                ('tool_args', models.JSONField(blank=True, null=True)),
                ('tool_result', models.TextField(blank=True, default='')),
                ('status', models.CharField(choices=[('ran', 'Ran'), ('failed', 'Failed'), ('may_have_run', 'May Have Run')], max_length=16)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('session', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='ledger', to='sessions_app.session')),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['id'],
                'indexes': [models.Index(fields=['session', 'id'], name='ledger_session_id')],
                'constraints': [
                    models.CheckConstraint(condition=models.Q(('status__in', ['ran', 'failed', 'may_have_run'])), name='ledger_status_valid'),
                    models.CheckConstraint(condition=models.Q(('created_at__gte', datetime.datetime(1970, 1, 1, 0, 0, tzinfo=datetime.timezone.utc)), ('created_at__lt', datetime.datetime(2100, 1, 1, 0, 0, tzinfo=datetime.timezone.utc))), name='ledger_created_at_in_range', violation_error_message='The time in created_at must lie between 1970-01-01 and 2099-12-31 (UTC).'),
                ],
            },
        ),
    ]
