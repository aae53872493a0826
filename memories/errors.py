"""Domain errors of memories (mapped to HTTP status by `code`, see core.errors)."""

from __future__ import annotations

from core.errors import Conflict, NotFound


class MemoryNotFound(NotFound):
    def __init__(self, memory_id: object = None) -> None:
        super().__init__(
            "Memory not found." if memory_id is None else f"Memory {memory_id} not found."
        )


class MemoryKeyTaken(Conflict):
    def __init__(self, key: str) -> None:
        super().__init__(
            f"You already have a memory with the key '{key}': edit that one (PATCH it), or "
            "choose another key."
        )
        self.key = key


class MemoryLimitReached(Conflict):
    def __init__(self, count: int, limit: int) -> None:
        super().__init__(
            f"You have {count} memories, the most one user may keep ({limit}): delete some first."
        )
