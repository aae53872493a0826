from __future__ import annotations

from django.apps import AppConfig


class CheckpointsConfig(AppConfig):
    name = "checkpoints"
    verbose_name = "Checkpoints"

    def ready(self) -> None:
        # The layers below call up through hooks they declare (sessions_app.hooks,
        # workspace.hooks): a turn that loses its writes, whether a session keeps files or
        # checkpoints, and coalescing's question.
        from sessions_app.hooks import (
            register_checkpoint_before_message,
            register_session_holds,
            register_turn_writes_drop,
        )
        from workspace.hooks import register_checkpoint_holds

        from .captures import turn_writes_drop
        from .each_message import checkpoint_before_message
        from .selectors import checkpoint_holds, session_holds

        register_turn_writes_drop(turn_writes_drop)
        register_session_holds(session_holds)
        register_checkpoint_before_message(checkpoint_before_message)
        register_checkpoint_holds(checkpoint_holds)
        # Celery's tasks of this app, registered by name in every process (a job's import).
        from . import tasks  # noqa: F401
