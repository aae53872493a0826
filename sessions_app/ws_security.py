"""WebSocket handshake checks.

Browsers always send an Origin header, and a cookie-authenticated socket opened from another site
must be refused (cross-site WebSocket hijacking): when Origin is present it must be one of
ALLOWED_HOSTS. Scripts and services send no Origin; they authenticate otherwise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from channels.security.websocket import AllowedHostsOriginValidator

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from typing import Any, TypeAlias

    from asgiref.typing import ASGIReceiveCallable, ASGISendCallable

    # Channels hands the scope on as a plain dict and adds keys of its own (user, url_route...).
    Scope: TypeAlias = dict[str, Any]
    App: TypeAlias = Callable[[Scope, ASGIReceiveCallable, ASGISendCallable], Awaitable[None]]


class OriginCheck:
    def __init__(self, app: App) -> None:
        self.app = app
        self.validated = AllowedHostsOriginValidator(app)

    async def __call__(
        self, scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable
    ) -> None:
        if any(name == b"origin" for name, _ in scope.get("headers", [])):
            return await self.validated(scope, receive, send)
        return await self.app(scope, receive, send)


class BearerAuth:
    """`Authorization: Bearer <key>` on the handshake authenticates as the key's user (for
    integrations); a present but invalid key leaves the connection anonymous, so it is refused."""

    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(
        self, scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable
    ) -> None:
        from channels.db import database_sync_to_async
        from django.contrib.auth.models import AnonymousUser

        from accounts.authentication import bearer_key
        from accounts.services import apikey_authenticate

        header = next((v for k, v in scope.get("headers", []) if k == b"authorization"), None)
        if header is not None:
            try:
                raw = bearer_key(header)
            except ValueError:
                raw = ""
            if raw is not None:
                user = await database_sync_to_async(apikey_authenticate)(raw) if raw else None
                scope = {**scope, "user": user or AnonymousUser()}
        return await self.app(scope, receive, send)
