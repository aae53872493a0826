"""The operator's MCP servers, through the official MCP SDK (`mcp`, 2.x).

agno 3.1's own MCP support (agno.tools.mcp) keeps one async session open per toolkit and runs
its tools as coroutines; our turns run agno synchronously in a worker's thread, one agent per
turn, and need each tool's effect and approval from its annotations: so the SDK is used directly
(agents.mcp.client), and each tool becomes an agno Function with the server's own JSON schema
(agents.mcp.toolset). AGENT_MCP_SERVERS fills the admin's rows (agents.mcp.models: McpServer;
agents.mcp.config, .services). Who gets which server, with which headers (the operator's and
each user's own, agents.mcp.credentials), is agents.mcp.access.
The SDK is imported only when a turn has an enabled server to talk to: it takes a second or
more to import, and most processes never need it. This package imports none of its modules:
agents.models imports its model at start.
"""
