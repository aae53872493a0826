from __future__ import annotations

from django.contrib.auth.models import AbstractUser
from django.db import models


class User(AbstractUser):
    """A Rollback user. `metadata` holds preferences such as `auto_checkpoint` and `theme`."""

    metadata = models.JSONField(default=dict, blank=True)

    def preference(self, key: str, default=None):
        prefs = self.metadata.get("preferences", {}) if isinstance(self.metadata, dict) else {}
        return prefs.get(key, default) if isinstance(prefs, dict) else default
