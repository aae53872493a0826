from __future__ import annotations

from django.apps import AppConfig
from django.conf import settings


class AgentsConfig(AppConfig):
    name = "agents"
    verbose_name = "Agents"

    def ready(self) -> None:
        # Register the Celery tasks in every process, so agents.dispatch finds `agents.run_turn`
        # by name in the web process too (a worker would discover them on its own). The module
        # imports none of the turn's code (agno, openai): most processes never run a turn.
        from . import tasks  # noqa: F401

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
