"""HTTP for the served app: Django's synchronous request path, run on a pool of threads that
live as long as the process (`PooledHandler`, the "http" of rollback_site.asgi).

Django's own ASGI handler runs the request in the event loop and each synchronous piece of it
in a thread: a new thread per request (asgiref's ThreadSensitiveContext), a hop to it and back
for the request_started signal, for each middleware built on MiddlewareMixin (twice: its
request and its response), for the view and for closing the response. Every view here is
synchronous, and so is most of the middleware: those hops were most of a request's time, and a
database connection, which belongs to a thread, was opened again for each request's new
thread. Here the body is read in the loop (daphne gives it whole), and everything else runs in
one hop, as under WSGI: the request_started signal, Django's synchronous middleware chain and
the view, and closing the answer (request_finished): in the same hop for an answer whose
content is made, once it is sent for a streamed one; on HTTP_THREADS threads
whose database connections are kept from request to request (close_old_connections, on the
answering thread, at each request's start and once its answer is made; SQLite keeps one per
thread, PostgreSQL lends them from the process's pool, and gets them back then).

WebSockets do not come here (Channels' consumers: rollback_site.asgi).
"""

from __future__ import annotations

import asyncio
import contextlib
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers import base
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.db import close_old_connections
from django.http import FileResponse
from django.urls import set_script_prefix

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from typing import IO

    from django.http.response import HttpResponseBase

THREAD_NAME = "rollback-http"


class PooledHandler(ASGIHandler):
    """An ASGI app for HTTP: Django's synchronous handler on a pool of lasting threads."""

    def __init__(self, threads: int | None = None) -> None:
        base.BaseHandler.__init__(self)
        self.load_middleware(is_async=False)
        count = threads if threads is not None else int(settings.HTTP_THREADS)
        self.pool = ThreadPoolExecutor(max_workers=max(1, count), thread_name_prefix=THREAD_NAME)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            raise ValueError(f"Django serves HTTP here, not {scope['type']}")
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        response: HttpResponseBase | None = None
        try:
            response = await self._in_pool(self._respond, scope, body_file)
            with contextlib.suppress(asyncio.CancelledError):  # the client went away meanwhile
                await self.send_response(response, send)
        finally:
            if response is not None and getattr(response, "closed_early", False):
                body_file.close()  # the answer was closed in its own hop (`_respond`)
            else:
                await self._in_pool(self._finish, response, body_file)

    def _in_pool(self, fn: Callable[..., Any], *args: Any) -> Awaitable[Any]:
        """`fn(*args)` on one of the pool's threads, with this context (asgiref's, as every
        call from async code to sync code here)."""
        return sync_to_async(fn, thread_sensitive=False, executor=self.pool)(*args)

    def _respond(self, scope: dict[str, Any], body_file: IO[bytes]) -> HttpResponseBase:
        """The answer, as Django's WSGI handler makes it (on a thread of the pool). Once it is
        made, this thread's database connections go back to the process's pool (PostgreSQL)
        or stay for its next request (SQLite): `_finish` may run on another of the threads,
        and a connection it left checked out would be lost to every other request."""
        try:
            set_script_prefix(get_script_prefix(scope))
            signals.request_started.send(sender=self.__class__, scope=scope)
            request, error_response = self.create_request(scope, body_file)
            if request is None:  # Django's 400 for a request it cannot make
                assert error_response is not None  # noqa: S101 - one or the other
                return error_response
            response = self.get_response(request)
            response._handler_class = self.__class__  # type: ignore[attr-defined]
            if isinstance(response, FileResponse):  # the server cuts it in its own pieces
                response.block_size = self.chunk_size
            if not response.streaming:
                # Its content is made: closing it now (request_finished) spares a second hop
                # to a thread once it is sent. A streamed answer is closed after it went out.
                response.close()
                response.closed_early = True  # type: ignore[attr-defined]
            return response
        finally:
            close_old_connections()

    @staticmethod
    def _finish(response: HttpResponseBase | None, body_file: IO[bytes]) -> None:
        """After the answer went out: closing it sends request_finished (its connections go
        back, or are closed when they broke); the body's file goes."""
        try:
            if response is not None:
                response.close()
            else:
                signals.request_finished.send(sender=PooledHandler)
        finally:
            body_file.close()
