# The site settings row exists from the start, so the admin finds it to edit.

from django.db import migrations


def create_row(apps, schema_editor):
    SiteSettings = apps.get_model("accounts", "SiteSettings")
    SiteSettings.objects.get_or_create(pk=1)


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0002_apikey_sitesettings"),
    ]

    operations = [
        migrations.RunPython(create_row, migrations.RunPython.noop),
    ]
