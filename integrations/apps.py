from __future__ import annotations

from django.apps import AppConfig


class IntegrationsConfig(AppConfig):
    name = "integrations"
    verbose_name = "Integrations"

    def ready(self) -> None:
        # The Telegram relay hears every event of this process (web or worker) and streams the
        # replies of turns started from Telegram; while TELEGRAM_BOT_TOKEN is empty it returns
        # at once.
        # Its tasks (integrations.telegram_update), registered in every process, so the dispatch
        # finds them by name in the web process too (the workers' autodiscovery finds them anyway).
        # Without a broker there is no beat: the embedded mode's recovery thread runs the sweeps
        # of undelivered replies and unhandled updates instead (agents.services.in_process_job).
        from agents.services import in_process_job
        from integrations import tasks  # noqa: F401
        from integrations.telegram import relay, updates

        relay.register()
        in_process_job(relay.replies_sweep)
        in_process_job(updates.updates_sweep)
