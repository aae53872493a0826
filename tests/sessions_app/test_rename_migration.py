"""Migration 0017 (old names ExternalSession -> Session, InternalSession -> Branch) changes no
table and keeps every group's permissions: their codenames follow the models' new names."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from sessions_app.models import Branch, Session

BEFORE = [("sessions_app", "0016_session_pinned_at")]
AFTER = [("sessions_app", "0017_rename_session_branch")]


@pytest.mark.django_db(transaction=True)  # SQLite's schema editor needs autocommit
def test_the_rename_runs_no_sql() -> None:
    out = call_command("sqlmigrate", "sessions_app", "0017", "--database", "default") or ""
    statements = [line for line in out.splitlines() if line.strip() and not line.startswith("--")]
    # Only the transaction's frame (SQLite and PostgreSQL both wrap a migration in one).
    assert [s for s in statements if s not in ("BEGIN;", "COMMIT;")] == []


@pytest.mark.django_db
def test_the_tables_keep_their_names() -> None:
    tables = connection.introspection.table_names()
    assert Session._meta.db_table == "sessions_app_externalsession" in tables
    assert Branch._meta.db_table == "sessions_app_internalsession" in tables


@pytest.fixture
def latest_after():
    """Every migration applied again after the test, which stops at 0017: the worker's later
    tests need today's schema (without this, a later migration's table was missing for them)."""
    yield
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("latest_after")
def test_a_group_keeps_its_session_and_branch_permissions_across_the_rename(django_user_model):
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    ContentType.objects.clear_cache()
    editors = Group.objects.create(name="editors")
    editors.permissions.add(
        Permission.objects.get(codename="view_externalsession"),  # its old name
        Permission.objects.get(codename="change_internalsession"),  # its old name
    )
    before = Permission.objects.count()

    executor = MigrationExecutor(connection)
    executor.migrate(AFTER)
    ContentType.objects.clear_cache()

    assert Permission.objects.count() == before  # renamed, none added or lost
    assert sorted(editors.permissions.values_list("codename", "name")) == [
        ("change_branch", "Can change branch"),
        ("view_session", "Can view session"),
    ]
    assert not Permission.objects.filter(codename__endswith="externalsession").exists()
    carol = django_user_model.objects.create_user(username="carol")
    carol.groups.add(editors)
    assert carol.has_perm("sessions_app.view_session")
    assert carol.has_perm("sessions_app.change_branch")
    assert ContentType.objects.get_for_model(Session).model == "session"
