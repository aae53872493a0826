"""The bot's commands in a linked chat, over the same services as `manage.py chat`
(AgentService, RollbackAgent, checkpoints): each takes the user, the chat and the command's
argument and answers with the text to send back.

Every process imports this module at the start (integrations.tasks, through .updates), so the
agent's code (agents.agent_service, built on agno) is imported by the commands that use it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from accounts.models import User
from agents.context import left_behind_lines
from checkpoints.errors import CheckpointNotFound
from checkpoints.selectors import find_session_checkpoint
from sessions_app.approvals import turn_approve
from sessions_app.errors import NothingAwaitsApproval
from sessions_app.models import Session

from .conversations import awaiting_turn, chat_session, chat_session_new

if TYPE_CHECKING:
    from agents.agent_service import AgentService
    from agents.rollback_agent import RollbackAgent

HELP = """Commands:
/checkpoint NAME — save a checkpoint of the conversation as it stands
/list — list the conversation's checkpoints
/rollback ID_OR_NAME — restore a checkpoint as a new branch and continue there
/branches — list the conversation's branches (* = current)
/new — start a new conversation (the old one stays in the web app)
/approve, /refuse — answer the tool call the agent waits to make
/help — show this help
Anything else is a message to the agent."""


def _service(user: User) -> AgentService:
    from agents.agent_service import AgentService

    return AgentService(user=user)


def _agent(service: AgentService, session: Session) -> RollbackAgent:
    agent = service.resume_agent(session.pk)
    if agent is None:  # deleted between the two reads
        raise CheckpointNotFound("This conversation was just deleted; send /new.")
    return agent


def _where(agent: RollbackAgent) -> str:
    from agents.agent_service import counted

    branch = agent.refresh_branch()
    return f"Now on branch {branch.pk} ({counted(branch.message_count, 'message')})."


def checkpoint(user: User, chat_id: int, arg: str) -> str:
    if not arg:
        return "Give the checkpoint a name: /checkpoint NAME"
    session = chat_session(user=user, chat_id=chat_id)
    return _agent(_service(user), session).create_checkpoint(arg)


def checkpoints_list(user: User, chat_id: int, arg: str) -> str:
    session = chat_session(user=user, chat_id=chat_id)
    return _agent(_service(user), session).list_checkpoints_tool()


def rollback(user: User, chat_id: int, arg: str) -> str:
    if not arg:
        return "Say which checkpoint: /rollback ID_OR_NAME (see /list)"
    service = _service(user)
    session = chat_session(user=user, chat_id=chat_id)
    current = _agent(service, session)
    try:
        found = find_session_checkpoint(session, arg, branch=current.internal_session)
    except CheckpointNotFound as exc:
        return f"{exc.message} Use /list to see the checkpoints."
    agent = service.rollback_to_checkpoint(session.pk, found.pk)
    if agent is None:
        return "That checkpoint no longer exists. Use /list to see the others."
    lines = [f"Rolled back to checkpoint '{found.checkpoint_name}'. {_where(agent)}"]
    return "\n".join([*lines, *left_behind_lines(agent.internal_session)])


def branches(user: User, chat_id: int, arg: str) -> str:
    from agents.agent_service import branch_lines

    session = chat_session(user=user, chat_id=chat_id)
    return "\n".join(branch_lines(_service(user).list_internal_sessions(session.pk)))


def new(user: User, chat_id: int, arg: str) -> str:
    session = chat_session_new(user=user, chat_id=chat_id)
    return (
        f"A new conversation has started (session {session.pk}). The previous one stays in "
        "the web app."
    )


NOTHING_AWAITS = "Nothing waits for your approval."


def _answer(user: User, chat_id: int, approved: bool) -> str:
    """The owner's answer to the tool call the chat's conversation waits for (as the web app's
    Approve and Refuse give it, through the same service)."""
    turn = awaiting_turn(user=user, chat_id=chat_id)
    pending = turn.pending_approval if turn is not None else None
    if turn is None or not isinstance(pending, dict) or not pending.get("tool_call_id"):
        return NOTHING_AWAITS
    try:
        # The very call that waits (its place and attempt too: ids repeat), as the page's card.
        turn_approve(
            turn=turn,
            tool_call_id=pending["tool_call_id"],
            approved=approved,
            call=pending.get("call"),
            attempt=pending.get("attempt"),
        )
    except NothingAwaitsApproval as exc:
        # Answered elsewhere, ended or taken over meanwhile: say why, change nothing.
        return f"Not answered: {exc.message}"
    tool = pending.get("tool_name") or "the tool"
    return f"Approved: {tool} runs now." if approved else f"Refused: {tool} does not run."


def approve(user: User, chat_id: int, arg: str) -> str:
    return _answer(user, chat_id, True)


def refuse(user: User, chat_id: int, arg: str) -> str:
    return _answer(user, chat_id, False)


def help_text(user: User, chat_id: int, arg: str) -> str:
    return HELP


def start_linked(user: User, chat_id: int, arg: str) -> str:
    return f"This chat is already linked to {user.get_username()}. Send /help for the commands."


Command = Callable[[User, int, str], str]
COMMANDS: dict[str, Command] = {
    "checkpoint": checkpoint,
    "list": checkpoints_list,
    "rollback": rollback,
    "branches": branches,
    "new": new,
    "approve": approve,
    "refuse": refuse,
    "help": help_text,
    "start": start_linked,
}


def parse_command(text: str) -> tuple[str, str] | None:
    """(`name`, `argument`) of a `/name[@BotName] argument` message, the name in lower case;
    None for text that is not a command."""
    if not text.startswith("/"):
        return None
    head, *rest = text.split(maxsplit=1)
    name = head[1:].split("@", 1)[0].lower()
    if not name:
        return None
    return name, rest[0].strip() if rest else ""


def run_command(user: User, chat_id: int, name: str, arg: str) -> str:
    command = COMMANDS.get(name)
    if command is None:
        return f"Unknown command /{name}.\n{HELP}"
    return command(user, chat_id, arg)
