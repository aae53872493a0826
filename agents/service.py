"""Seed 003's import path for its Python API (`from agents.service import AgentService`), kept
for scripts written against the seed; the service itself is agents.agent_service."""

from __future__ import annotations

from .agent_service import AgentService

__all__ = ["AgentService"]
