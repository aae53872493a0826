"""Lookups and lists of sessions, branches and turns. Every lookup of a user's object starts from
the user: another user's object is reported exactly like a missing one."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from django.db.models import Exists, F, IntegerField, OuterRef, QuerySet, Value
from django.db.models.expressions import RawSQL

from accounts.models import ApiKey, User
from core.db import one_row, quoted_column, quoted_table

from ..errors import BranchNotFound, MessageNotFound, SessionNotFound, TurnNotFound
from ..models import Branch, LedgerEntry, Message, Session, Turn
from ..models.session import DEFAULT_SESSION_NAME
from ..search import SnippetPart, search_history_page, search_sessions, snippet
from .lineage import branch_lineage

if TYPE_CHECKING:
    from ..models import AnyUser


def parse_pk(value: Any) -> int | None:
    # Untrusted input of any type (a URL part, a query parameter, JSON): int() decides.
    try:
        pk = int(value)
    except (TypeError, ValueError):
        return None
    return pk if 0 < pk < 2**63 else None


def get_session_for_user(user: AnyUser, pk: object) -> Session:
    key = parse_pk(pk)
    if key is None:
        raise SessionNotFound()
    try:
        return Session.objects.for_user(user).get(pk=key)
    except Session.DoesNotExist:
        raise SessionNotFound() from None


def session_ref_for_user(user: AnyUser, pk: object) -> Session:
    """The user's session `pk` as an unread reference (its id and its owner, nothing else), for
    a writer that proves it is the user's by its first statement: a submission's lock is scoped
    to the owner (sessions_app.turns.turn_start), so another user's session, or none, is
    SessionNotFound there, exactly as here. It saves the request a read of the session."""
    key = parse_pk(pk)
    owner = user.pk if getattr(user, "is_authenticated", False) else None
    if key is None or not isinstance(owner, int):
        raise SessionNotFound()
    return Session(pk=key, owner_id=owner)


Access = Literal["ok", "signed_out", "not_found"]
# Who watches a session's events: the user, the session, the API key the socket was opened with.
Watcher = tuple[int, int, int | None]


def watch_access_many(watchers: Iterable[Watcher]) -> dict[Watcher, Access]:
    """Whether each watcher of a session's events (a socket: its user, session and API key) may
    still hear them, all in one query (a UNION of the active users, the sessions' owners and the
    active keys among those named): "signed_out" when the user is no longer active (or gone) or
    the API key the socket was opened with is revoked, "not_found" when the session is no longer
    the user's (deleted, or given to someone else), else "ok"."""
    watchers = set(watchers)
    users = {user for user, _, _ in watchers}
    sessions = {session for _, session, _ in watchers}
    keys = {key for _, _, key in watchers if key is not None}

    def rows(kind: str, query: QuerySet[Any], owner: str) -> QuerySet[Any]:
        annotated: QuerySet[Any] = query.order_by().annotate(kind=Value(kind))
        return annotated.values_list("kind", "pk", owner)

    found = rows("user", User.objects.filter(pk__in=users, is_active=True), "pk").union(
        rows("session", Session.objects.filter(pk__in=sessions), "owner_id"),
        rows("key", ApiKey.objects.active().filter(pk__in=keys), "user_id"),
        all=True,
    )
    active: set[int] = set()
    owner_of: dict[str, dict[int, int]] = {"session": {}, "key": {}}
    for kind, pk, owner in found:
        if kind == "user":
            active.add(pk)
        else:
            owner_of[kind][pk] = owner
    answers: dict[Watcher, Access] = {}
    for user, session, key in watchers:
        if user not in active or (key is not None and owner_of["key"].get(key) != user):
            answers[(user, session, key)] = "signed_out"
        else:
            owned = owner_of["session"].get(session) == user
            answers[(user, session, key)] = "ok" if owned else "not_found"
    return answers


def get_branch_for_user(user: AnyUser, pk: object) -> Branch:
    key = parse_pk(pk)
    if key is None:
        raise BranchNotFound()
    try:
        return Branch.objects.for_user(user).select_related("session").get(pk=key)
    except Branch.DoesNotExist:
        raise BranchNotFound() from None


def get_turn_for_user(user: AnyUser, pk: object, *, session: Session | None = None) -> Turn:
    """One of the user's turns (of `session`, when given)."""
    key = parse_pk(pk)
    if key is None:
        raise TurnNotFound()
    turns = Turn.objects.for_user(user).select_related("user_message", "reply_message")
    if session is not None:
        turns = turns.filter(session=session)
    try:
        return turns.get(pk=key)
    except Turn.DoesNotExist:
        raise TurnNotFound() from None


