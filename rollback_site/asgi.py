"""ASGI entry point, `rollback_site.asgi:application`: HTTP through Django's synchronous path on
threads of its own (rollback_site.http_handler; bodies bounded by core.bodies.BodyLimit),
WebSockets through Channels (the chat page's socket and the integration event stream). Serve it
with `python -m rollback_site.serve`, which bounds bodies in daphne too.

The served process runs turns (on its own pool when there is no broker) and builds agents for the
pages and the API, so it imports their code (agno, openai) here, at its start: no request or turn
pays for it. django.setup() does not import it (most processes never run a turn)."""

from __future__ import annotations

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rollback_site.settings")
django.setup(set_prefix=False)

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from agents.tasks import preload_turn_code  # noqa: E402
from core.bodies import BodyLimit  # noqa: E402
from web.ws.routing import websocket_urlpatterns  # noqa: E402
from web.ws.security import BearerAuth, OriginCheck  # noqa: E402
from web.ws.unavailable import Unavailable  # noqa: E402

from .http_handler import PooledHandler  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": BodyLimit(PooledHandler()),
        # Unavailable: a 1013 close, not a 500, while the database or Redis does not answer.
        "websocket": Unavailable(
            OriginCheck(AuthMiddlewareStack(BearerAuth(URLRouter(websocket_urlpatterns))))
        ),
    }
)

preload_turn_code()
