"""AgentService: the seed's high-level API for building, resuming and rolling back agents
(importable as seed 003 had it from agents.service).

With `user`, every lookup is scoped to that user (another user's session is "not found").
Errors as in the seed: ValueError for an unknown session, except `resume_agent` (None) and
`rollback_to_checkpoint` (None for an unknown checkpoint).

A rollback the model asks for during `agent.run(...)` stays a request, as in the seed:
`handle_agent_response` reports it, and `rollback_to_checkpoint` carries it out as a new branch.

A tool call that needs approval: no worker runs this API's turns, so the answer comes in
process. Either give a callback (`agent.approver = lambda pending: ...`, or
`agent.run(message, approver=...)` for one call; called with the turn's `pending_approval`: True
approves, and the turn resumes at once in the same call), or let `run` return with
`agent.last_turn.status == "awaiting_approval"` (its output None) and answer later with
`agent.answer_approval(True or False)`, which resumes the turn and returns as `run` does. The
waiting turn is saved on its row meanwhile: it holds no thread, and survives the process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agno.models.base import Model
from django.conf import settings

from checkpoints.errors import CheckpointNotFound
from checkpoints.models import Checkpoint
from checkpoints.selectors import find_session_checkpoint
from checkpoints.services import checkpoint_restore
from sessions_app.models import Branch, Session
from sessions_app.selectors import branch_history, session_branches
from sessions_app.services import session_update

from .model import build_model
from .rollback_agent import RollbackAgent, auto_checkpoint_enabled, load_session

if TYPE_CHECKING:
    from accounts.models import User


class AgentService:
    def __init__(
        self, model_config: dict[str, Any] | None = None, *, user: User | None = None
    ) -> None:
        self.model_config = {"id": settings.AGENT_MODEL, "temperature": 0.7, **(model_config or {})}
        self.user = user

    def _session(self, external_session_id: int) -> Session:
        return load_session(external_session_id, user=self.user)

    def _model(self, session: Session) -> Model:
        """The session's own model and temperature, checked against what sessions may use
        (InvalidInput otherwise), else this service's `model_config`."""
        return build_model(
            session.settings,
            default_id=self.model_config.get("id"),
            default_temperature=self.model_config.get("temperature"),
        )

    def _agent(self, session: Session, **kwargs: Any) -> RollbackAgent:
        kwargs.setdefault("auto_checkpoint", auto_checkpoint_enabled(session))
        return RollbackAgent(
            external_session_id=session.pk, model=self._model(session), user=self.user, **kwargs
        )

    def create_new_agent(
        self, external_session_id: int, session_name: str | None = None, **agent_kwargs: Any
    ) -> RollbackAgent:
        """An agent on a new, empty branch of the session (made current)."""
        session = self._session(external_session_id)
        if session_name:
            session_update(session=session, name=session_name)
        return self._agent(session, **agent_kwargs)

    def resume_agent(
        self, external_session_id: int, internal_session_id: int | None = None
    ) -> RollbackAgent | None:
        """An agent on the session's current branch, or on the given branch (made current).
        None when the session (or the branch in it) is not found, as in seed 003."""
        try:
            session = self._session(external_session_id)
        except ValueError:
            return None
        if internal_session_id is None:
            return self._agent(session, skip_session_creation=True)
        try:
            known = Branch.objects.filter(pk=int(internal_session_id), session=session)
        except (ValueError, TypeError, OverflowError):
            return None
        if not known.exists():
            return None
        return self._agent(
            session, skip_session_creation=True, internal_session_id=int(internal_session_id)
        )

    def rollback_to_checkpoint(
        self, external_session_id: int, checkpoint_id: int
    ) -> RollbackAgent | None:
        """Restore the checkpoint as a new branch; an agent on it. None for an unknown (or
        another session's) checkpoint."""
        session = self._session(external_session_id)
        try:
            checkpoint = find_session_checkpoint(session, checkpoint_id)
            branch = checkpoint_restore(checkpoint=checkpoint, session=session).branch
        except CheckpointNotFound:
            return None
        return self._agent(session, skip_session_creation=True, internal_session_id=branch.pk)

    def handle_agent_response(self, agent: RollbackAgent, response: object) -> bool:
        """True when the agent's last run asked for a rollback (seed 003): its checkpoint's id
        is then `agent.session_state["rollback_checkpoint_id"]`, for `rollback_to_checkpoint`.
        Nothing is changed here. An agent that carried the rollback out itself
        (`carry_out_rollbacks`) has no request left, so this answers False for it."""
        return agent.requested_rollback is not None

    def list_internal_sessions(self, external_session_id: int) -> list[Branch]:
        return list(session_branches(self._session(external_session_id)))

    def list_checkpoints(self, internal_session_id: int) -> list[Checkpoint]:
        branches = Branch.objects.all()
        if self.user is not None:
            branches = branches.filter(session__owner=self.user)
        try:
            branch = branches.get(pk=int(internal_session_id))
        except (Branch.DoesNotExist, ValueError, TypeError):
            raise ValueError(f"Branch {internal_session_id} not found.") from None
        return list(branch.checkpoints.order_by("-created_at", "-id"))

    def get_conversation_summary(self, agent: RollbackAgent, last: int = 10) -> str:
        branch = agent.refresh_branch()
        total = branch.message_count
        shown = branch_history(branch, start=max(0, total - last))
        lines = [f"Conversation ({total} messages):"]
        for m in shown:
            if m.role == "tool":
                text = f"{m.tool_name} → {m.tool_result}"
            elif m.tool_calls and not m.content:
                names = [str((c.get("function") or {}).get("name")) for c in m.tool_calls]
                text = "calls " + ", ".join(names)
            else:
                text = m.content
            text = " ".join(text.split())
            lines.append(f"[{m.role}] {text[:100]}{'…' if len(text) > 100 else ''}")
        if total > last:
            lines.append(f"... (last {last} messages shown)")
        return "\n".join(lines)


def counted(n: int, word: str, plural: str | None = None) -> str:
    """`n` and the word, plural unless one: "1 message", "3 branches"."""
    return f"{n} {word if n == 1 else plural or word + 's'}"


def branch_lines(branches: list[Branch]) -> list[str]:
    """A session's branches as text, a heading then a line each (* = current): where each
    starts and how many messages and checkpoints it holds. `manage.py chat`'s and the Telegram
    bot's /branches."""
    lines = [f"{counted(len(branches), 'branch', 'branches')} (* = current):"]
    for b in branches:
        origin = (
            f"from branch {b.parent_id} at message {b.fork_position}"
            if b.parent_id is not None
            else "root"
        )
        lines.append(
            f"{'*' if b.is_current else ' '} branch {b.pk} ({origin}): "
            f"{counted(b.message_count, 'message')}, {counted(b.checkpoint_count, 'checkpoint')}"
        )
    return lines
