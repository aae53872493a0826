"""Who gets which MCP server (for everyone, or chosen users and groups; per session), the
header names each user supplies, the users' own credentials, and the servers' headers encrypted
at rest: a new sealed column filled from the plain one (each existing row encrypted), the plain
one dropped (core.sealed)."""

import core.sealed
import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


def seal_headers(apps, schema_editor):
    McpServer = apps.get_model('agents', 'McpServer')
    for row in McpServer.objects.all():
        row.headers_sealed = row.headers if isinstance(row.headers, dict) else {}
        row.save(update_fields=['headers_sealed'])


def unseal_headers(apps, schema_editor):
    McpServer = apps.get_model('agents', 'McpServer')
    for row in McpServer.objects.all():
        row.headers = row.headers_sealed
        row.save(update_fields=['headers'])


class Migration(migrations.Migration):

    dependencies = [
        ('agents', '0001_initial'),
        ('auth', '0012_alter_user_first_name_max_length'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='mcpserver',
            name='for_everyone',
            field=models.BooleanField(default=True),
        ),
        migrations.AddField(
            model_name='mcpserver',
            name='groups',
            field=models.ManyToManyField(blank=True, related_name='+', to='auth.group'),
        ),
        migrations.AddField(
            model_name='mcpserver',
            name='per_session',
            field=models.BooleanField(default=False),
        ),
        migrations.AddField(
            model_name='mcpserver',
            name='user_headers',
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.AddField(
            model_name='mcpserver',
            name='users',
            field=models.ManyToManyField(blank=True, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='mcpserver',
            name='headers_sealed',
            field=core.sealed.SealedJSONField(blank=True, default=dict),
        ),
        migrations.RunPython(seal_headers, unseal_headers),
        migrations.RemoveField(model_name='mcpserver', name='headers'),
        migrations.RenameField(model_name='mcpserver', old_name='headers_sealed', new_name='headers'),
        migrations.CreateModel(
            name='McpCredential',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('headers', core.sealed.SealedJSONField(blank=True, default=dict)),
                ('updated_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('server', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='credentials', to='agents.mcpserver')),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='mcp_credentials', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'verbose_name': 'MCP credential',
                'constraints': [models.UniqueConstraint(fields=('user', 'server'), name='one_mcp_credential_per_user')],
            },
        ),
    ]
