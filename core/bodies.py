"""The size limit of request bodies (ROLLBACK_MAX_REQUEST_BYTES), chunked or not, in front of
Django.

`BodyLimit` wraps the HTTP application. A body whose Content-Length is over the limit is refused
with 413 before any of it is read. A body without Content-Length (chunked) is read here, counted,
and refused with 413 as soon as it passes the limit; a smaller one is handed on with a
Content-Length header of its real size, since Django REST framework reads a body without that
header as empty.

This holds under any ASGI server, but it sees a body only once the server hands it over, and
daphne receives a whole body before it does: `rollback_site.serve` bounds the body there, while
it arrives.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from django.conf import settings

Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[..., Awaitable[None]]  # Django's handler types its messages as Mapping


def too_large_detail(limit: int) -> str:
    return f"The request body is larger than the limit of {limit} bytes."


async def _answer(send: Send, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _declared_length(headers: list[tuple[bytes, bytes]]) -> int | None:
    """The Content-Length the request declares, None without one; ValueError when unreadable."""
    values = {value.strip() for name, value in headers if name.lower() == b"content-length"}
    if not values:
        return None
    if len(values) > 1 or not all(value.isdigit() for value in values):
        raise ValueError(values)
    return int(values.pop())


class BodyLimit:
    """ASGI middleware: HTTP request bodies of at most ROLLBACK_MAX_REQUEST_BYTES, each with a
    Content-Length header."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = settings.ROLLBACK_MAX_REQUEST_BYTES
        try:
            declared = _declared_length(scope["headers"])
        except ValueError:
            await _answer(send, 400, "The request's Content-Length header is not a number.")
            return
        if declared is not None:
            if declared > limit:
                await _answer(send, 413, too_large_detail(limit))
            else:
                await self.app(scope, receive, send)
            return
        messages: list[Message] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away before the end of its body
            size += len(message.get("body", b""))
            if size > limit:
                await _answer(send, 413, too_large_detail(limit))
                return
            messages.append(message)
            if not message.get("more_body", False):
                break
        if size:
            scope = {**scope, "headers": [*scope["headers"], (b"content-length", b"%d" % size)]}
        read: Iterator[Message] = iter(messages)

        async def replay() -> Message:
            return next(read, None) or await receive()

        await self.app(scope, replay, send)
