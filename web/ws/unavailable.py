"""The sockets' answer when the database or Redis does not answer (`core.unavailable`).

Outermost around the WebSocket application: an error saying that a server the app depends on
is unreachable, raised anywhere in a socket's life (its handshake's session or API key, the
consumer's checks, the channel layer), ends the socket cleanly, with close code 4503 ("try again
later", as HTTP's 503; daphne sends no 1013), after accepting the handshake if nothing had, so
the client is told why instead of getting a 500 or a bare refusal. The chat page reconnects
after this code, with growing pauses (static/rollback/live.js). Any other error is left to the
server, as before.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from core.unavailable import is_unavailable
from web.ws.codes import CLOSE_UNAVAILABLE

if TYPE_CHECKING:
    from asgiref.typing import ASGIReceiveCallable, ASGISendCallable, ASGISendEvent

    from web.ws.security import App, Scope

log = logging.getLogger(__name__)


class Unavailable:
    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(
        self, scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable
    ) -> None:
        state = {"accepted": False, "closed": False}

        async def watched_send(message: ASGISendEvent) -> None:
            if message["type"] == "websocket.accept":
                state["accepted"] = True
            elif message["type"] == "websocket.close":
                state["closed"] = True
            await send(message)

        try:
            await self.app(scope, receive, watched_send)
        except Exception as exc:
            if not is_unavailable(exc):
                raise
            log.warning("a socket ends: the database or Redis does not answer (%r)", exc)
            if state["closed"]:
                return
            if not state["accepted"]:
                await send({"type": "websocket.accept", "subprotocol": None, "headers": []})
            await send({"type": "websocket.close", "code": CLOSE_UNAVAILABLE, "reason": None})
