"""The static files collected before a web process serves (`python -m rollback_site.serve`).

With DEBUG off the pages name their static files through collectstatic's manifest (WhiteNoise's
CompressedManifestStaticFilesStorage): where collectstatic never ran (a fresh checkout) every page
would be a 500, and after an upgrade a page would name a file that was never collected. So the
start collects them when they are missing or older than their sources. When they are up to date
this only compares the sources with the manifest, and writes nothing. One process collects at a
time (a file lock beside STATIC_ROOT): web processes started together on one machine do not write
the same files at once. When the files cannot be collected, the process refuses to start and says
why.
"""

from __future__ import annotations

import fcntl
import logging
from pathlib import Path

from django.apps import apps
from django.conf import settings
from django.contrib.staticfiles import finders
from django.contrib.staticfiles.storage import ManifestFilesMixin
from django.core.files.storage import storages
from django.core.management import call_command

log = logging.getLogger(__name__)


def static_files_out_of_date() -> str | None:
    """Why the collected static files are not what the pages need (never collected, a source
    file new or changed since), or None when they are up to date or need no collecting (DEBUG,
    where WhiteNoise serves them from their sources)."""
    storage = storages["staticfiles"]  # the instance the pages' {% static %} uses
    if not isinstance(storage, ManifestFilesMixin):
        return None
    manifest = Path(storage.path(storage.manifest_name))
    if not manifest.is_file():
        return "never collected"
    collected, _ = storage.load_manifest()  # the files and the manifest's own hash
    made = manifest.stat().st_mtime
    ignored = apps.get_app_config("staticfiles").ignore_patterns
    for finder in finders.get_finders():
        for path, source in finder.list(ignored):
            if path not in collected:
                return f"{path} is new"
            if source.get_modified_time(path).timestamp() > made:
                return f"{path} has changed"
    return None


def static_files_collect() -> None:
    """Collect the static files when they are out of date (see the module's docstring)."""
    root = Path(settings.STATIC_ROOT)
    with root.with_name(f"{root.name}.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        reason = static_files_out_of_date()
        if reason is None:
            return
        log.info("collecting the static files into %s (%s)", root, reason)
        try:
            call_command("collectstatic", interactive=False, verbosity=0)
        except Exception as exc:
            raise SystemExit(
                f"Could not collect the static files into {root} ({exc}); without them every "
                "page would fail. Fix the cause, or run `manage.py collectstatic --noinput`, "
                "and start again."
            ) from exc
        storage = storages["staticfiles"]
        if isinstance(storage, ManifestFilesMixin):  # this process's pages use the new manifest
            storage.hashed_files, storage.manifest_hash = storage.load_manifest()
