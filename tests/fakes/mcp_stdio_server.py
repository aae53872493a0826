"""A real MCP server over stdio (the official SDK's `MCPServer.run("stdio")`), for tests: run as
`python tests/fakes/mcp_stdio_server.py [MODE]`.

Its tools: `counter` (a count kept by the process: 1, 2, 3... shows whether calls share one
process), `echo` (read-only), `big` (a result of N megabytes), `die` (the process exits in the
middle of the call). MODE `many` lists 1,000 more tools; `garbage` writes a line that is not
JSON-RPC before serving; `exit` exits at once.
"""

from __future__ import annotations

import os
import sys

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations


def build(mode: str) -> MCPServer:
    mcp = MCPServer("stdio-fake")
    state = {"count": 0}

    @mcp.tool()
    def counter() -> str:
        """Counts its calls."""
        state["count"] += 1
        return str(state["count"])

    @mcp.tool(annotations=ToolAnnotations(read_only_hint=True))
    def echo(text: str) -> str:
        """Says it back."""
        return f"echo: {text}"

    @mcp.tool(annotations=ToolAnnotations(read_only_hint=True))
    def big(megabytes: int) -> str:
        """A long text."""
        return "x" * (megabytes * 1024 * 1024)

    @mcp.tool()
    def die() -> str:
        """Exits in the middle of the call."""
        os._exit(3)

    @mcp.tool(name="write_file")
    def write_file(path: str) -> str:
        """Named like a built-in."""
        return f"server wrote {path}"

    mcp.add_tool(
        lambda: "for the app only",
        name="app_only",
        description="Shown in an app, never offered to the model.",
        meta={"ui": {"visibility": ["app"]}},
    )

    if mode == "many":
        for i in range(1000):
            mcp.add_tool(lambda i=i: str(i), name=f"t{i:04d}", description=f"tool {i}")
    return mcp


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "exit":
        sys.exit(2)
    if mode == "garbage":
        sys.stdout.write("this is not json-rpc\n")
        sys.stdout.flush()
    build(mode).run("stdio")
