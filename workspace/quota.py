"""The workspace's storage quotas: per session and per user, on file versions and on the bytes of
file contents, set by the operator (WORKSPACE_SESSION_MAX_VERSIONS, WORKSPACE_SESSION_MAX_BYTES,
WORKSPACE_USER_MAX_VERSIONS, WORKSPACE_USER_MAX_BYTES; 0: no quota).

What counts is what is stored. Every write keeps a version row (checkpoints and branches read
them), whatever it wrote; a deletion keeps one too. A content is stored once per session
(`WorkspaceBlob`, unique by SHA-256 within its session, deleted once no version uses it), so the
bytes of a session are the sizes of its distinct contents: writing a content the session already
holds (the same text again, a file copied) adds a version and no bytes. Two sessions holding the
same text each store it, and each counts it; a user's figures are the sums over their sessions.

The figures are aggregates over indexed rows, read when a write needs them (no counter to keep
true through rewinds, failed turns and deleted sessions). They stay right under concurrent
writes because the writer holds the session's lock (a session's figures) and its owner's row
(a user's, across their sessions) from the check until it commits: workspace.services takes
them in the order every writer does, the user's row first (accounts.services.lock_user).

A write over a quota is refused (QuotaExceeded, 413) before anything is written. A deletion is
never refused: it stores no content, and each follows a write that was counted.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db.models import Count, Sum

from core.errors import TooLarge

from .models import FileVersion, WorkspaceBlob


class QuotaExceeded(TooLarge):
    pass


@dataclass(frozen=True)
class Storage:
    """What a session's (or a user's) workspaces store."""

    versions: int
    bytes: int


@dataclass(frozen=True)
class Quota:
    """The operator's limits for one session or one user (0: none)."""

    versions: int
    bytes: int


@dataclass(frozen=True)
class StorageUse:
    """Storage beside its quota, for the pages that show it."""

    used: Storage
    quota: Quota


def session_quota() -> Quota:
    return Quota(
        int(getattr(settings, "WORKSPACE_SESSION_MAX_VERSIONS", 0)),
        int(getattr(settings, "WORKSPACE_SESSION_MAX_BYTES", 0)),
    )


def user_quota() -> Quota:
    return Quota(
        int(getattr(settings, "WORKSPACE_USER_MAX_VERSIONS", 0)),
        int(getattr(settings, "WORKSPACE_USER_MAX_BYTES", 0)),
    )


def session_storage(session_id: int) -> Storage:
    """The session's versions (every branch) and the bytes of its distinct contents."""
    versions = FileVersion.objects.filter(branch__session_id=session_id).aggregate(n=Count("pk"))
    size = WorkspaceBlob.objects.filter(session_id=session_id).aggregate(b=Sum("size"))
    return Storage(int(versions["n"] or 0), int(size["b"] or 0))


def user_storage(user_id: int) -> Storage:
    """The sums of session_storage over the user's sessions."""
    versions = FileVersion.objects.filter(branch__session__owner_id=user_id).aggregate(
        n=Count("pk")
    )
    size = WorkspaceBlob.objects.filter(session__owner_id=user_id).aggregate(b=Sum("size"))
    return Storage(int(versions["n"] or 0), int(size["b"] or 0))


def session_use(session_id: int) -> StorageUse:
    return StorageUse(session_storage(session_id), session_quota())


def user_use(user_id: int) -> StorageUse:
    return StorageUse(user_storage(user_id), user_quota())


_FREE_SESSION = (
    "Deleting a file frees nothing (its earlier versions stay for the checkpoints): rewind this "
    "session to an earlier checkpoint (its later versions are deleted), or go on in a new session."
)
_FREE_USER = (
    "Deleting a file frees nothing (its earlier versions stay for the checkpoints): delete "
    "sessions you no longer need, or rewind a session to an earlier checkpoint."
)


def _refusal(
    whose: str, what: str, used: int, adding: int, limit: int, setting: str, free: str
) -> QuotaExceeded:
    unit = "file versions" if what == "versions" else "bytes of file contents"
    return QuotaExceeded(
        f"Over the workspace quota: {whose} keep {used:,} {unit}, and this would add "
        f"{adding:,}; the quota is {limit:,} ({setting}). Nothing was written, and the files "
        f"are as they were. {free}"
    )


def quota_check(*, session_id: int, owner_id: int, versions: int, new_bytes: int) -> None:
    """Refuse (QuotaExceeded) to store `versions` more version rows and `new_bytes` more bytes
    of contents the session does not hold yet, when that would pass the session's or its
    owner's quota. Call it holding the session's lock and the owner's row (see above), before
    writing."""
    checks = (
        ("this session's workspace", session_quota(), _FREE_SESSION, "SESSION", session_id),
        ("your sessions' workspaces", user_quota(), _FREE_USER, "USER", owner_id),
    )
    for whose, quota, free, scope, pk in checks:
        if not (quota.versions or quota.bytes):
            continue
        used = session_storage(pk) if scope == "SESSION" else user_storage(pk)
        if quota.versions and versions and used.versions + versions > quota.versions:
            raise _refusal(
                whose,
                "versions",
                used.versions,
                versions,
                quota.versions,
                f"WORKSPACE_{scope}_MAX_VERSIONS",
                free,
            )
        if quota.bytes and new_bytes and used.bytes + new_bytes > quota.bytes:
            raise _refusal(
                whose,
                "bytes",
                used.bytes,
                new_bytes,
                quota.bytes,
                f"WORKSPACE_{scope}_MAX_BYTES",
                free,
            )
