"""Stored file paths to Unicode's composed form (NFC), as every path is now normalised when it
enters the workspace (workspace.validation.clean_path): a path stored in another form (NFD,
as macOS names files) would otherwise be unreachable, every lookup asking for its NFC form.

Per session, each path not in NFC takes its NFC form when no other path of the session has it
(the usual case: the reader sees no change); when one has (two files that only looked alike),
the two are not merged, which would change what a checkpoint shows: the non-NFC one is renamed
visibly, "café (2).md" (workspace.nfc.nfc_renames). All the versions of a path get the same new
name, on every branch, so its history stays one file's. Not reversed: NFC paths are as good on
the code before this change."""

from __future__ import annotations

from typing import Any

from django.db import migrations

from workspace.nfc import nfc, nfc_renames


def forwards(apps: Any, schema_editor: Any) -> None:
    FileVersion = apps.get_model("workspace", "FileVersion")
    sessions: set[int] = set()
    rows = FileVersion.objects.values_list("path", "branch__session_id").order_by()
    for path, session_id in rows.iterator(chunk_size=2000):
        if nfc(path) != path:
            sessions.add(session_id)
    for session_id in sorted(sessions):
        of_session = FileVersion.objects.filter(branch__session_id=session_id)
        paths = of_session.values_list("path", flat=True).distinct().order_by()
        for old, new in nfc_renames(paths).items():
            of_session.filter(path=old).update(path=new)


class Migration(migrations.Migration):
    dependencies = [
        ("workspace", "0001_initial"),
    ]

    operations = [
        migrations.RunPython(forwards, migrations.RunPython.noop, elidable=True),
    ]
