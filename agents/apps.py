from __future__ import annotations

from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "agents"
    verbose_name = "Agents"

    def ready(self) -> None:
        # Register the Celery tasks in every process, so agents.dispatch finds `agents.run_turn`
        # by name in the web process too (a worker would discover them on its own).
        from . import tasks  # noqa: F401
        from .tools import check_agent_tools

        # Every process that can build an agent (web, worker, commands) stops at the start with a
        # clear message when AGENT_TOOLS names something it cannot load, never at a turn.
        check_agent_tools()
        # AGENT_MCP_SERVERS is checked here (no database yet); its rows are written on first use.
        from .mcp.config import configured_servers

        configured_servers()
