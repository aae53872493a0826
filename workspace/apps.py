from __future__ import annotations

from django.apps import AppConfig


class WorkspaceConfig(AppConfig):
    name = "workspace"
    verbose_name = "Workspace"

    def ready(self) -> None:
        # sessions_app (below) records a fork's workspace mark through the hook it declares.
        from sessions_app.hooks import register_fork_mark

        from .selectors import fork_mark

        register_fork_mark(fork_mark)
