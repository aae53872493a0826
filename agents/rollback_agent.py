"""RollbackAgent: an agno Agent with the built-in tools (agents.builtin_tools), over our database.

One agent works on one branch of one session. It holds no history of its own: every turn reads the
branch's history from the database and stores what the run added (see agents.turn). Its tool
methods (agents.checkpoint_tools, agents.memory_tools, agents.file_tools) are also the tools the
model sees, under the names of the public contract.
It owns its agno `Agent` (`agent.agent`) rather than being one: its `run` is seed 003's (a
message in, a whole turn stored), not agno's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from agno.agent import Agent
from agno.models.base import Model
from agno.models.message import Message as AgnoMessage
from agno.run.agent import RunOutput

from access.selectors import allowance_for
from checkpoints.models import Checkpoint
from checkpoints.selectors import find_session_checkpoint
from checkpoints.services import checkpoint_restore
from core import events
from sessions_app.models import Branch, Session, Turn
from sessions_app.selectors import branch_history, current_branch
from sessions_app.services import branch_activate, branch_create
from sessions_app.turns.paused import paused_state

from .approval_gate import ApprovalGate
from .builtin_tools import INTRO, REGISTRY, SHELL
from .checkpoint_tools import CheckpointTools
from .file_tools import FileTools
from .instructions import owner_instructions, owner_instructions_for
from .mcp.toolset import McpToolset, mcp_toolset
from .mcp.vision import sees_images
from .memory_tools import MemoryTools
from .model import max_tool_calls
from .repositories import CheckpointRepository, InternalSessionRepository
from .shell_tools import ShellTools
from .tool_deadline import ToolDeadlines
from .tool_errors import tool_errors_hook
from .tools import (
    CHECKPOINT_TOOLS,
    MEMORY_TOOLS,
    agno_tools,
    configured_tools,
    effects_of,
    names_of,
    timeouts_of,
    tool_names,
    without_replaced,
)
from .turn.claim import MCP_SERVERS_ENABLED, claim_may_find
from .turn.pipeline import resume_message, run_message
from .turn.surface import AgnoAgent, RunItem
from .turn_state import ROLLBACK_KEYS, Hold, TurnState, saved_calls, starting_state

if TYPE_CHECKING:
    from accounts.models import User

__all__ = ["CHECKPOINT_TOOLS", "MEMORY_TOOLS", "RollbackAgent"]
log = logging.getLogger(__name__)


def auto_checkpoint_enabled(session: Session) -> bool:
    """The session's own setting, else its owner's preference, else on."""
    value = session.settings.get("auto_checkpoint")
    if isinstance(value, bool):
        return value
    value = session.owner.preference("auto_checkpoint", True)
    return value if isinstance(value, bool) else True


def load_session(external_session_id: int | str, *, user: User | None) -> Session:
    """One of `user`'s sessions; ValueError when there is none, as in seed 003. There is no
    default: server-side code that may open anyone's session (seed 003's API used without a
    user, as in a Django shell) says so with `user=None`."""
    sessions = Session.objects.select_related("owner")
    if user is not None:
        sessions = sessions.filter(owner=user)
    try:
        return sessions.get(pk=int(external_session_id))
    except (Session.DoesNotExist, ValueError, TypeError, OverflowError):
        raise ValueError(f"Session {external_session_id} not found.") from None


def _claimed_rows(
    turn: Turn | None, session_id: int | str, branch_id: int | None, user: User | None
) -> tuple[Session, Branch] | None:
    """The session and branch a claim read with `turn` (agents.worker.agent_for_turn), when
    they are the ones asked for (else None: they are read)."""
    if turn is None or not (Turn.session.is_cached(turn) and Turn.branch.is_cached(turn)):
        return None
    session, branch = turn.session, turn.branch
    if branch is None or str(session.pk) != str(session_id) or branch.pk != branch_id:
        return None
    if user is not None and session.owner_id != user.pk:
        return None
    return session, branch


def _repository(argument: str, given: object, ours: type, user: User | None) -> object:
    """The repository an agent keeps: the one given, else this app's own."""
    if given is None:
        return ours(user)
    if not isinstance(given, ours):
        log.warning(
            "RollbackAgent(%s=%r): not used for storage; sessions and checkpoints are stored in "
            "this app's database (agents.repositories.%s reads them)",
            argument,
            given,
            ours.__name__,
        )
    return given


