"""The admin console (found by Django's admin autodiscovery as `web.admin`)."""

from __future__ import annotations

from . import (
    accounts,
    checkpoints,
    governance,
    integrations,
    login,
    mcp,
    memories,
    ops,
    sessions,
)

__all__ = [
    "accounts",
    "checkpoints",
    "governance",
    "integrations",
    "login",
    "mcp",
    "memories",
    "ops",
    "sessions",
]
