"""`manage.py chat --user NAME [--session ID]`: talk to the agent in the terminal.

A thin REPL over AgentService and the session/checkpoint services: it reads a line, runs it as a
turn (or as a /command) and prints what happened. Ctrl-D or Ctrl-C at the prompt ends it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from agno.run.base import RunStatus
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from accounts.models import User
from agents.agent_service import AgentService, branch_lines, counted
from agents.context import left_behind_lines
from agents.rollback_agent import RollbackAgent
from checkpoints.errors import CheckpointNotFound
from checkpoints.selectors import find_session_checkpoint
from core.errors import DomainError
from core.events import Event
from core.model_choice import is_demo
from core.validation import JSONObject
from sessions_app.approvals import may_have_run_note
from sessions_app.errors import SessionNotFound
from sessions_app.models import Turn
from sessions_app.selectors import get_session_for_user
from sessions_app.services import session_create
from sessions_app.turns import turn_fail

T = TypeVar("T")

HELP = """Commands:
  /checkpoint NAME       save a checkpoint of the conversation as it stands
  /list                  list the session's checkpoints
  /rollback ID_OR_NAME   restore a checkpoint as a new branch and continue there
  /branches              list the session's branches (* = current)
  /history               show the current branch's conversation
  /help                  show this help
  /quit                  leave (or Ctrl-D; Ctrl-C stops a reply, at the prompt it leaves)
