from __future__ import annotations

from django.apps import AppConfig
from django.conf import settings


class AgentsConfig(AppConfig):
    name = "agents"
    verbose_name = "Agents"

    def ready(self) -> None:
        # No log line of the HTTP clients or the MCP SDK shows a URL's query or a header value
        # (core.log_secrets), in every process, whatever handlers are configured.
        from core import log_secrets

        log_secrets.install()
        # Register the Celery tasks in every process, so agents.dispatch finds `agents.run_turn`
        # by name in the web process too (a worker would discover them on its own). The module
        # imports none of the turn's code (agno, openai): most processes never run a turn.
        # An answered approval queues its turn's continuation the way turns are run
        # (sessions_app.approvals sits below this package).
        from sessions_app.approvals import set_continuation

        from . import tasks  # noqa: F401
        from .dispatch import enqueue_turn

        set_continuation(enqueue_turn)

        # Every process that can build an agent (web, worker, commands) stops at the start with a
        # clear message when AGENT_TOOLS names something it cannot load, never at a turn. The
        # check is agents.tools, built on agno: with no AGENT_TOOLS (the default) it has nothing
        # to load, and is not imported.
        if getattr(settings, "AGENT_TOOLS", None):
            from .tools import check_agent_tools

            check_agent_tools()
        # AGENT_MCP_SERVERS is checked here (no database yet); its rows are written on first use.
        from .mcp.config import configured_servers

        configured_servers()
        # The embedded mode (no beat) lists the MCP servers' tools again from its own rounds.
        from .mcp.services import mcp_catalogues_when_due
        from .services import in_process_job

        in_process_job(mcp_catalogues_when_due)