class RollbackAgent(CheckpointTools, MemoryTools, FileTools, ShellTools):
    """An agent bound to one session and one of its branches, running an agno Agent. Its
    built-in tools are declared in agents.builtin_tools; the methods among them come from
    agents.checkpoint_tools, agents.memory_tools and agents.file_tools."""

    # The tools that work on checkpoints themselves: using them takes no automatic checkpoint.
    # Every other tool does, the memory tools included, as the public contract says.
    checkpoint_tools = CHECKPOINT_TOOLS

    def __init__(
        self,
        external_session_id: int,
        model: Model | None,
        auto_checkpoint: bool = True,
        internal_session_repo: object = None,
        checkpoint_repo: object = None,
        skip_session_creation: bool = False,
        *,
        internal_session_id: int | None = None,
        user: User | None = None,
        tools: list[Any] | None = None,
        activate_branch: bool = True,
        carry_out_rollbacks: bool = False,
        for_turn: Turn | None = None,
        **kwargs: Any,
    ) -> None:
        """Seed 003's constructor: its six arguments in its order, by position or by keyword;
        the rest are keyword-only (agno's `Agent` arguments pass through `kwargs`).

        - `internal_session_repo`, `checkpoint_repo`: the storage is always this app's database,
          written through its services. The agent keeps the repositories it is given as
          `agent.internal_session_repo` and `agent.checkpoint_repo` (by default this app's own,
          agents.repositories); one of another kind is logged as not used for storage.
        - `tools`: custom tools beside the built-in ones (and those of AGENT_TOOLS); one with a
          built-in's name replaces that built-in for this agent, and the start logs it.
        - `carry_out_rollbacks`: False (seed 003), a rollback the model asks for stays a request
          in `session_state` for `AgentService.handle_agent_response` and
          `AgentService.rollback_to_checkpoint`; True (the web and API turns), the turn carries
          it out itself when it ends.
        - `for_turn`: a worker's agent, built for this one turn just claimed: its session (with
          its owner) and its branch are those the claim read (`select_related`), not read again,
          and the turn's owner instructions come from them (agents.worker.agent_for_turn).
        - `kwargs`: agno `Agent` arguments (`instructions`, `markdown`, ...) for the agno agent
          this one owns (`self.agent`).
        """
        rows = _claimed_rows(for_turn, external_session_id, internal_session_id, user)
        session = rows[0] if rows else load_session(external_session_id, user=user)
        self.built_for_turn = for_turn.pk if rows and for_turn is not None else None
        self.external_session: Session = session
        self.auto_checkpoint = auto_checkpoint
        self.carry_out_rollbacks = carry_out_rollbacks
        self.internal_session_repo = _repository(
            "internal_session_repo", internal_session_repo, InternalSessionRepository, user
        )
        self.checkpoint_repo = _repository(
            "checkpoint_repo", checkpoint_repo, CheckpointRepository, user
        )
        self.internal_session: Branch = (
            rows[1]
            if rows
            else self._pick_branch(
                session, internal_session_id, skip_session_creation, activate_branch
            )
        )
        # The outcome of the last turn and of the last rollback carried out.
        self.last_turn: Turn | None = None
        self.last_rollback: Checkpoint | None = None
        # The running turn's attempt (agents.turn_state), from its start to its end: what the
        # tools and their hooks read and write of the turn. None between turns.
        self.turn_state: TurnState | None = None
        # The Python API's callbacks when `run` is given none: a listener of the session's
        # events, and the answer to a call that needs approval (the turn's `pending_approval`
        # in, True approves; None leaves the turn awaiting approval for `answer_approval`).
        self.on_event: Callable[[events.Event], None] | None = None
        self.approver: Callable[[Any], bool] | None = None
        # What the owner's access gives them (access.selectors): the operator's custom tools
        # it names, and the shell tools only when it allows them. (Tools given to this agent by
        # its Python caller are theirs to give.)
        allowance = allowance_for(session.owner)
        configured = [
            t for t in configured_tools() if all(map(allowance.allows_tool, tool_names(t)))
        ]
        custom = [*without_replaced(configured, tools or []), *(tools or [])]
        off = frozenset() if allowance.may_use_shell else frozenset({SHELL.key})
        # The built-in tools, in the registry's order (agents.builtin_tools).
        builtins = REGISTRY.implementations(self, groups_off=off)
        kept = without_replaced(builtins, custom)
        replaced = names_of(builtins) - names_of(kept)
        for name in sorted(replaced & names_of(tools or [])):
            log.info("The custom tool %r replaces the built-in tool for this agent", name)
        # A checkpoint tool replaced by a custom one is a tool like any other: it checkpoints.
        self.checkpoint_tools = REGISTRY.names(checkpoint=True) - replaced
        # The built-in tools this agent offers: they refuse with a result (agents.tools.REFUSED).
        self.builtin_tools = names_of(kept)
        # What each tool's call does (`none`, `workspace`, `external`), recorded on its tool
        # message, and the tools whose calls wait for the owner's approval (agents.tools). A
        # turn adds its MCP tools' to its own copies (TurnState), the agent's stay as they are.
        self.tool_effects, self.tool_approvals = effects_of(kept, custom)
        # Every call passes the gate: those of the turn's `tool_approvals` wait for the owner's
        # answer (agents.approval_gate). It wraps the hooks given through `kwargs`, so a refused
        # call runs none.
        self.approvals = ApprovalGate(self.tool_approvals, state_of=lambda: self.turn_state)
        # Each tool's deadline in seconds, by name: the custom tools' own (tool_effect), and
        # (in the turn's copy) the MCP servers'; AGENT_TOOL_TIMEOUT_SECONDS else.
        self.tool_timeouts: dict[str, float] = timeouts_of(custom)
        self.deadlines = ToolDeadlines(
            inline=self.builtin_tools,
            timeouts=self.tool_timeouts,
            state_of=lambda: self.turn_state,
        )
        # Inside the gate, an exception a tool raises reaches the model scrubbed
        # (agents.tool_errors); inside that, a custom or MCP tool runs off the turn's thread
        # within its deadline, and a Stop ends the wait (agents.tool_deadline); the hooks given
        # through `kwargs` run inside all three.
        kwargs["tool_hooks"] = [
            self.approvals.hook,
            tool_errors_hook,
            self.deadlines.hook,
            *(kwargs.get("tool_hooks") or []),
        ]
        # The instructions: a line for each group of built-in tools (agents.builtin_tools).
        kwargs.setdefault("instructions", REGISTRY.instructions(INTRO, groups_off=off))
        kwargs.setdefault("markdown", True)
        # agno refuses the calls of a batch past the limit; ChatModel sends no request after it.
        kwargs.setdefault("tool_call_limit", max_tool_calls())
        # The tools as given (seed 003's view); agno gets them with their schemas built once
        # per process (agents.tools.agno_tools), and the running turn's MCP tools with them: it
        # asks `run_tools` at each run.
        self.tools: list[Any] = [*kept, *custom]
        self._agno_tools = agno_tools(self.tools)
        self.agent: AgnoAgent = Agent(
            model=model,
            # A tool's images go to a model that sees images (agents.mcp.vision), else stay out.
            send_media_to_model=sees_images(model),
            tools=self.run_tools,
            cache_callables=False,
            db=None,
            telemetry=False,
            session_state=dict(self.internal_session.session_state or {}),
            **kwargs,
        )

    # --- the agno agent's surface ------------------------------------------------------------

    @property
    def model(self) -> Model | None:
        return self.agent.model

    @property
    def name(self) -> str | None:
        return self.agent.name

    @property
    def session_state(self) -> dict[str, Any] | None:
        """The branch's state as this agent holds it, and the rollback request its tools write:
        from a turn's start on, that turn's (`TurnState.session_state`, the same dict)."""
        return self.agent.session_state

    @session_state.setter
    def session_state(self, value: dict[str, Any] | None) -> None:
        if self.turn_state is not None:  # a tool replaces it while its turn runs
            value = {} if value is None else value
            self.turn_state.session_state = value
        self.agent.session_state = value

    @property
    def additional_context(self) -> str | None:
        """Added to the instructions for the next run (the turn's memories and summary note)."""
        return self.agent.additional_context

    @additional_context.setter
    def additional_context(self, value: str | None) -> None:
        self.agent.additional_context = value

    def stream(self, messages: list[AgnoMessage]) -> Iterator[RunItem]:
        """One agno run on `messages`, streamed: its events, then its RunOutput."""
        return self.agent.run(messages, stream=True, stream_events=True, yield_run_output=True)

    def run_tools(self) -> list[Any]:
        """The tools agno offers the model in a run: the agent's own, and the running turn's
        MCP tools (agno asks at each run: the agent keeps no turn's tools)."""
        state = self.turn_state
        return [*self._agno_tools, *(state.mcp.functions if state is not None else [])]

    def close_mcp_sessions(self) -> None:
        """The end of a turn's attempt: its MCP sessions (one per server used) are closed."""
        if self.turn_state is not None:
            self.turn_state.mcp.close()

    def offer_mcp_tools(self, turn: Turn | None = None) -> McpToolset:
        """The tools of the MCP servers this agent's session gets, for a turn (listed under its
        heartbeat: a listing may wait AGENT_MCP_TIMEOUT), with their effects, approvals and
        deadlines; a server that is down leaves a notice for the turn instead. None are looked
        for when the claim of `turn` found no server enabled."""
        return mcp_toolset(
            session=self.external_session,
            taken=set(self.tool_effects),
            any_server=turn is None or claim_may_find(turn, MCP_SERVERS_ENABLED),
        )

    @contextmanager
    def attempt(self, turn: Turn, *, hold: Hold) -> Iterator[TurnState]:
        """One attempt at `turn` (agents.turn.pipeline): its state, made now with the MCP tools
        offered to it and the session state it starts from, the agent's `turn_state` until it
        ends. The agent's own session state is the attempt's from now on (its rollback request
        included), until the next attempt starts from it without the request."""
        resumed = paused_state(turn.metadata)  # a continuation resumes from its pause
        mcp = self.offer_mcp_tools(turn)
        state = TurnState(
            turn=turn,
            hold=hold,
            mcp=mcp,
            session_state=starting_state(resumed, self.session_state),
            tool_effects={**self.tool_effects, **mcp.effects},
            tool_approvals=self.tool_approvals | mcp.approvals,
            tool_timeouts={**self.tool_timeouts, **mcp.timeouts},
            resumed=resumed,
            refused=saved_calls(resumed, "refused"),
            given_up=saved_calls(resumed, "given_up"),
        )
        self.session_state = state.session_state
        self.turn_state = state
        try:
            yield state
        finally:
            self.turn_state = None

    @staticmethod
    def _pick_branch(
        session: Session, branch_id: int | None, skip_session_creation: bool, activate: bool
    ) -> Branch:
        if branch_id is not None:
            try:
                branch = Branch.objects.get(pk=branch_id, session=session)
            except (Branch.DoesNotExist, ValueError, TypeError):
                raise ValueError(f"Branch {branch_id} not found in this session.") from None
            if activate and not branch.is_current:
                branch_activate(branch=branch)
            return branch
        if skip_session_creation:
            return current_branch(session)
        return branch_create(session=session)

    # --- the seed's API ----------------------------------------------------------------------

    def run(
        self,
        message: str,
        *,
        on_event: Callable[[events.Event], None] | None = None,
        approver: Callable[[Any], bool] | None = None,
        **kwargs: Any,
    ) -> RunOutput | None:
        """Run one turn: store the user's message, answer it, store the answer, and checkpoint
        automatically after tool use. A rollback the model was asked for stays requested in
        `session_state` (seed 003: `AgentService.handle_agent_response` reports it and
        `AgentService.rollback_to_checkpoint` carries it out), unless this agent carries out
        rollbacks itself (`carry_out_rollbacks`, the web and API turns). `on_event` and
        `approver` are this call's callbacks (else `self.on_event`, `self.approver`). Returns
        agno's RunOutput (`.content` is the reply); the Turn is `self.last_turn`."""
        return run_message(self, message, on_event=on_event, approver=approver)

    def answer_approval(
        self,
        approved: bool,
        *,
        on_event: Callable[[events.Event], None] | None = None,
        approver: Callable[[Any], bool] | None = None,
    ) -> RunOutput | None:
        """Answer the tool call `self.last_turn` waits for (a `run` without `approver` left it
        `awaiting_approval`) and resume the turn here: approved, the tool runs once; refused,
        the model is told. Returns as `run` does; NothingAwaitsApproval when nothing waits."""
        return resume_message(self, approved, on_event=on_event, approver=approver)

    def refresh_branch(self) -> Branch:
        self.internal_session.refresh_from_db()
        return self.internal_session

    def branch_for(self, turn: Turn) -> Branch:
        """The branch as it is when `turn` starts: read again (a change since the agent was
        built: its length, its state), unless the agent was built for this turn from the rows
        its claim read a moment ago."""
        if self.built_for_turn == turn.pk:
            return self.internal_session
        return self.refresh_branch()

    def owner_instructions(self, turn: Turn) -> str | None:
        """The owner's instructions for the session as they are when `turn` starts (a change
        made since the agent was built applies to its next turn: agents.instructions)."""
        session = self.external_session
        if self.built_for_turn == turn.pk:
            return owner_instructions_for(
                session_metadata=session.metadata, user_metadata=session.owner.metadata
            )
        return owner_instructions(session.pk)

    def get_conversation_history(self) -> list[dict[str, Any]]:
        """The branch's whole history, oldest first, as dictionaries."""
        self.refresh_branch()
        return [
            {
                "role": m.role,
                "content": m.content,
                "tool_name": m.tool_name or None,
                "tool_args": m.tool_args,
                "tool_result": m.tool_result or None,
                "created_at": m.created_at.isoformat(),
            }
            for m in branch_history(self.internal_session)
        ]

    def get_session_state(self, session_id: str | None = None) -> dict[str, Any]:
        """The branch's state (seed 003); `session_id` is agno's and has no use here."""
        return dict(self.session_state or {})

    def plan_state(self) -> dict[str, Any]:
        """The state the plan tools keep the todo list in: the run's session state."""
        state = self.session_state
        if state is None:
            state = {}
            self.session_state = state
        return state

    @property
    def requested_rollback(self) -> int | None:
        state = self.session_state or {}
        return state.get("rollback_checkpoint_id") if state.get("rollback_requested") else None

    def clear_rollback_request(self) -> None:
        if self.session_state:
            for key in ROLLBACK_KEYS:
                self.session_state.pop(key, None)

    def carry_out_rollback(self) -> bool:
        """Restore the checkpoint the model asked to roll back to (once), as a new current branch
        this agent moves to. True when one was carried out; CheckpointNotFound when it vanished
        in the meantime."""
        checkpoint_id = self.requested_rollback
        if checkpoint_id is None:
            return False
        self.clear_rollback_request()
        checkpoint = find_session_checkpoint(self.external_session, int(checkpoint_id))
        result = checkpoint_restore(checkpoint=checkpoint, session=self.external_session)
        self.internal_session = result.branch
        self.session_state = dict(result.branch.session_state or {})
        self.last_rollback = checkpoint
        return True

    @classmethod
    def from_checkpoint(
        cls,
        checkpoint_id: int,
        external_session_id: int,
        model: Model | None,
        checkpoint_repo: object = None,
        internal_session_repo: object = None,
        user: User | None = None,
        **kwargs: Any,
    ) -> RollbackAgent:
        """Seed 003's `from_checkpoint`: a new agent on a new branch restored from the checkpoint
        (nothing is lost; the new branch is current). The repositories are kept on the new agent
        as in the constructor; the storage is this app's database either way."""
        session = load_session(external_session_id, user=user)
        checkpoint = find_session_checkpoint(session, int(checkpoint_id))
        restored = checkpoint_restore(checkpoint=checkpoint, session=session).branch
        return cls(
            external_session_id=session.pk,
            model=model,
            skip_session_creation=True,
            internal_session_id=restored.pk,
            user=user,
            checkpoint_repo=checkpoint_repo,
            internal_session_repo=internal_session_repo,
            **kwargs,
        )
