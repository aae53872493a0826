"""WebSocket handshake checks.

Browsers always send an Origin header, and a cookie-authenticated socket opened from another site
must be refused (cross-site WebSocket hijacking): when Origin is present it must be one of
ALLOWED_HOSTS. Scripts and services send no Origin; they authenticate otherwise.
"""

from __future__ import annotations

from channels.security.websocket import AllowedHostsOriginValidator


class OriginCheck:
    def __init__(self, app) -> None:
        self.app = app
        self.validated = AllowedHostsOriginValidator(app)

    async def __call__(self, scope, receive, send):
        if any(name == b"origin" for name, _ in scope.get("headers", [])):
            return await self.validated(scope, receive, send)
        return await self.app(scope, receive, send)