def sessions_for_user(user: AnyUser) -> QuerySet[Session]:
    return Session.objects.for_user(user).order_by("-created_at", "-id")


SESSION_ORDERS = {
    "created": ("-created_at", "-id"),
    "activity": ("-updated_at", "-id"),
}


def sessions_listed(
    user: AnyUser,
    *,
    query: str = "",
    archived: bool = False,
    order: str = "created",
    session_key: str | None = None,
    pinned: bool | None = None,
) -> QuerySet[Session]:
    """The user's sessions as lists show them: the archived ones or the others, matching `query`
    (names, session keys and message text, see sessions_app/search.py), with `session_key`
    only the session of that exact key, with `pinned` only the pinned ones (or only the others),
    newest first by creation or, with order="activity", most recently active first."""
    sessions = Session.objects.for_user(user)
    sessions = sessions.filter(archived_at__isnull=not archived)
    if session_key is not None:
        sessions = sessions.filter(session_key=session_key)
    if pinned is not None:
        sessions = sessions.filter(pinned_at__isnull=not pinned)
    return search_sessions(sessions, query).order_by(*SESSION_ORDERS[order])


def sessions_sidebar(
    user: AnyUser, *, query: str = "", archived: bool = False
) -> QuerySet[Session]:
    """The user's sessions as the chat page's sidebar lists them: the pinned ones first (the
    last pinned on top), then the others, most recently active first."""
    listed = sessions_listed(user, query=query, archived=archived, order="activity")
    return listed.order_by(F("pinned_at").desc(nulls_last=True), "-updated_at", "-id")


class ConversationHit(TypedDict):
    """A message found by a search inside one conversation, with its snippet."""

    message: Message
    snippet: list[SnippetPart]


@dataclass(frozen=True)
class ConversationHits:
    """A page of a search inside one conversation: its hits, newest first; how many match in all
    (the first page only); the position the next page of older hits is below, if there is one."""

    hits: list[ConversationHit]
    total: int | None
    next_before: int | None


def conversation_hits(
    session: Session, query: str, *, before: int | None = None
) -> ConversationHits:
    """The messages of the session's current branch history that match `query` (see
    sessions_app/search.py), newest first (those below position `before` for the next page),
    each with a snippet around the match: three queries, four when the first page has more."""
    branch = current_branch(session)
    found = search_history_page(branch_lineage(branch), query, before=before)
    hits: list[ConversationHit] = [
        {"message": m, "snippet": snippet(m.content or m.tool_result, query)}
        for m in found.messages
    ]
    return ConversationHits(hits=hits, total=found.total, next_before=found.next_before)


def sessions_idle(*, since: datetime) -> QuerySet[Session]:
    """Sessions nobody has touched since `since` (no message, turn, rename or other change: their
    `updated_at` is older), not archived, with no turn queued or running."""
    return (
        Session.objects.active()
        .filter(updated_at__lt=since)
        .exclude(Exists(Turn.objects.active().filter(session=OuterRef("pk"))))
    )


def sessions_blank(user: AnyUser) -> QuerySet[Session]:
    """The user's sessions as "New session" left them, newest first: listed (not archived), not
    pinned, never named (still DEFAULT_SESSION_NAME), no integration's key, no message or turn.
    Whether their settings are their own, and whether the apps above keep anything of them
    (workspace files, checkpoints: sessions_app.hooks.session_holds), the caller checks
    (sessions_app.services.session_new_or_blank)."""
    return (
        Session.objects.for_user(user)
        .active()
        .filter(pinned_at__isnull=True, session_name=DEFAULT_SESSION_NAME, session_key="")
        .exclude(Exists(Message.objects.filter(branch__session=OuterRef("pk"))))
        .exclude(Exists(Turn.objects.filter(session=OuterRef("pk"))))
        .order_by("-created_at", "-id")
    )


