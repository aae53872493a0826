from __future__ import annotations

from django.apps import AppConfig


class UsageConfig(AppConfig):
    name = "usage"
    verbose_name = "Usage and budgets"

    def ready(self) -> None:
        from sessions_app.hooks import register_turn_admission

        from . import signals  # noqa: F401 (their receivers connect as they are defined)
        from .selectors import budget_check

        register_turn_admission(budget_check)