Anything else is a message to the agent."""


class Command(BaseCommand):
    help = "Chat with the agent in the terminal, in a new or an existing session of a user."
    prompt = "you> "

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--user", required=True, help="the username to chat as")
        parser.add_argument("--session", help="the id of one of the user's sessions")

    def handle(self, *args: Any, **options: Any) -> None:
        user = self._user(options["user"])
        self.service = AgentService(user=user)
        if options["session"] is None:
            name = f"Chat {timezone.localtime():%Y-%m-%d %H:%M}"
            self.session = session_create(owner=user, name=name)
        else:
            try:
                self.session = get_session_for_user(user, options["session"])
            except SessionNotFound:
                raise CommandError(f"Session {options['session']} not found.") from None
        self.agent = self._resume()
        self._midline = False
        self._tool_args: dict[str | None, JSONObject] = {}
        branch = self.agent.internal_session
        self._line(
            f"Session {self.session.pk} '{self.session.session_name}', "
            f"branch {branch.pk} ({counted(branch.message_count, 'message')}). "
            "Type /help for the commands."
        )
        if is_demo():
            self._line(
                "The offline demo model answers; set OPENAI_API_KEY (and OPENAI_BASE_URL for an "
                "OpenAI-compatible server) to talk to a real model."
            )
        self._loop()

    # --- the loop ---------------------------------------------------------------------------

    def _loop(self) -> None:
        while True:
            try:
                text = input(self.prompt).strip()
                if not text:
                    continue
                if text.startswith("/"):
                    if not self._command(text):
                        return
                else:
                    self._send(text)
            except (EOFError, KeyboardInterrupt):
                self._end_line()
                self._line("")
                self._abandon_turns()
                return
            except DomainError as exc:
                self._line(f"  [error] {exc.message}")

    def _command(self, text: str) -> bool:
        """Carry out one /command. False when the loop should end."""
        name, _, arg = text.partition(" ")
        name, arg = name.lower(), arg.strip()
        if name in ("/quit", "/exit"):
            return False
        if name == "/checkpoint":
            if not arg:
                self._line("Give the checkpoint a name: /checkpoint NAME")
            else:
                self._line(self.agent.create_checkpoint(arg))
        elif name == "/list":
            self._line(self.agent.list_checkpoints_tool())
        elif name == "/rollback":
            self._rollback(arg)
        elif name == "/branches":
            self._branches()
        elif name == "/history":
            total = self.agent.refresh_branch().message_count
            self._line(self.service.get_conversation_summary(self.agent, last=max(total, 1)))
        elif name == "/help":
            self._line(HELP)
        else:
            self._line(f"Unknown command {name}.")
            self._line(HELP)
        return True

    def _rollback(self, arg: str) -> None:
        if not arg:
            self._line("Say which checkpoint: /rollback ID_OR_NAME (see /list)")
            return
        try:
            checkpoint = find_session_checkpoint(
                self.session, arg, branch=self.agent.internal_session if self.agent else None
            )
            agent = self._call(self.service.rollback_to_checkpoint, self.session.pk, checkpoint.pk)
        except CheckpointNotFound as exc:
            self._line(f"  [error] {exc.message} Use /list to see the checkpoints.")
            return
        if agent is None:
            self._line("  [error] That checkpoint no longer exists. Use /list to see the others.")
            return
        self.agent = agent
        self._line(f"Rolled back to checkpoint '{checkpoint.checkpoint_name}'. {self._where()}")
        self._left_behind(agent)

    def _branches(self) -> None:
        branches = self._call(self.service.list_internal_sessions, self.session.pk)
        for line in branch_lines(branches):
            self._line(line)

    # --- a turn -----------------------------------------------------------------------------

    def _send(self, text: str) -> None:
        agent = self.agent
        self._tool_args = {}
        self._streamed = False
        self._started = timezone.now()
        # Approvals are asked here; the turn resumes in this process.
        output = agent.run(text, on_event=self._on_event, approver=self._approve)
        turn = agent.last_turn
        if turn is None:
            return
        if turn.status == Turn.Status.DONE and not self._streamed and turn.reply:
            self._reply(turn.reply)
        self._end_line()
        if getattr(output, "status", None) == RunStatus.cancelled:
            self._line("  [interrupted] The reply was cut short.")
        if turn.status == Turn.Status.FAILED:
            self._line(f"  [error] {turn.error}")
        if turn.metadata.get("rollback_error"):
            self._line(f"  [error] The rollback failed: {turn.metadata['rollback_error']}")
        if self.service.handle_agent_response(agent, output):
            self._carry_out_rollback(agent)

    def _carry_out_rollback(self, agent: RollbackAgent) -> None:
        """The model asked to roll back: carry it out as seed 003 shows, through the service."""
        checkpoint_id = agent.requested_rollback
        agent.clear_rollback_request()
        restored = self._call(self.service.rollback_to_checkpoint, self.session.pk, checkpoint_id)
        if restored is None:
            self._line("  [error] The rollback failed: that checkpoint no longer exists.")
            return
        self.agent = restored
        checkpoint = restored.internal_session.forked_from
        name = checkpoint.checkpoint_name if checkpoint is not None else "?"
        self._line(f"  [rollback] Rolled back to checkpoint '{name}'. {self._where()}")
        self._left_behind(restored)

    def _left_behind(self, agent: RollbackAgent) -> None:
        """What the rollback could not undo: the external effects it left behind."""
        for line in left_behind_lines(agent.internal_session):
            self._line(f"  {line}")

    def _on_event(self, event: Event) -> None:
        if event["type"] == "message.delta":
            self._streamed = True
            self._reply(event["delta"])
        elif event["type"] == "tool.started":
            args = event["args"]
            self._tool_args[event["call_id"]] = args if isinstance(args, dict) else {}
        elif event["type"] == "tool.finished":
            shown = ", ".join(
                f"{k}={v!r}" for k, v in (self._tool_args.get(event["call_id"]) or {}).items()
            )
            result = str(event["result"] or "").replace("\n", "\n      ")
            failed = " (failed)" if event["error"] else ""
            self._event_line(f"  [tool] {event['tool']}({shown}) -> {result}{failed}")
        elif event["type"] == "checkpoint.created":
            auto = " (auto)" if event["is_auto"] else ""
            self._event_line(f"  [checkpoint] {event['name']}{auto}")

    def _approve(self, pending: Any) -> bool:
        """A tool call waits for the owner's approval (the turn's `pending_approval`): ask here.
        The turn's attempt has ended, holding nothing; the answer resumes it in this process
        (agents.turn.pipeline.run_message)."""
        self._end_line()
        args = json.dumps(pending["args"], ensure_ascii=False)
        self._line(f"  [approval] {pending['tool_name']}({args}) waits for your approval.")
        note = may_have_run_note(pending)
        if note:
            self._line(f"  [approval] {note}")
        try:
            return input("  Approve? [y/N] ").strip().lower() in ("y", "yes")
        except EOFError:
            return False

    # --- helpers ----------------------------------------------------------------------------

    def _user(self, username: str) -> User:
        try:
            user = User.objects.get_by_natural_key(username)
        except User.DoesNotExist:
            raise CommandError(f"No user named {username!r}.") from None
        if user.approval == User.Approval.PENDING:
            raise CommandError(
                f"{username!r} waits for an administrator's approval (the admin's Users list)."
            )
        if not user.is_active:
            raise CommandError(f"{username!r} is turned off (refused or deactivated).")
        return user

    def _call(self, method: Callable[..., T], *args: Any) -> T:
        """An AgentService call; its ValueError (the session is gone) ends the command."""
        try:
            return method(*args)
        except ValueError as exc:
            raise CommandError(str(exc)) from None

    def _resume(self) -> RollbackAgent:
        agent = self._call(self.service.resume_agent, self.session.pk)
        if agent is None:  # the session was deleted meanwhile
            raise CommandError(f"Session {self.session.pk} not found.")
        return agent

    def _where(self) -> str:
        branch = self.agent.internal_session
        return f"Now on branch {branch.pk} ({counted(branch.message_count, 'message')})."

    def _abandon_turns(self) -> None:
        """Fail a turn this REPL left running (Ctrl-C mid-turn), so the session is not blocked."""
        started = getattr(self, "_started", None)
        if started is None:
            return
        for turn in Turn.objects.filter(session=self.session, created_at__gte=started).active():
            turn_fail(turn=turn, error="Interrupted in the terminal.")

    def _reply(self, text: str) -> None:
        if not self._midline:
            self.stdout.write("agent> ", ending="")
        self.stdout.write(text, ending="")
        self.stdout.flush()
        self._midline = True

    def _end_line(self) -> None:
        if self._midline:
            self.stdout.write("")
            self._midline = False

    def _event_line(self, text: str) -> None:
        self._end_line()
        self._line(text)

    def _line(self, text: str) -> None:
        self.stdout.write(text)
        self.stdout.flush()
