"""Erasing a user on request: every row of theirs in every table, in one transaction. Their
sessions (with branches, messages, summaries, checkpoints, turns, the effects ledger's entries
and workspace files: every
version and every content), memories (and their words in
the search index), API keys, their own credentials for MCP servers, browser logins, the
admin's log entries about them and their objects,
their name on audit records, and the account itself. Their open sockets close. The audit record of
the erasure keeps counts and the user's former id, nothing of what they wrote or were called."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from django.contrib.admin.models import LogEntry
from django.contrib.contenttypes.models import ContentType
from django.contrib.sessions.models import Session as LoginSession
from django.db import transaction
from django.db.models import Model, Q

from accounts.models import ApiKey
from accounts.services import lock_user
from agents.models import McpCredential
from checkpoints.models import Checkpoint
from core import events
from governance.models import AuditRecord as GovernanceRecord
from memories.models import Memory
from memories.search import search_index_forget_deleted as memory_index_forget_deleted
from sessions_app.models import Branch, LedgerEntry, Message, Session, Summary, Turn
from sessions_app.search import search_index_forget_deleted
from sessions_app.services import session_delete
from workspace.models import FileVersion, WorkspaceBlob

from .audit import Outcome, Progress, Who, run_audited
from .models import AuditRecord

if TYPE_CHECKING:
    from accounts.models import User


def _login_sessions(user: User) -> Iterator[str]:
    """The keys of the browser logins (Django sessions) of `user`."""
    wanted = str(user.pk)
    for session in LoginSession.objects.iterator(chunk_size=2000):
        if session.get_decoded().get("_auth_user_id") == wanted:
            yield session.session_key


def _admin_log_about(user: User) -> Q:
    """The admin's log entries about the user or any object of theirs (their text repeats the
    object's name)."""
    owned: list[tuple[type[Model], Iterable[int]]] = [
        (type(user), [user.pk]),
        (Session, Session.objects.filter(owner=user).values_list("pk", flat=True)),
        (
            Branch,
            Branch.objects.filter(session__owner=user).values_list("pk", flat=True),
        ),
        (
            Checkpoint,
            Checkpoint.objects.filter(branch__session__owner=user).values_list("pk", flat=True),
        ),
        (ApiKey, ApiKey.objects.filter(user=user).values_list("pk", flat=True)),
        (Memory, Memory.objects.filter(user=user).values_list("pk", flat=True)),
    ]
    about = Q(user=user)
    for model, ids in owned:
        content_type = ContentType.objects.get_for_model(model)
        about |= Q(content_type=content_type, object_id__in=[str(pk) for pk in ids])
    return about


def user_holdings(user: User) -> dict[str, int]:
    """How many rows of each kind are the user's: what an erasure deletes."""
    return {
        "sessions": Session.objects.filter(owner=user).count(),
        "branches": Branch.objects.filter(session__owner=user).count(),
        "messages": Message.objects.filter(branch__session__owner=user).count(),
        "summaries": Summary.objects.filter(last_message__branch__session__owner=user).count(),
        "checkpoints": Checkpoint.objects.filter(branch__session__owner=user).count(),
        "turns": Turn.objects.filter(session__owner=user).count(),
        "effects": LedgerEntry.objects.filter(session__owner=user).count(),
        "file_versions": FileVersion.objects.filter(branch__session__owner=user).count(),
        "file_contents": WorkspaceBlob.objects.filter(session__owner=user).count(),
        "memories": Memory.objects.filter(user=user).count(),
        "api_keys": ApiKey.objects.filter(user=user).count(),
        "mcp_credentials": McpCredential.objects.filter(user=user).count(),
        "browser_logins": sum(1 for _ in _login_sessions(user)),
        "admin_log_entries": LogEntry.objects.filter(_admin_log_about(user)).count(),
    }


def user_erase(*, user: User, who: Who, dry_run: bool = False) -> AuditRecord:
    """Erase everything of `user` (dry: count it). The record's target is "user <id>"."""
    user_id = user.pk

    def work(progress: Progress) -> Outcome:
        holdings = user_holdings(user)
        if not dry_run:
            _erase(user, progress)
        return Outcome(affected=sum(holdings.values()) + 1, details={"rows": holdings})

    return run_audited(
        rule=AuditRecord.Rule.ERASE_USER,
        who=who,
        dry_run=dry_run,
        parameters={"user": user_id},
        target=f"user {user_id}",
        work=work,
    )


def _lock_user_and_sessions(user: User) -> list[int]:
    """Lock what removing the user deletes, before anything is deleted, in the order every
    writer takes the locks: the user's row (a new session, memory or key waits for it, then finds
    the account gone), then each of their sessions' rows in order of id (a writer in a session
    finishes first; one that comes later finds the session gone). Returns the sessions' ids; one
    deleted meanwhile is simply not among them. Call inside the deleting transaction."""
    lock_user(user.pk)
    return list(
        Session.objects.select_for_update()
        .filter(owner=user)
        .order_by("pk")
        .values_list("pk", flat=True)
    )


@transaction.atomic
def user_delete(*, user: User) -> None:
    """Delete an account with everything that is theirs by foreign key (the admin's Delete; an
    erasure, `user_erase`, also removes their logins and their traces in the logs), in the
    erasure's lock order: a plain cascade would delete their sessions' rows before locking the
    sessions, and deadlock with a writer. Their open sockets close."""
    for session_id in _lock_user_and_sessions(user):
        session_delete(session=Session(pk=session_id))
    type(user).objects.filter(pk=user.pk).delete()
    events.sockets_close_user(user=user.pk)


@transaction.atomic
def _erase(user: User, progress: Progress) -> None:
    sessions = _lock_user_and_sessions(user)
    logins = list(_login_sessions(user))
    LogEntry.objects.filter(_admin_log_about(user)).delete()
    for session_id in sessions:
        session_delete(session=Session(pk=session_id))
        progress()
    LoginSession.objects.filter(session_key__in=logins).delete()
    # Their own credentials for MCP servers (the account's deletion would take them too, by
    # CASCADE: said here, since they are secrets).
    McpCredential.objects.filter(user=user).delete()
    # Records of runs this user started by hand keep the run, not the name.
    AuditRecord.objects.filter(actor=user).update(actor=None, actor_name="")
    # So do the restores an administrator made on users' behalf (governance); the records about
    # this user's own conversations go with the account (CASCADE).
    GovernanceRecord.objects.filter(actor=user).update(actor=None, actor_name="")
    # The account's deletion takes its memories (CASCADE).
    type(user).objects.filter(pk=user.pk).delete()
    search_index_forget_deleted()
    memory_index_forget_deleted()
    events.sockets_close_user(user=user.pk)
