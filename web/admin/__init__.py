"""The admin console (found by Django's admin autodiscovery as `web.admin`)."""

from __future__ import annotations

from . import (
    accounts,
    branches,
    checkpoints,
    governance,
    integrations,
    ledger,
    login,
    mcp,
    memories,
    messages,
    ops,
    sessions,
)

__all__ = [
    "accounts",
    "branches",
    "checkpoints",
    "governance",
    "integrations",
    "ledger",
    "login",
    "mcp",
    "memories",
    "messages",
    "ops",
    "sessions",
]
