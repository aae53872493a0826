"""A real MCP server over stdio (the official SDK's `MCPServer.run("stdio")`), for tests: run as
`python tests/fakes/mcp_stdio_server.py [MODE]`.

Its tools: `counter` (a count kept by the process: 1, 2, 3... shows whether calls share one
process), `echo` (read-only), `big` (a result of N megabytes), `die` (the process exits in the
middle of the call), `pid` (the process's id), `wait` (answers its pid after N seconds), `grow`
(adds the tool `extra`, then says `tools/list_changed` before it answers) and `grow_when` (the
same with `later`, long after it answered: once the file it is given exists). Its SDK is 2.x: a
client of the 2026-07-28 protocol hears `tools/list_changed` only on a `subscriptions/listen`
stream. MODE `many` lists 1,000 more tools; `garbage` writes a line that is not JSON-RPC before
serving; `exit` exits at once.
"""

from __future__ import annotations

import asyncio
import os
import sys

from mcp.server.mcpserver import Context, MCPServer
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

    _add_process_tools(mcp)
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


def _add_process_tools(mcp: MCPServer) -> None:
    """The tools that show which process answers and make it change its tools."""

    @mcp.tool(annotations=ToolAnnotations(read_only_hint=True))
    def pid() -> str:
        """This process's id."""
        return str(os.getpid())

    @mcp.tool(annotations=ToolAnnotations(read_only_hint=True))
    def token() -> str:
        """The variable TOKEN of this process's environment, reversed (what a server says of
        its own credentials is scrubbed)."""
        return os.environ.get("TOKEN", "(none)")[::-1]

    @mcp.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def wait(seconds: float) -> str:
        """Answers this process's id after `seconds`."""
        await asyncio.sleep(seconds)
        return str(os.getpid())

    @mcp.tool()
    async def grow(ctx: Context) -> str:
        """Adds the tool `extra` and says so."""
        mcp.add_tool(lambda: "extra", name="extra", description="Added by grow.")
        await ctx.notify_tools_changed()
        return "grown"

    waiting: list[asyncio.Task[None]] = []

    @mcp.tool()
    async def grow_when(path: str, ctx: Context) -> str:
        """Answers at once; once the file `path` exists, adds the tool `later` and says so."""

        async def grow() -> None:
            while not os.path.exists(path):
                await asyncio.sleep(0.05)
            mcp.add_tool(lambda: "later", name="later", description="Added by grow_when.")
            await ctx.notify_tools_changed()

        waiting.append(asyncio.get_running_loop().create_task(grow()))
        return "waiting"


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "exit":
        sys.exit(2)
    if mode == "garbage":
        sys.stdout.write("this is not json-rpc\n")
        sys.stdout.flush()
    build(mode).run("stdio")
