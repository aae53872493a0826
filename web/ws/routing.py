from __future__ import annotations

from django.urls import path

from web.ws import consumers

websocket_urlpatterns = [
    path("ws/chat/<int:pk>/", consumers.ChatConsumer.as_asgi()),
    path("ws/v1/sessions/<int:pk>/", consumers.EventStreamConsumer.as_asgi()),
]
