"""The sandbox's tests need bubblewrap (`apt-get install bubblewrap`; `.ci/run` installs it):
without it they are skipped, with the reason, except in CI, where they fail."""

from __future__ import annotations

import os
import shutil

import pytest


@pytest.fixture(autouse=True)
def _needs_bubblewrap(settings):
    if shutil.which(settings.SANDBOX_BWRAP) is None:
        reason = "bubblewrap is missing: install Debian's package (apt-get install bubblewrap)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)


@pytest.fixture
def demo(settings):
    """The offline demo model answers (no model server)."""
    settings.OPENAI_API_KEY = ""
    settings.OPENAI_BASE_URL = ""
    settings.DEMO_MODEL_WORD_DELAY = 0
