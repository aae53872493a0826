"""The start's static files (rollback_site.static_collect): out of date until collected, up to
date after, and out of date again when a source is new or has changed (an upgrade)."""

from __future__ import annotations

import os
import time

import pytest

from rollback_site.static_collect import static_files_collect, static_files_out_of_date


@pytest.fixture
def manifest_storage(settings, tmp_path):
    """Production's storage (DEBUG off), collecting into an empty STATIC_ROOT, with one more
    source directory to change."""
    source = tmp_path / "source"
    (source / "extra").mkdir(parents=True)
    (source / "extra" / "a.css").write_text("body { color: black; }\n")
    settings.STATIC_ROOT = tmp_path / "collected"
    settings.STATICFILES_DIRS = [*settings.STATICFILES_DIRS, source]
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
    }
    return source / "extra"


def test_static_files_are_collected_when_out_of_date_and_left_alone_when_not(manifest_storage):
    extra = manifest_storage
    assert static_files_out_of_date() == "never collected"

    static_files_collect()
    assert static_files_out_of_date() is None
    manifest = extra.parents[1] / "collected" / "staticfiles.json"
    made = manifest.stat().st_mtime_ns
    static_files_collect()  # up to date: nothing is written
    assert manifest.stat().st_mtime_ns == made

    # Collected a minute ago; a.css edited now.
    earlier = time.time() - 60
    os.utime(manifest, (earlier, earlier))
    (extra / "a.css").write_text("body { color: navy; }\n")
    assert static_files_out_of_date() == "extra/a.css has changed"
    (extra / "b.css").write_text("p { margin: 0; }\n")
    static_files_collect()
    assert static_files_out_of_date() is None
    assert (extra.parents[1] / "collected" / "extra" / "b.css").exists()
    assert "navy" in (extra.parents[1] / "collected" / "extra" / "a.css").read_text()

    (extra / "c.css").write_text("h1 { margin: 0; }\n")
    assert static_files_out_of_date() == "extra/c.css is new"


def test_debug_needs_no_collecting(settings):
    # The suite's storage, like DEBUG's: WhiteNoise serves the files from their sources.
    assert static_files_out_of_date() is None
