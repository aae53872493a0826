"""The served stack (daphne, Celery workers, Redis, PostgreSQL): not measured yet."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def run_stack(var: Path, *, rounds: int, smoke: bool) -> dict[str, Any]:
    return {"markdown": "## The served stack\n\nNot measured yet.", "targets": []}
