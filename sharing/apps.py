from __future__ import annotations

from django.apps import AppConfig


class SharingConfig(AppConfig):
    name = "sharing"
    verbose_name = "Share links"
