"""A real MCP server made with the official SDK (`mcp.server.mcpserver.MCPServer`), served over
streamable HTTP by uvicorn in a thread on a free local port, for tests.

Its tools cover what the agent must handle: one annotated read-only (`lookup`), one that acts
outside and records each call (`send_message`), one annotated destructive (`drop_table`), one
that raises (`explode`), one that sleeps past a short timeout (`slow`), one that answers with an
image beside its text (`chart`, whose bytes are not a PNG), one that answers with a real PNG, a
text resource, a binary resource and a resource link (`snapshot`), and two whose names no model
API accepts (`bad.name`, and one too long once prefixed). Every request must carry
`Authorization: Bearer <token>`; one without it is refused with 401, so a test that gets an
answer proves the secret header was sent. With `echoes=True` it also has two tools that repeat
what the request carried (its Authorization header, its bare token and its URL's query):
`whoami` in its result, `leak` in its error, as a careless server would. With `grows=True` it
also has `grow`, which adds the tool `extra` and says `tools/list_changed` before it answers (a
client of the 2026-07-28 protocol hears it only on a `subscriptions/listen` stream)::

    with FakeMcpServer(token="s3cret").start() as server:
        server.url  # http://127.0.0.1:<port>/mcp
        server.calls  # [("send_message", {"to": "bob", "text": "hi"}), ...]
"""

from __future__ import annotations

import base64
import socket
import struct
import threading
import time
import zlib
from typing import Any
from urllib.parse import parse_qsl

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp.types import (
    BlobResourceContents,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
    ToolAnnotations,
)

__all__ = ["FakeMcpServer", "tiny_png"]


def tiny_png(rgb: tuple[int, int, int] = (200, 30, 30), side: int = 8) -> bytes:
    """A real PNG: `side` x `side` pixels of one colour."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    row = b"\x00" + bytes(rgb) * side
    header = struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(row * side))
        + chunk(b"IEND", b"")
    )


class _RequireToken:
    """ASGI middleware: 401 for an HTTP request without the expected Authorization header."""

    def __init__(self, app: Any, fake: FakeMcpServer) -> None:
        self.app = app
        self.fake = fake

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            got = headers.get(b"authorization", b"").decode("latin-1")
            self.fake.seen_authorization.append(got)
            self.fake.seen_query.append(scope.get("query_string", b"").decode("latin-1"))
            if got != f"Bearer {self.fake.token}":
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [(b"content-type", b"text/plain")],
                    }
                )
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await self.app(scope, receive, send)


class FakeMcpServer:
    """The server, its recorded calls and the Authorization headers it saw."""

    def __init__(
        self,
        *,
        token: str = "test-token",  # noqa: S107 - a test server's token
        name: str = "fake",
        echoes: bool = False,
        sse: bool = False,
        grows: bool = False,
    ) -> None:
        self.sse = sse  # served over SSE (`/sse`) instead of streamable HTTP (`/mcp`)
        self.token = token
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.seen_authorization: list[str] = []
        self.seen_query: list[str] = []
        self.echoes = echoes
        self.grows = grows
        self.slow_seconds = 5.0
        self.mcp = self._build(name)
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    def _build(self, name: str) -> MCPServer:
        mcp = MCPServer(name)
        calls = self.calls

        @mcp.tool(annotations=ToolAnnotations(read_only_hint=True))
        def lookup(query: str) -> str:
            """Look up a word in the dictionary."""
            calls.append(("lookup", {"query": query}))
            return f"definition of {query}"

        @mcp.tool()
        def send_message(to: str, text: str) -> str:
            """Send a message to someone (it cannot be unsent)."""
            calls.append(("send_message", {"to": to, "text": text}))
            return f"sent to {to}"

        @mcp.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
        def drop_table(table: str) -> str:
            """Delete a table and all its rows."""
            calls.append(("drop_table", {"table": table}))
            return f"dropped {table}"

        @mcp.tool()
        def explode() -> str:
            """Always fails."""
            calls.append(("explode", {}))
            raise RuntimeError("the tool broke")

        @mcp.tool()
        async def slow() -> str:
            """Takes its time."""
            calls.append(("slow", {}))
            await anyio.sleep(self.slow_seconds)
            return "finally"

        @mcp.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=False)
        def chart() -> list[str | Image]:
            """Draw a chart: a line of text and a picture."""
            return ["A chart of the week:", Image(data=b"\x89PNG fake image bytes", format="png")]

        @mcp.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=False)
        def snapshot() -> list[Any]:
            """A picture, the note it came with, an attachment and a link to the report."""
            png = base64.b64encode(tiny_png()).decode()
            return [
                TextContent(type="text", text="The snapshot:"),
                ImageContent(type="image", data=png, mime_type="image/png"),
                EmbeddedResource(
                    type="resource",
                    resource=TextResourceContents(
                        uri="file:///notes.txt", mime_type="text/plain", text="Meeting at noon"
                    ),
                ),
                EmbeddedResource(
                    type="resource",
                    resource=BlobResourceContents(
                        uri="file:///data.bin",
                        mime_type="application/octet-stream",
                        blob=base64.b64encode(b"\x00\x01\x02\x03").decode(),
                    ),
                ),
                ResourceLink(
                    type="resource_link",
                    name="report",
                    uri="https://reports.example/q3.pdf",
                    mime_type="application/pdf",
                ),
            ]

        @mcp.tool(name="bad.name")
        def bad_name() -> str:
            """A name no model API accepts."""
            return "never offered"

        @mcp.tool(name="a_tool_whose_name_is_much_too_long_for_any_model_api_to_accept")
        def too_long() -> str:
            """Its name with the server's prefix passes 64 characters."""
            return "never offered"

        if self.echoes:
            self._add_echoes(mcp)
        if self.grows:
            self._add_grow(mcp)
        return mcp

    @staticmethod
    def _add_grow(mcp: MCPServer) -> None:
        @mcp.tool()
        async def grow(ctx: Context) -> str:
            """Adds the tool `extra` and says so."""
            mcp.add_tool(lambda: "extra", name="extra", description="Added by grow.")
            await ctx.notify_tools_changed()
            return "grown"

    def _add_echoes(self, mcp: MCPServer) -> None:
        def carried() -> str:
            authorization = self.seen_authorization[-1]
            bare = authorization.partition(" ")[2]
            query = self.seen_query[-1]
            decoded = dict(parse_qsl(query))
            return f"authorization {authorization}; token {bare}; query {query}; {decoded}"

        @mcp.tool()  # not read-only: its result is also kept in the ledger of external calls
        def whoami() -> str:
            """Say what the request carried."""
            return f"you sent {carried()}"

        @mcp.tool(annotations=ToolAnnotations(read_only_hint=True))
        def leak() -> str:
            """Fail, saying what the request carried."""
            raise ToolError(f"refused {carried()}")  # a ToolError's text reaches the client

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/{'sse' if self.sse else 'mcp'}"

    def start(self) -> FakeMcpServer:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        inner = self.mcp.sse_app() if self.sse else self.mcp.streamable_http_app()
        app = _RequireToken(inner, self)
        config = uvicorn.Config(
            app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="on"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        for _ in range(500):
            if self._server.started:
                return self
            time.sleep(0.01)
        raise RuntimeError("the fake MCP server did not start")

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)

    def reset(self) -> None:
        self.calls.clear()
        self.seen_authorization.clear()
        self.seen_query.clear()

    def __enter__(self) -> FakeMcpServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
