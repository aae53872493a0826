from __future__ import annotations

from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "agents"
    verbose_name = "Agents"

    def ready(self) -> None:
        # Register the Celery tasks in every process, so agents.dispatch finds `agents.run_turn`
        # by name in the web process too (a worker would discover them on its own).
        from . import tasks  # noqa: F401
