"""The agents app's models: the operator's MCP servers, defined with the MCP code
(agents.mcp.models) and re-exported here, where Django looks for an app's models."""

from __future__ import annotations

from .mcp.models import MCP_NAME_PATTERN, McpCredential, McpServer, McpServerQuerySet

__all__ = ["MCP_NAME_PATTERN", "McpCredential", "McpServer", "McpServerQuerySet"]
