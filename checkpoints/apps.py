from __future__ import annotations

from django.apps import AppConfig


class CheckpointsConfig(AppConfig):
    name = "checkpoints"
    verbose_name = "Checkpoints"
