"""The bot's commands in a linked chat, over the same services as `manage.py chat`
(AgentService, RollbackAgent, checkpoints): each takes the user, the chat and the command's
argument and answers with the text to send back."""

from __future__ import annotations

from collections.abc import Callable

from accounts.models import User
from agents.context import left_behind_lines
from agents.rollback_agent import RollbackAgent
from agents.service import AgentService, branch_lines, counted
from checkpoints.errors import CheckpointNotFound
from checkpoints.selectors import find_session_checkpoint
from sessions_app.models import ExternalSession

from .conversations import chat_session, chat_session_new

HELP = """Commands:
/checkpoint NAME — save a checkpoint of the conversation as it stands
/list — list the conversation's checkpoints
/rollback ID_OR_NAME — restore a checkpoint as a new branch and continue there
/branches — list the conversation's branches (* = current)
/new — start a new conversation (the old one stays in the web app)
/help — show this help
Anything else is a message to the agent."""


def _agent(service: AgentService, session: ExternalSession) -> RollbackAgent:
    agent = service.resume_agent(session.pk)
    if agent is None:  # deleted between the two reads
        raise CheckpointNotFound("This conversation was just deleted; send /new.")
    return agent


def _where(agent: RollbackAgent) -> str:
    branch = agent.refresh_branch()
    return f"Now on branch {branch.pk} ({counted(branch.message_count, 'message')})."


def checkpoint(user: User, chat_id: int, arg: str) -> str:
    if not arg:
        return "Give the checkpoint a name: /checkpoint NAME"
    session = chat_session(user=user, chat_id=chat_id)
    return _agent(AgentService(user=user), session).create_checkpoint(arg)


def checkpoints_list(user: User, chat_id: int, arg: str) -> str:
    session = chat_session(user=user, chat_id=chat_id)
    return _agent(AgentService(user=user), session).list_checkpoints_tool()


def rollback(user: User, chat_id: int, arg: str) -> str:
    if not arg:
        return "Say which checkpoint: /rollback ID_OR_NAME (see /list)"
    service = AgentService(user=user)
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
    session = chat_session(user=user, chat_id=chat_id)
    return "\n".join(branch_lines(AgentService(user=user).list_internal_sessions(session.pk)))


def new(user: User, chat_id: int, arg: str) -> str:
    session = chat_session_new(user=user, chat_id=chat_id)
    return (
        f"A new conversation has started (session {session.pk}). The previous one stays in "
        "the web app."
    )


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
