"""ExternalSession is now Session and InternalSession is now Branch (issue 35): state only.

Both keep their tables (`db_table` names them), so the renames run no SQL; contenttypes renames
their content types after each RenameModel. The permissions' codenames follow the model's name
(view_externalsession -> view_session): the last step renames the existing rows, so the groups and
users that hold them keep them.
"""

from django.db import migrations

RENAMES = [("externalsession", "session"), ("internalsession", "branch")]
ACTIONS = ["add", "change", "delete", "view"]


def _rename_permissions(apps, schema_editor, renames):
    Permission = apps.get_model("auth", "Permission")
    for old, new in renames:
        for action in ACTIONS:
            found = Permission.objects.filter(
                content_type__app_label="sessions_app", codename=f"{action}_{old}"
            ).first()
            if found is None:
                continue
            taken = Permission.objects.filter(
                content_type__app_label="sessions_app", codename=f"{action}_{new}"
            ).first()
            if taken is not None:
                # Both exist (permissions were created between the steps): keep the new row
                # and give it every holder of the old one.
                taken.group_set.add(*found.group_set.all())
                taken.user_set.add(*found.user_set.all())
                found.delete()
                continue
            found.codename = f"{action}_{new}"
            found.name = f"Can {action} {new}"
            found.save(update_fields=["codename", "name"])


def forwards(apps, schema_editor):
    _rename_permissions(apps, schema_editor, RENAMES)


def backwards(apps, schema_editor):
    _rename_permissions(apps, schema_editor, [(new, old) for old, new in RENAMES])


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("sessions_app", "0016_session_pinned_at"),
        # Every migration that names the old models runs before their rename.
        ("checkpoints", "0005_checkpoint_branch_files_mark"),
        ("governance", "0001_initial"),
        ("sharing", "0001_initial"),
        ("workspace", "0003_fileversion_branch_position"),
    ]

    operations = [
        migrations.AlterModelTable(name="externalsession", table="sessions_app_externalsession"),
        migrations.AlterModelTable(name="internalsession", table="sessions_app_internalsession"),
        migrations.RenameModel(old_name="ExternalSession", new_name="Session"),
        migrations.RenameModel(old_name="InternalSession", new_name="Branch"),
        migrations.RunPython(forwards, backwards, elidable=False),
    ]
