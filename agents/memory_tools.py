"""The agent's memory tools, the names the model sees: `remember` and `recall` (declared in
agents.builtin_tools), and the note of the owner's memories its instructions carry.

They are methods of RollbackAgent (this mixin). Memories belong to the session's owner, not to
the branch: a rollback does not erase them, and `remember`'s effect is `external`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.conf import settings

from core.errors import DomainError
from memories.models import Memory
from memories.selectors import memories_recalled, memory_by_key, prompt_line, prompt_memories
from memories.services import memories_touch, memory_remember

if TYPE_CHECKING:
    from accounts.models import User
    from sessions_app.models import Session


class MemoryTools:
    """The memory tools of an agent bound to one session."""

    external_session: Session

    @property
    def memory_owner(self) -> User:
        """Whose memories the tools and the prompt use: the session's owner, always."""
        return self.external_session.owner

    def memory_note(self, message: str, *, budget: int) -> str | None:
        """The L0 lines of the owner's memories most relevant to `message`, within `budget`
        characters, as the instructions carry them (None when there is nothing to carry)."""
        memories = prompt_memories(self.memory_owner, message, budget=budget)
        if not memories:
            return None
        lines = "\n".join(prompt_line(m) for m in memories)
        return (
            "<user_memories>\n"
            "What you remember about this user (one line each; use the recall tool with a key "
            "for the details):\n"
            f"{lines}\n"
            "</user_memories>"
        )

    def remember(self, key: str, category: str, l0: str, l1: str = "", l2: str = "") -> str:
        """Remember a lasting fact about the user, across all their conversations. Saving under
        a key that exists replaces that memory.

        Args:
            key: a short identifier, e.g. "editor" or "project.deadline" (letters, digits, _ . -).
            category: one of System, Environment, Skill, Project, Comm, Security.
            l0: the fact in one line (at most 200 characters).
            l1: an overview in two or three sentences (optional).
            l2: the full details, Markdown allowed (optional).
        """
        try:
            memory, made = memory_remember(
                user=self.memory_owner,
                key=key,
                category=category,
                l0_abstract=l0,
                l1_overview=l1,
                l2_details=l2,
            )
        except DomainError as exc:
            return f"✗ Could not remember it: {exc.message}"
        verb = "Remembered" if made else "Updated the memory"
        return f"✓ {verb} '{memory.key}' ({memory.category}): {memory.l0_abstract}"

    def recall(self, query: str = "", key: str | None = None) -> str:
        """Look up what you remember about the user. With a query: a numbered list of the best
        matching memories, one line each, as "[key] (Category) line". With a key: that one
        memory in full (its line, overview and details).

        Args:
            query: words to search the memories for (any of them may match).
            key: the key of one memory, to read it in full.
        """
        if key is not None and str(key).strip():
            memory = memory_by_key(self.memory_owner, str(key))
            if memory is None:
                return f"✗ No memory with the key '{str(key).strip()[:100]}'."
            memories_touch(memories=[memory])
            return _memory_in_full(memory)
        found = memories_recalled(
            self.memory_owner, str(query or ""), limit=settings.MEMORY_RECALL_LIMIT
        )
        if not found:
            return "No matching memories."
        memories_touch(memories=found)
        lines = [f"{i}. {prompt_line(m)[2:]}" for i, m in enumerate(found, 1)]
        lines.append("Call recall with key=... to read one in full.")
        return "\n".join(lines)


def _memory_in_full(memory: Memory) -> str:
    parts = [f"[{memory.key}] ({memory.category}) {memory.l0_abstract}"]
    if memory.l1_overview:
        parts.append(f"Overview: {memory.l1_overview}")
    if memory.l2_details:
        parts.append(f"Details:\n{memory.l2_details}")
    return "\n".join(parts)
