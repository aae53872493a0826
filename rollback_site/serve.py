"""`python -m rollback_site.serve [daphne options]`: daphne serving
`rollback_site.asgi:application`, with request bodies bounded while they arrive.

daphne (through twisted.web) receives the whole body of a request, into memory or a temporary
file, before the application sees any of it, and then puts all of it on the application's queue
at once. So a limit in the application (core.bodies.BodyLimit) comes too late to spare the
server's memory. Here daphne's request counts the body as it arrives and, as soon as it passes
ROLLBACK_MAX_REQUEST_BYTES (at once when Content-Length says so), answers 413 and closes the
connection: the application never sees that request, and at most the limit was buffered.

The options are daphne's own, unchanged (`-b 0.0.0.0 -p 8000`, `--proxy-headers`, ...); the
application is always ours. daphne's access log, which goes to standard output unless
`--access-log FILE` sends it elsewhere, is written through logging (logger `rollback.access`),
so it follows LOG_FORMAT like every other line.

Before serving, it collects the static files when they are out of date
(rollback_site.static_collect): with DEBUG off, pages need them.
"""

from __future__ import annotations

# isort: off
import daphne.server  # noqa: F401 (first: it installs the asyncio reactor that twisted must use)

# isort: on
import json
import logging
import os
import sys
from typing import Any

from daphne import cli, http_protocol
from daphne.access import AccessLogGenerator

from rollback_site.static_collect import static_files_collect

APPLICATION = "rollback_site.asgi:application"
# How long a WebSocket's opening may take before daphne drops it (its own default is 5 s, after
# which the client gets no answer at all). A saturated machine (the benchmark's 100 chats at once
# on two cores) can take longer than that to open a socket that it then serves well: the client
# would fail and come back, adding to the load. `--websocket_connect_timeout N` on the command
# line still sets it.
CONNECT_TIMEOUT_SECONDS = 30

log = logging.getLogger(__name__)
access_log = logging.getLogger("rollback.access")


class BoundedRequest(http_protocol.WebRequest):  # type: ignore[misc]  # daphne is untyped
    """daphne's HTTP request, refusing a body of more than `max_body` bytes while it arrives."""

    max_body = 0  # set by `main` from the settings

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.body_received = 0
        self.refused = False
        # twisted would also parse a form's body into `request.args`, which daphne never reads:
        # a second copy of the body in memory.
        kwargs.setdefault("parsePOSTFormSubmission", False)
        super().__init__(*args, **kwargs)

    def gotLength(self, length: int | None) -> None:
        if length is not None and length > self.max_body:
            self.requestHeaders.removeHeader(b"expect")  # no "100 Continue" for a refused body
            self.refuse()
            length = 0
        super().gotLength(length)

    def handleContentChunk(self, data: bytes) -> None:
        if self.refused:
            return
        self.body_received += len(data)
        if self.body_received > self.max_body:
            self.refuse()
            return
        super().handleContentChunk(data)

    def requestReceived(self, command: bytes, path: bytes, version: bytes) -> None:
        if not self.refused:
            super().requestReceived(command, path, version)

    def refuse(self) -> None:
        """Answer 413 and close the connection; the rest of the body is not read."""
        self.refused = True
        detail = f"The request body is larger than the limit of {self.max_body} bytes."
        body = json.dumps({"detail": detail}).encode()
        head = (
            b"HTTP/1.1 413 Content Too Large\r\n"
            b"Content-Type: application/json\r\n"
            b"Content-Length: %d\r\n"
            b"Connection: close\r\n\r\n" % len(body)
        )
        self.channel.transport.write(head + body)
        self.channel.loseConnection()
        client = getattr(self.client, "host", self.client)
        log.warning("refused a request body over %d bytes from %s", self.max_body, client)


class AccessLog(AccessLogGenerator):  # type: ignore[misc]  # daphne is untyped
    """daphne's access log: one line per request (and per WebSocket step), through logging when
    it goes to standard output; a file given with --access-log keeps daphne's own format."""

    def write_entry(
        self,
        host: str,
        date: Any,
        request: str,
        status: int | None = None,
        length: int | None = None,
        ident: str | None = None,
        user: str | None = None,
    ) -> None:
        if self.stream is not sys.stdout:
            super().write_entry(host, date, request, status, length, ident, user)
            return
        method, _, path = request.partition(" ")
        access_log.info(
            '%s "%s" %s %s',
            host,
            request,
            status or "-",
            length or "-",
            extra={
                "client": host,
                "method": method,
                "path": path,
                "status": status,
                "size": length,
            },
        )


def main(argv: list[str] | None = None) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rollback_site.settings")
    import django
    from django.conf import settings

    django.setup()
    static_files_collect()
    BoundedRequest.max_body = settings.ROLLBACK_MAX_REQUEST_BYTES
    # daphne's HTTPFactory gives each new connection this module's `WebRequest` class.
    http_protocol.WebRequest = BoundedRequest
    # The command line makes its access log with this name.
    cli.AccessLogGenerator = AccessLog
    # The code that runs turns (agno, openai), which django.setup() leaves out: imported now,
    # before the recovery thread may run a turn, rather than at the first turn. (The application's
    # module imports it too, for a server started another way: rollback_site.asgi.)
    from agents.tasks import preload_turn_code

    preload_turn_code()
    # The embedded mode's turn recovery (no broker, no beat) starts with the server; a turn's
    # dispatch starts it too. (Sockets never start it: they write nothing.)
    from agents.services import start_in_process_recovery

    start_in_process_recovery()
    # AGENT_MCP_SERVERS into the admin's rows now, not at the first turn (agents.mcp).
    from agents.mcp.services import mcp_servers_ensure

    mcp_servers_ensure()
    args = sys.argv[1:] if argv is None else argv
    cli.CommandLineInterface().run([*with_defaults(args), APPLICATION])


def with_defaults(args: list[str]) -> list[str]:
    """daphne's options as given, with this server's defaults for those not given."""
    given = {arg.split("=", 1)[0] for arg in args}
    if "--websocket_connect_timeout" in given:
        return list(args)
    return ["--websocket_connect_timeout", str(CONNECT_TIMEOUT_SECONDS), *args]


if __name__ == "__main__":
    main()