def with_branch_summary(sessions: QuerySet[Session]) -> QuerySet[Session]:
    """Each session with `branch_count` and `current_branch_id`, in the same query: two
    subqueries on the session's own row, written as SQL (Django's Subquery, Count and Coalesce
    for them took a session's read about 1.5 ms to compile)."""
    branches = quoted_table(Branch)
    session_id = f"{quoted_table(Session)}.{quoted_column(Session, 'pk')}"
    of_session = f"{quoted_column(Branch, 'session')} = {session_id}"
    current, pk = quoted_column(Branch, "is_current"), quoted_column(Branch, "pk")
    # Quoted names only; the one value is bound.
    count = f"(SELECT COUNT(*) FROM {branches} WHERE {of_session})"  # noqa: S608
    chosen = f"(SELECT {pk} FROM {branches} WHERE {of_session} AND {current} = %s LIMIT 1)"  # noqa: S608
    return sessions.annotate(
        branch_count=RawSQL(count, [], output_field=IntegerField()),  # noqa: S611
        current_branch_id=RawSQL(chosen, [True], output_field=IntegerField()),  # noqa: S611
    )


def current_branch(session: Session) -> Branch:
    try:
        return Branch.objects.select_related("session").get(session=session, is_current=True)
    except Branch.DoesNotExist:
        raise BranchNotFound("This session has no current branch.") from None


def session_branches(session: Session) -> QuerySet[Branch]:
    return Branch.objects.filter(session=session).order_by("created_at", "id")


def session_ledger(session: Session) -> QuerySet[LedgerEntry]:
    """The session's effects ledger, oldest first (models.ledger)."""
    return LedgerEntry.objects.filter(session=session).order_by("id")


def session_branches_with_forks(session: Session) -> list[Branch]:
    """The session's branches, oldest first, with the checkpoints they were restored from: one
    query, for the labels, the tree and the versions of messages."""
    return list(session_branches(session).select_related("forked_from"))


def latest_session_for_user(user: AnyUser) -> Session | None:
    """The user's most recently active session that is not archived (the chat's home)."""
    return sessions_listed(user, order="activity").first()


def session_with_summary_for_user(user: AnyUser, pk: object) -> Session:
    """The user's session `pk` with its `branch_count` and `current_branch_id`, in one query
    (no ORDER BY: one row by its key); SessionNotFound when it is not theirs, or missing."""
    key = parse_pk(pk)
    if key is None:
        raise SessionNotFound()
    session = one_row(with_branch_summary(sessions_for_user(user)).filter(pk=key))
    if session is None:
        raise SessionNotFound()
    return session


def active_turn(session: Session) -> Turn | None:
    """The session's turn that is queued, running or awaiting an approval, if any."""
    return Turn.objects.filter(session=session).active().order_by("-created_at").first()


def last_turn(session: Session) -> Turn | None:
    """The session's latest turn, with the checkpoint it rolled back to."""
    return (
        Turn.objects.filter(session=session)
        .select_related("rolled_back_to")
        .order_by("-created_at", "-id")
        .first()
    )


def turn_reloaded(turn: Turn) -> Turn | None:
    """The turn as it now stands, with its user message and reply (None once deleted)."""
    return one_row(Turn.objects.select_related("user_message", "reply_message").filter(pk=turn.pk))


def message_for_user(
    user: AnyUser, session: Session, pk: object, *, role: str | None = None
) -> Message | None:
    """The user's message `pk` of any branch of `session` (of that `role` when given), with its
    branch; None when it is missing, another session's or another user's."""
    key = parse_pk(pk)
    if key is None:
        return None
    messages = Message.objects.for_user(user).filter(pk=key, branch__session=session)
    if role is not None:
        messages = messages.filter(role=role)
    return messages.select_related("branch__session").first()


def get_message_for_user(user: AnyUser, pk: object, *, session: Session | None = None) -> Message:
    """One of the user's messages, on any branch of any of their sessions (of `session`, when
    given), with its branch and session; MessageNotFound when it is missing or another user's."""
    key = parse_pk(pk)
    if key is None:
        raise MessageNotFound()
    messages = Message.objects.for_user(user).select_related("branch__session")
    if session is not None:
        messages = messages.filter(branch__session=session)
    try:
        return messages.get(pk=key)
    except Message.DoesNotExist:
        raise MessageNotFound() from None


def message_place(user: AnyUser, session: Session, pk: object) -> tuple[int, int] | None:
    """Where the user's message `pk` of `session` sits: its branch's id and its position; None
    when it is missing, another session's or another user's. One query, no message loaded."""
    key = parse_pk(pk)
    if key is None:
        return None
    found = (
        Message.objects.for_user(user)
        .filter(pk=key, branch__session=session)
        .values_list("branch_id", "position")
        .first()
    )
    return (found[0], found[1]) if found is not None else None
