from __future__ import annotations

from django.apps import AppConfig


class AccessConfig(AppConfig):
    name = "access"
    verbose_name = "Access by group"

    def ready(self) -> None:
        from . import signals  # noqa: F401 (their receivers connect as they are defined)
