"""A real MCP server over stdio built with the 1.x SDK, as most published servers are today: run
with .venv-mcp's Python (requirements/mcp.txt), `python tests/fakes/mcp_legacy_server.py`. It
speaks the handshake-era protocol, where `notifications/tools/list_changed` comes on the session
itself. Its tools: `pid` (the process's id) and `grow` (adds the tool `extra`, then says
`tools/list_changed`)."""

from __future__ import annotations

import os

from mcp.server.fastmcp import Context, FastMCP

mcp = FastMCP("legacy-fake")


@mcp.tool()
def pid() -> str:
    """This process's id."""
    return str(os.getpid())


@mcp.tool()
async def grow(ctx: Context) -> str:
    """Adds the tool `extra` and says so."""
    mcp.add_tool(lambda: "extra", name="extra", description="Added by grow.")
    await ctx.session.send_tool_list_changed()
    return "grown"


if __name__ == "__main__":
    mcp.run("stdio")
