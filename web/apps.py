from __future__ import annotations

from django.apps import AppConfig


class WebConfig(AppConfig):
    """The adapters: pages, the REST API, the sockets and the admin console. Its models are the
    domain apps'; this app holds no models of its own."""

    name = "web"
    verbose_name = "Web"
