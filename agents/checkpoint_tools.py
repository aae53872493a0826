"""The agent's checkpoint tools, the names the model sees: `create_checkpoint`,
`list_checkpoints_tool`, `rollback_to_checkpoint_tool`, `delete_checkpoint_tool`,
`get_checkpoint_info_tool`, `cleanup_auto_checkpoints_tool` (declared in agents.builtin_tools).

They are methods of RollbackAgent (this mixin), so agno offers them as bound methods, their
docstrings' Args: being the schema. They act on the agent's session through checkpoints.services;
a rollback the model asks for is only requested here (in the run's session state), and carried
out when the reply ends (RollbackAgent.carry_out_rollback) or by seed 003's AgentService. A tool
never raises: a refusal comes back to the model as its result, starting with "✗ ".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from checkpoints.models import Checkpoint
from checkpoints.selectors import find_session_checkpoint, namesakes, session_checkpoints
from checkpoints.services import checkpoint_cleanup_auto, checkpoint_create, checkpoint_delete
from core.errors import DomainError
from sessions_app.labels import branch_label

if TYPE_CHECKING:
    from sessions_app.models import Branch, Session

    from .turn_state import TurnState


def _when(cp: Checkpoint) -> str:
    return cp.created_at.strftime("%Y-%m-%d %H:%M:%S")


class CheckpointTools:
    """The checkpoint tools of an agent that works on one branch of one session."""

    external_session: Session
    carry_out_rollbacks: bool
    # The running turn's attempt (agents.turn_state), None outside a turn: where its user
    # message sits, so checkpoints the model asks for mark the conversation as it stood when the
    # user asked.
    turn_state: TurnState | None

    def refresh_branch(self) -> Branch:
        """The agent's branch, read again."""
        raise NotImplementedError

    def plan_state(self) -> dict[str, Any]:
        """The run's session state (made when it has none)."""
        raise NotImplementedError

    def create_checkpoint(self, name: str | None = None) -> str:
        """Save a checkpoint of the conversation as it stands, so the user can come back to it.

        Args:
            name: a short name for the checkpoint, e.g. "after-variables".
        """
        at = self.turn_state.position if self.turn_state is not None else None
        try:
            branch = self.refresh_branch()
            checkpoint = checkpoint_create(
                branch=branch,
                name=name,
                at=at,
                metadata={"trigger": "tool" if at is not None else "manual"},
            )
        except DomainError as exc:
            return f"✗ Could not create the checkpoint: {exc.message}"
        saved = checkpoint.checkpoint_name
        answer = f"✓ Checkpoint '{saved}' created successfully (ID: {checkpoint.pk})"
        if name is not None and name.strip() and saved != name.strip():
            answer += f". The name '{name.strip()}' was taken in this conversation."
        return answer

    def list_checkpoints_tool(self) -> str:
        """List the checkpoints of this conversation, newest first."""
        checkpoints = list(session_checkpoints(self.external_session)[:50])
        if not checkpoints:
            return "No checkpoints yet."
        lines = ["Available checkpoints:"]
        for cp in checkpoints:
            kind = "auto" if cp.is_auto else "manual"
            lines.append(
                f"• ID: {cp.pk} | {cp.checkpoint_name} | Type: {kind} | Created: {_when(cp)}"
            )
        return "\n".join(lines)

    def rollback_to_checkpoint_tool(self, checkpoint_id_or_name: int | str) -> str:
        """Roll the conversation back to a checkpoint, by its id or its name. The rollback
        happens after this reply ends; the old line of conversation is kept.

        Args:
            checkpoint_id_or_name: the checkpoint's id (a number) or its name.
        """
        try:
            checkpoint = find_session_checkpoint(
                self.external_session, checkpoint_id_or_name, branch=self.refresh_branch()
            )
        except DomainError as exc:
            return f"✗ {exc.message} Use list_checkpoints_tool to see the checkpoints."
        state = self.plan_state()
        state["rollback_requested"] = True
        state["rollback_checkpoint_id"] = checkpoint.pk
        answer = (
            f"✓ Rollback to checkpoint '{checkpoint.checkpoint_name}' (ID: {checkpoint.pk}, "
            f"{branch_label(checkpoint.branch)}, created {_when(checkpoint)} UTC) requested."
        )
        if self.carry_out_rollbacks:
            answer += " It will happen as soon as this reply ends."
        others = namesakes(checkpoint)
        if others and not str(checkpoint_id_or_name).strip().isdigit():
            answer += (
                f" {others} other checkpoint{' shares' if others == 1 else 's share'} this name; "
                "this is "
                "the newest one in the current line of conversation (or, if none is, in the "
                "session). To pick another, roll back by its ID (see list_checkpoints_tool)."
            )
        return answer

    def delete_checkpoint_tool(self, checkpoint_id: int) -> str:
        """Delete one checkpoint of this conversation (its messages are kept).

        Args:
            checkpoint_id: the id of the checkpoint to delete.
        """
        try:
            checkpoint = find_session_checkpoint(self.external_session, int(checkpoint_id))
            checkpoint_delete(checkpoint=checkpoint)
        except DomainError as exc:
            return f"✗ {exc.message}"
        return f"✓ Checkpoint {checkpoint.pk} deleted successfully."

    def get_checkpoint_info_tool(self, checkpoint_id: int) -> str:
        """Show the details of one checkpoint.

        Args:
            checkpoint_id: the id of the checkpoint.
        """
        try:
            cp = find_session_checkpoint(self.external_session, int(checkpoint_id))
        except DomainError as exc:
            return f"✗ {exc.message}"
        lines = [
            "Checkpoint Details:",
            f"• ID: {cp.pk}",
            f"• Name: {cp.checkpoint_name}",
            f"• Type: {'Automatic' if cp.is_auto else 'Manual'}",
            f"• Created: {_when(cp)}",
            f"• Conversation Length: {cp.message_count} messages",
            f"• Branch: {branch_label(cp.branch)}",
        ]
        if cp.description:
            lines.append(f"• Description: {cp.description}")
        if cp.metadata.get("tool_name"):
            lines.append(f"• After tool: {cp.metadata['tool_name']}")
        return "\n".join(lines)

    def cleanup_auto_checkpoints_tool(self, keep_latest: int = 5) -> str:
        """Delete old automatic checkpoints, keeping the newest ones of each branch.

        Args:
            keep_latest: how many automatic checkpoints to keep per branch (default 5).
        """
        try:
            removed = checkpoint_cleanup_auto(
                keep_latest=int(keep_latest), session=self.external_session
            )
        except (DomainError, ValueError, TypeError) as exc:
            return f"✗ {getattr(exc, 'message', exc)}"
        return f"✓ Cleaned up {removed} old automatic checkpoints. Kept the latest {keep_latest}."
