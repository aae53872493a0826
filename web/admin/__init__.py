"""The admin console (found by Django's admin autodiscovery as `web.admin`)."""

from __future__ import annotations

from . import (
    access,
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
    usage,
)

__all__ = [
    "access",
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
    "usage",
]
