"""The quotas hold under concurrent writes, in threads on PostgreSQL (SQLite serialises every
writer anyway): writers in several sessions of one user, and several in one session, never store
more than the quota however their checks and inserts interleave (the owner's row and the
session's lock order them)."""

from __future__ import annotations

import pytest

from sessions_app.models import Branch
from sessions_app.services import session_create
from tests.workspace.test_concurrency import _run_threads
from workspace.models import FileVersion
from workspace.quota import QuotaExceeded
from workspace.services import file_write

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

WRITERS = 6
WRITES = 4


def _writers(branches: list[Branch], refused: list[int]):
    def writer(i: int, branch: Branch):
        def work() -> None:
            for j in range(WRITES):
                try:
                    file_write(branch=branch, path=f"w{i}/{j}.txt", content=f"writer {i}, {j}")
                except QuotaExceeded:
                    refused.append(1)

        return work

    return [writer(i, b) for i, b in enumerate(branches)]


def _branch(alice, name: str) -> Branch:
    return Branch.objects.get(session=session_create(owner=alice, name=name))


def test_writers_in_several_sessions_never_pass_the_users_quota(alice, settings):
    settings.WORKSPACE_USER_MAX_VERSIONS = 10
    settings.WORKSPACE_SESSION_MAX_VERSIONS = 0
    branches = [_branch(alice, f"s{i}") for i in range(WRITERS)]
    refused: list[int] = []

    assert _run_threads(*_writers(branches, refused)) == []

    assert FileVersion.objects.filter(branch__session__owner=alice).count() == 10
    assert len(refused) == WRITERS * WRITES - 10


def test_writers_in_one_session_never_pass_its_quota(alice, settings):
    settings.WORKSPACE_SESSION_MAX_VERSIONS = 7
    settings.WORKSPACE_USER_MAX_VERSIONS = 0
    branch = _branch(alice, "busy")
    refused: list[int] = []

    assert _run_threads(*_writers([branch] * WRITERS, refused)) == []

    assert FileVersion.objects.filter(branch=branch).count() == 7
    assert len(refused) == WRITERS * WRITES - 7
